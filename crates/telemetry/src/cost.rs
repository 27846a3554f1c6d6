//! What a provider request cost, on its span and summed on its call's:
//! `callai.cost.amount`, `callai.cost.currency`, `callai.cost.complete`.
//! Prices are the embedder's (`callai serve` has its price list); this
//! crate only asks and writes the answer down.

use callai_engine::observe::{RequestEnd, RequestStart};
use opentelemetry::KeyValue;

/// Prices provider requests for their spans.
pub trait AttemptPricer: Send + Sync + std::fmt::Debug {
    /// What `request` cost, ending as `end`; `None` when it has no price.
    fn cost(&self, request: &RequestStart<'_>, end: &RequestEnd<'_>) -> Option<SpanCost>;
}

/// A request's cost.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanCost {
    /// The amount.
    pub amount: f64,
    /// Its currency (`USD`).
    pub currency: String,
    /// False when it was priced at its worst case (no usage reported).
    pub complete: bool,
}

impl SpanCost {
    /// Its attributes.
    pub(crate) fn attributes(&self) -> [KeyValue; 3] {
        [
            KeyValue::new("callai.cost.amount", self.amount),
            KeyValue::new("callai.cost.currency", self.currency.clone()),
            KeyValue::new("callai.cost.complete", self.complete),
        ]
    }
}

/// A call's requests' costs, summed as they end, by the rule `serve`'s
/// call traces sum them by: in one currency; incomplete when a request had
/// no price or was priced at its worst case; no total at all when they were
/// priced in more than one currency (an amount in one of them would read
/// as the call's bill).
#[derive(Debug, Default)]
pub(crate) struct CostSum {
    sum: Option<SpanCost>,
    /// A request had no price.
    unpriced: bool,
    /// Requests were priced in more than one currency.
    mixed: bool,
}

impl CostSum {
    /// Adds a request's cost (`None`: it had no price).
    pub(crate) fn add(&mut self, cost: Option<&SpanCost>) {
        match (cost, &mut self.sum) {
            (None, _) => self.unpriced = true,
            (Some(c), None) => self.sum = Some(c.clone()),
            (Some(c), Some(sum)) if sum.currency == c.currency => {
                sum.amount += c.amount;
                sum.complete &= c.complete;
            }
            (Some(_), Some(_)) => self.mixed = true,
        }
    }

    /// The call's cost: incomplete when a request's was missing; none when
    /// the requests' were in several currencies.
    pub(crate) fn total(self) -> Option<SpanCost> {
        let mut sum = self.sum.filter(|_| !self.mixed)?;
        sum.complete &= !self.unpriced;
        Some(sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usd(amount: f64, complete: bool) -> SpanCost {
        SpanCost {
            amount,
            currency: "USD".into(),
            complete,
        }
    }

    #[test]
    fn a_call_sums_its_requests_and_is_incomplete_when_one_lacks_a_price() {
        let mut sum = CostSum::default();
        sum.add(Some(&usd(0.5, true)));
        sum.add(Some(&usd(0.25, true)));
        assert_eq!(sum.total(), Some(usd(0.75, true)));
        let mut sum = CostSum::default();
        sum.add(Some(&usd(0.5, true)));
        sum.add(None);
        assert_eq!(sum.total(), Some(usd(0.5, false)));
        let mut sum = CostSum::default();
        sum.add(Some(&usd(0.5, true)));
        sum.add(Some(&SpanCost {
            currency: "EUR".into(),
            ..usd(1.0, true)
        }));
        assert_eq!(sum.total(), None, "no total across currencies, as a trace");
        assert_eq!(CostSum::default().total(), None);
    }
}
