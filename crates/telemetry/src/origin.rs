//! Who a span is for: the tenant, the call's id, and the caller's own
//! trace. A W3C `traceparent` the caller sent makes the spans children of
//! its span (read by the SDK's `TraceContextPropagator`); one that does not
//! parse is ignored, and the spans start a trace of their own.

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use std::collections::HashMap;

/// Who a call's or a run's spans are for.
#[derive(Debug, Clone, Default)]
pub struct Origin {
    /// The tenant (`callai.tenant`).
    pub tenant: Option<String>,
    /// The call's id (`callai.call.id`: `x-callai-call-id`).
    pub call_id: Option<String>,
    /// The `traceparent` header the caller sent.
    pub traceparent: Option<String>,
}

impl Origin {
    /// The context the spans start under: the caller's span, or none.
    pub(crate) fn parent(&self) -> Context {
        let Some(header) = &self.traceparent else {
            return Context::new();
        };
        let carrier = HashMap::from([("traceparent".to_owned(), header.clone())]);
        TraceContextPropagator::new().extract(&carrier)
    }

    /// The attributes it puts on the spans it names.
    pub(crate) fn attributes(&self) -> Vec<KeyValue> {
        let mut attributes = Vec::with_capacity(2);
        if let Some(tenant) = &self.tenant {
            attributes.push(KeyValue::new("callai.tenant", tenant.clone()));
        }
        if let Some(id) = &self.call_id {
            attributes.push(KeyValue::new("callai.call.id", id.clone()));
        }
        attributes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TraceContextExt;

    #[test]
    fn a_traceparent_is_the_parent_and_a_bad_one_is_none() {
        let origin = Origin {
            traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
            ..Origin::default()
        };
        let parent = origin.parent();
        let span = parent.span();
        let cx = span.span_context();
        assert!(cx.is_valid() && cx.is_remote());
        assert_eq!(
            cx.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(cx.span_id().to_string(), "00f067aa0ba902b7");
        for bad in [
            "",
            "00-xyz",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        ] {
            let origin = Origin {
                traceparent: Some(bad.into()),
                ..Origin::default()
            };
            assert!(!origin.parent().span().span_context().is_valid(), "{bad:?}");
        }
    }
}
