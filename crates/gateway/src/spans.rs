//! Traces sent out of the host (OpenTelemetry, when an OTLP endpoint is
//! set): a span per call of `/v1/call` and the drop-ins, and one per pack
//! run with its calls beneath. The gateway asks for them through these
//! traits; the exporter (with its HTTP client) is the embedder's to give,
//! so no HTTP comes in with it.

use callai_engine::observe::SharedObserver;
use std::fmt;

/// Who a call or run is for, as its spans say it: the tenant, its id,
/// and the caller's own trace it belongs to.
#[derive(Debug, Clone, Copy)]
pub struct SpanOrigin<'a> {
    /// The tenant that asked for it.
    pub tenant: &'a str,
    /// The call's id (`x-callai-call-id`) or the run's.
    pub id: &'a str,
    /// The W3C `traceparent` the caller sent, when it sent one: the spans
    /// are then children of the caller's span (one that does not parse is
    /// ignored, and the spans start a trace of their own).
    pub parent: Option<&'a str>,
}

/// Where spans go.
pub trait Spans: Send + Sync + fmt::Debug {
    /// The observer that spans the call it sees, for `origin`.
    fn calls(&self, origin: SpanOrigin<'_>) -> SharedObserver;

    /// A span of one pack run (`origin.id` of pack `pack`, its node
    /// `node_id`), open until [`RunSpan::end`].
    fn run(&self, node_id: &str, pack: &str, origin: SpanOrigin<'_>) -> Box<dyn RunSpan>;
}

/// One pack run's span.
pub trait RunSpan: Send + Sync {
    /// The observer of the run's calls, their spans under the run's.
    fn observer(&self) -> SharedObserver;

    /// The run ended: fine, or with `error`.
    fn end(&self, error: Option<&str>);
}
