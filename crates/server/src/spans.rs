//! The gateway's spans sent by `callai-telemetry`'s OTLP exporter: the
//! exporter (and its HTTP client) is the edge's to own; the gateway sees
//! only [`Spans`].

use callai_engine::observe::SharedObserver;
use callai_gateway::spans::{RunSpan, SpanOrigin, Spans};
use callai_telemetry::{Origin, RunTrace, Telemetry};
use std::sync::Arc;

/// Spans sent to an OTLP endpoint.
#[derive(Debug, Clone)]
pub struct Exported(pub Telemetry);

impl Spans for Exported {
    fn calls(&self, origin: SpanOrigin<'_>) -> SharedObserver {
        Arc::new(self.0.calls_for(&Origin {
            tenant: Some(origin.tenant.to_owned()),
            call_id: Some(origin.id.to_owned()),
            traceparent: origin.parent.map(str::to_owned),
        }))
    }

    fn run(&self, node_id: &str, pack: &str, origin: SpanOrigin<'_>) -> Box<dyn RunSpan> {
        let run = Origin {
            tenant: Some(origin.tenant.to_owned()),
            call_id: None,
            traceparent: origin.parent.map(str::to_owned),
        };
        Box::new(ExportedRun(self.0.run_for(node_id, origin.id, pack, &run)))
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
