//! What a provider request cost, on its span and summed on its call's:
//! `callai.cost.amount`, `callai.cost.currency`, `callai.cost.complete`.
//! The engine prices each request once at the host's prices
//! (`callai_engine::HostBuilder::prices`) and hands the cost to its
//! watchers: this crate only writes it down.

use callai_engine::cost::Cost;
use opentelemetry::KeyValue;

/// A cost's span attributes.
pub(crate) fn attributes(cost: &Cost) -> [KeyValue; 3] {
    [
        KeyValue::new("callai.cost.amount", cost.amount()),
        KeyValue::new("callai.cost.currency", cost.currency.to_string()),
        KeyValue::new("callai.cost.complete", cost.complete),
    ]
}
