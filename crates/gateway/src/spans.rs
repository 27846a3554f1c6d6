//! Traces sent out of the host (OpenTelemetry, when an OTLP endpoint is
//! set): a span per call of `/v1/call` and the drop-ins, and one per pack
//! run with its calls beneath. The gateway asks for them through these
//! traits; the exporter (with its HTTP client) is the embedder's to give,
//! so no HTTP comes in with it.

use callai_engine::observe::SharedObserver;
use std::fmt;

/// Where spans go.
pub trait Spans: Send + Sync + fmt::Debug {
    /// The observer that spans each call it sees.
    fn calls(&self) -> SharedObserver;

    /// A span of one pack run (`run_id` of pack `pack`, its node
    /// `node_id`), open until [`RunSpan::end`].
    fn run(&self, node_id: &str, run_id: &str, pack: &str) -> Box<dyn RunSpan>;
}

/// One pack run's span.
pub trait RunSpan: Send + Sync {
    /// The observer of the run's calls, their spans under the run's.
    fn observer(&self) -> SharedObserver;

    /// The run ended: fine, or with `error`.
    fn end(&self, error: Option<&str>);
}
