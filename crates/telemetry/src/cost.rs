//! What a provider request cost, on its span and summed on its call's:
//! `callai.cost.amount`, `callai.cost.currency`, `callai.cost.complete`.
//! Prices are the embedder's (`callai serve` has its price list), and the
//! rule that prices a request and sums a call's is the engine's
//! (`callai_engine::cost`): this crate only asks and writes the answer down.

use callai_engine::cost::Cost;
use callai_engine::observe::{RequestEnd, RequestStart};
use opentelemetry::KeyValue;

/// Prices provider requests for their spans.
pub trait AttemptPricer: Send + Sync + std::fmt::Debug {
    /// What `request` cost, ending as `end`; `None` when it has no price.
    fn cost(&self, request: &RequestStart<'_>, end: &RequestEnd<'_>) -> Option<Cost>;
}

/// A cost's span attributes.
pub(crate) fn attributes(cost: &Cost) -> [KeyValue; 3] {
    [
        KeyValue::new("callai.cost.amount", cost.amount),
        KeyValue::new("callai.cost.currency", cost.currency.to_string()),
        KeyValue::new("callai.cost.complete", cost.complete),
    ]
}
