//! `/metrics`' figures: Prometheus text from a prometheus-client registry.
//! Provider requests are counted as the engine sends them (an observer of
//! every call), runs and calls as they end. The HTTP edge serves the text.

mod calls;
mod families;
mod http;
mod money;
mod upstream;

pub use calls::MetricsObserver;
pub use families::{BudgetCounters, Metrics};
