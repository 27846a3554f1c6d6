//! The gateway's spans sent by `callai-telemetry`'s OTLP exporter: the
//! exporter (and its HTTP client) is the edge's to own; the gateway sees
//! only [`Spans`].

use callai_engine::observe::SharedObserver;
use callai_gateway::spans::{RunSpan, Spans};
use callai_telemetry::{RunTrace, Telemetry};
use std::sync::Arc;

/// Spans sent to an OTLP endpoint.
#[derive(Debug, Clone)]
pub struct Exported(pub Telemetry);

impl Spans for Exported {
    fn calls(&self) -> SharedObserver {
        Arc::new(self.0.calls())
    }

    fn run(&self, node_id: &str, run_id: &str, pack: &str) -> Box<dyn RunSpan> {
        Box::new(ExportedRun(self.0.run(node_id, Some(run_id), pack)))
    }
}

/// One run's span.
struct ExportedRun(RunTrace);

impl RunSpan for ExportedRun {
    fn observer(&self) -> SharedObserver {
        self.0.observer()
    }

    fn end(&self, error: Option<&str>) {
        self.0.end(error.map_or(Ok(()), Err));
    }
}
