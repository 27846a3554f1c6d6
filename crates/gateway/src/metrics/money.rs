//! A counter of money: billionths added as integers, shown as the amount
//! they are. prometheus-client's `f64` counter adds floats, and a float
//! summed request after request drifts off the bill's digits
//! (`0.0025022999999999994`); this one adds exactly and converts once, as
//! `/metrics` is read.

use callai_engine::cost::from_nanos;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A counter of an amount in billionths of a currency.
#[derive(Debug, Clone, Default)]
pub(super) struct MoneyCounter(Arc<AtomicU64>);

impl MoneyCounter {
    /// Adds `nanos` billionths (at most the most there is).
    pub(super) fn add(&self, nanos: u64) {
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_add(nanos))
            });
    }

    #[cfg(test)]
    pub(super) fn nanos(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl TypedMetric for MoneyCounter {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for MoneyCounter {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        // The one float: exact to the digit for amounts under a million.
        let amount = from_nanos(self.0.load(Ordering::Relaxed));
        encoder.encode_counter::<NoLabelSet, _, u64>(&amount, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    #[test]
    fn a_sum_of_amounts_is_shown_with_the_bills_digits() {
        let counter = MoneyCounter::default();
        for nanos in [78_000, 2_454_000, 54_000, 316_300] {
            counter.add(nanos);
        }
        assert_eq!(counter.nanos(), 2_902_300);
        let mut registry = Registry::default();
        registry.register("spent", "money", counter.clone());
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(text.contains("spent_total 0.0029023\n"), "{text}");
        counter.add(u64::MAX);
        assert_eq!(
            counter.nanos(),
            u64::MAX,
            "saturates, never wraps to little"
        );
    }
}
