//! The observer that counts calls and provider requests as the engine makes
//! them: each request under the provider it went to (a route's chain may
//! change it within a call), and a routed call under the target that served.

use super::families::{Metrics, ProviderLabel, RequestLabels, RouteLabels};
use crate::outcome::outcome;
use callai_engine::cost::Cost;
use callai_engine::observe::{CallObserver, CallStart, CallWatch, RequestEnd, RequestStart};
use callai_engine::wire::{CallError, CallResult};
use std::sync::Arc;

/// Counts calls and provider requests as the engine makes them.
#[derive(Debug, Clone)]
pub struct MetricsObserver(pub Arc<Metrics>);

impl CallObserver for MetricsObserver {
    fn call_started(&self, call: &CallStart<'_>) -> Box<dyn CallWatch> {
        Box::new(CallCount {
            metrics: self.0.clone(),
            route: call.route.map(str::to_owned),
            in_flight: None,
            served: None,
            ended: false,
        })
    }

    fn call_refused(&self, _node_id: &str, error: &CallError) {
        self.0.call_ended(outcome(error));
    }
}

struct CallCount {
    metrics: Arc<Metrics>,
    /// The model name the call routed, if it did.
    route: Option<String>,
    /// The provider and reason of the request sent and not yet answered.
    in_flight: Option<(String, &'static str)>,
    /// The `PROVIDER/MODEL` of the last request that was answered.
    served: Option<String>,
    ended: bool,
}

impl CallCount {
    fn count_request(&self, provider: String, reason: &'static str) {
        self.metrics
            .requests
            .get_or_create(&RequestLabels { provider, reason })
            .inc();
    }
}

impl Drop for CallCount {
    /// A call dropped before its end (its client went away mid-stream): the
    /// request in flight was sent, so it is counted, and the call is
    /// `cancelled`.
    fn drop(&mut self) {
        if let Some((provider, reason)) = self.in_flight.take() {
            self.count_request(provider, reason);
        }
        if !self.ended {
            self.metrics.call_ended("cancelled");
        }
    }
}

impl CallWatch for CallCount {
    fn request_started(&mut self, request: &RequestStart<'_>) {
        self.in_flight = Some((request.provider.to_owned(), request.reason.as_str()));
    }

    fn request_finished(
        &mut self,
        request: &RequestStart<'_>,
        end: RequestEnd<'_>,
        _: Option<&Cost>,
    ) {
        self.in_flight = None;
        if let Err(f) = end {
            // A refused connection is no request, but it is a failure.
            self.metrics.upstream.failed(request.provider, f.status);
        }
        // A request that never reached a provider is no request.
        if end.is_err_and(|f| !f.was_sent()) {
            return;
        }
        self.count_request(request.provider.to_owned(), request.reason.as_str());
        if let Ok(reply) = end {
            if let Some(n) = reply.input_tokens {
                self.metrics.upstream.input(request.provider, n);
            }
            if let Some(n) = reply.output_tokens {
                self.metrics
                    .output_tokens
                    .get_or_create(&ProviderLabel {
                        provider: request.provider.to_owned(),
                    })
                    .inc_by(n.into());
            }
            if self.route.is_some() {
                self.served = Some(format!("{}/{}", request.provider, request.model));
            }
        }
    }

    fn call_finished(mut self: Box<Self>, result: Result<&CallResult, &CallError>) {
        let outcome = match result {
            Ok(_) => "ok",
            Err(e) => outcome(e),
        };
        if result.is_ok()
            && let (Some(model), Some(target)) = (self.route.take(), self.served.take())
        {
            self.metrics
                .routed
                .get_or_create(&RouteLabels { model, target })
                .inc();
        }
        self.ended = true;
        self.metrics.call_ended(outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use callai_engine::wire::ErrorCode;
    use callai_engine::{ProviderFailure, ProviderReply, RequestReason, StopReason};
    use std::time::Duration;

    fn start(provider: &str, number: u32, reason: RequestReason) -> RequestStart<'_> {
        RequestStart {
            provider,
            number,
            reason,
            max_tokens: 10,
            input_bound: 100,
            model: "m",
            structured: None,
        }
    }

    fn reply(tokens: u32) -> ProviderReply {
        ProviderReply {
            content: "x".into(),
            tool_calls: Vec::new(),
            stop: StopReason::Length,
            input_tokens: None,
            cached_input_tokens: None,
            cache_write_input_tokens: None,
            reasoning_tokens: None,
            output_tokens: Some(tokens),
            model: None,
            status: None,
            thinking: Vec::new(),
        }
    }

    fn call<'a>(route: Option<&'a str>) -> CallStart<'a> {
        CallStart {
            node_id: "n",
            route,
            provider: "mock",
            model: "m",
            max_tokens: 10,
            structured: None,
            request: &REQUEST,
        }
    }

    static REQUEST: std::sync::LazyLock<callai_engine::wire::CallRequest> =
        std::sync::LazyLock::new(Default::default);

    #[test]
    fn requests_tokens_calls_and_runs_are_counted() {
        let metrics = Arc::new(Metrics::new(["mock"], ["admin"]));
        let observer = MetricsObserver(metrics.clone());
        let mut watch = observer.call_started(&call(None));
        watch.request_finished(
            &start("mock", 1, RequestReason::First),
            Ok(&reply(10)),
            None,
        );
        let failed = ProviderFailure::from_status(503, "down");
        watch.request_finished(
            &start("mock", 2, RequestReason::Truncation),
            Err(&failed),
            None,
        );
        let unsent = ProviderFailure::new(callai_engine::FailureKind::Unanswerable, None, "no");
        watch.request_finished(
            &start("mock", 3, RequestReason::Transient),
            Err(&unsent),
            None,
        );
        watch.call_finished(Err(&CallError::new(ErrorCode::ProviderUnavailable, "x")));
        observer.call_refused("n", &CallError::validation("messages", "missing"));
        metrics.run_finished(true, Duration::from_millis(30));

        let text = metrics.render();
        for line in [
            r#"callai_provider_requests_total{provider="mock",reason="first"} 1"#,
            r#"callai_provider_requests_total{provider="mock",reason="truncation"} 1"#,
            r#"callai_output_tokens_total{provider="mock"} 10"#,
            r#"callai_calls_total{outcome="provider_unavailable"} 1"#,
            r#"callai_calls_total{outcome="validation_error"} 1"#,
            r#"callai_runs_total{status="ok"} 1"#,
            "callai_run_duration_seconds_count 1",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        // Every series is there from the start, at zero until counted.
        for line in [
            r#"callai_provider_requests_total{provider="mock",reason="x-host-callai-transient"} 0"#,
            r#"callai_calls_total{outcome="ok"} 0"#,
            r#"callai_runs_total{status="failed"} 0"#,
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }

    #[test]
    fn a_routed_call_counts_each_request_at_its_provider_and_the_target_that_served() {
        let metrics = Arc::new(Metrics::new(["a", "b"], ["admin"]));
        let observer = MetricsObserver(metrics.clone());
        let mut watch = observer.call_started(&call(Some("fast")));
        let down = ProviderFailure::from_status(503, "down");
        watch.request_finished(&start("a", 1, RequestReason::First), Err(&down), None);
        let fallback = start("b", 2, RequestReason::ProviderFallback);
        watch.request_finished(&fallback, Ok(&reply(4)), None);
        watch.call_finished(Ok(&CallResult::default()));

        let text = metrics.render();
        for line in [
            r#"callai_provider_requests_total{provider="a",reason="first"} 1"#,
            r#"callai_provider_requests_total{provider="b",reason="x-host-callai-provider-fallback"} 1"#,
            r#"callai_output_tokens_total{provider="b"} 4"#,
            r#"callai_output_tokens_total{provider="a"} 0"#,
            r#"callai_routed_calls_total{model="fast",target="b/m"} 1"#,
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
}
