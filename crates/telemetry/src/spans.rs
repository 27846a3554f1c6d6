//! The spans: a run, its calls (`chat {model}`), their provider requests.

use callai_engine::observe::{CallObserver, CallStart, CallWatch, RequestEnd, RequestStart};
use callai_engine::wire::{CallError, CallResult, StructuredOutput};
use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Array, Context, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::SdkTracer;
use std::sync::Arc;

use crate::cost::attributes;
use crate::origin::Origin;
use callai_engine::cost::{Cost, CostSum};

/// The span of one node run. Calls the run makes go under it through
/// [`RunTrace::observer`]; [`RunTrace::end`] closes it.
#[derive(Debug, Clone)]
pub struct RunTrace {
    cx: Context,
    observer: Arc<SpanObserver>,
}

impl RunTrace {
    pub(crate) fn start(
        tracer: Arc<SdkTracer>,
        node_id: &str,
        run_id: Option<&str>,
        pack: &str,
        origin: &Origin,
    ) -> Self {
        let mut attributes = vec![
            KeyValue::new("callai.node.id", node_id.to_owned()),
            KeyValue::new("callai.pack", pack.to_owned()),
        ];
        if let Some(id) = run_id {
            attributes.push(KeyValue::new("callai.run.id", id.to_owned()));
        }
        let tenant = Origin {
            tenant: origin.tenant.clone(),
            ..Origin::default()
        };
        attributes.extend(tenant.attributes());
        let parent = origin.parent();
        let span = tracer
            .span_builder(format!("run {node_id}"))
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes)
            .start_with_context(&*tracer, &parent);
        let cx = parent.with_span(span);
        Self {
            observer: Arc::new(SpanObserver {
                tracer,
                parent: cx.clone(),
                // Its calls' spans say whose they are; their ids are the
                // tracer's own, made as each call starts.
                attributes: tenant.attributes(),
            }),
            cx,
        }
    }

    /// What the run hands its calls to.
    pub fn observer(&self) -> Arc<SpanObserver> {
        self.observer.clone()
    }

    /// Ends the run's span: `Err` carries why the run failed.
    pub fn end(&self, result: Result<(), &str>) {
        let span = self.cx.span();
        match result {
            Ok(()) => span.set_status(Status::Ok),
            Err(message) => span.set_status(Status::error(message.to_owned())),
        }
        span.end();
    }
}

/// Makes a `chat {model}` span for each call, under a run's span or at the
/// root.
#[derive(Debug, Clone)]
pub struct SpanObserver {
    tracer: Arc<SdkTracer>,
    parent: Context,
    /// Who its calls are for (`callai.tenant`, `callai.call.id`).
    attributes: Vec<KeyValue>,
}

impl SpanObserver {
    /// Call spans for `origin`: under its caller's span, or at the root.
    pub(crate) fn root(tracer: Arc<SdkTracer>, origin: &Origin) -> Self {
        Self {
            tracer,
            parent: origin.parent(),
            attributes: origin.attributes(),
        }
    }
}

impl CallObserver for SpanObserver {
    fn call_started(&self, call: &CallStart<'_>) -> Box<dyn CallWatch> {
        let mut attributes = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", call.provider.to_owned()),
            KeyValue::new("gen_ai.request.model", call.model.to_owned()),
            KeyValue::new("gen_ai.request.max_tokens", i64::from(call.max_tokens)),
            KeyValue::new("callai.node.id", call.node_id.to_owned()),
        ];
        attributes.extend(self.attributes.iter().cloned());
        if let Some(route) = call.route {
            // The model name the caller sent, routed by `[models.NAME]`.
            attributes.push(KeyValue::new("callai.route", route.to_owned()));
        }
        if let Some(mode) = call.structured {
            attributes.push(KeyValue::new("gen_ai.output.type", "json"));
            attributes.push(KeyValue::new("callai.structured_output", mode_str(mode)));
        }
        let span = self
            .tracer
            .span_builder(format!("chat {}", call.model))
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
            .start_with_context(&*self.tracer, &self.parent);
        Box::new(CallTrace {
            tracer: self.tracer.clone(),
            cx: self.parent.with_span(span),
            request: None,
            input_tokens: None,
            output_tokens: None,
            cost: CostSum::default(),
        })
    }

    fn call_refused(&self, node_id: &str, error: &CallError) {
        // No request was sent: the span says so, with the refusal.
        let mut span = self
            .tracer
            .span_builder("chat")
            .with_kind(SpanKind::Client)
            .with_attributes(
                [
                    KeyValue::new("gen_ai.operation.name", "chat"),
                    KeyValue::new("callai.node.id", node_id.to_owned()),
                    KeyValue::new("callai.attempts.count", 0),
                    KeyValue::new("error.type", error.code.as_str()),
                ]
                .into_iter()
                .chain(self.attributes.iter().cloned()),
            )
            .start_with_context(&*self.tracer, &self.parent);
        span.set_status(Status::error(error.message.clone()));
        span.end();
    }
}

/// One call's span, and the span of the request in flight.
struct CallTrace {
    tracer: Arc<SdkTracer>,
    cx: Context,
    request: Option<opentelemetry_sdk::trace::Span>,
    /// Usage summed over the call's requests that reported it.
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    /// What its requests cost so far.
    cost: CostSum,
}

impl CallWatch for CallTrace {
    fn request_started(&mut self, request: &RequestStart<'_>) {
        let mut attributes = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", request.provider.to_owned()),
            KeyValue::new("gen_ai.request.model", request.model.to_owned()),
            KeyValue::new("gen_ai.request.max_tokens", i64::from(request.max_tokens)),
            KeyValue::new("callai.attempt.index", i64::from(request.number)),
            KeyValue::new("callai.attempt.reason", request.reason.as_str()),
        ];
        if let Some(mode) = request.structured {
            attributes.push(KeyValue::new("callai.structured_output", mode_str(mode)));
        }
        let span = self
            .tracer
            .span_builder(format!("attempt {}", request.number))
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
            .start_with_context(&*self.tracer, &self.cx);
        self.request = Some(span);
    }

    fn request_finished(&mut self, _: &RequestStart<'_>, end: RequestEnd<'_>, cost: Option<&Cost>) {
        let Some(mut span) = self.request.take() else {
            return;
        };
        // A request that reached a provider costs what the engine priced
        // it at (`None` when it had no price: the call's sum is then
        // incomplete, or none at all when no request had one); one that
        // did not is no attempt and costs nothing.
        let sent = end.as_ref().map_or_else(|f| f.was_sent(), |_| true);
        if sent {
            if let Some(cost) = cost {
                span.set_attributes(attributes(cost));
            }
            self.cost.add(cost);
        }
        match end {
            Ok(reply) => {
                if let Some(status) = reply.status {
                    span.set_attribute(KeyValue::new(
                        "http.response.status_code",
                        i64::from(status),
                    ));
                }
                span.set_attribute(finish_reasons(&[reply.stop_said().as_str()]));
                if let Some(model) = &reply.model {
                    span.set_attribute(KeyValue::new("gen_ai.response.model", model.clone()));
                }
                if let Some(n) = reply.input_tokens {
                    span.set_attribute(KeyValue::new("gen_ai.usage.input_tokens", i64::from(n)));
                    *self.input_tokens.get_or_insert(0) += u64::from(n);
                }
                if let Some(n) = reply.output_tokens {
                    span.set_attribute(KeyValue::new("gen_ai.usage.output_tokens", i64::from(n)));
                    *self.output_tokens.get_or_insert(0) += u64::from(n);
                }
            }
            Err(failure) => {
                if let Some(status) = failure.status {
                    span.set_attribute(KeyValue::new(
                        "http.response.status_code",
                        i64::from(status),
                    ));
                }
                span.set_attribute(KeyValue::new("callai.attempt.sent", failure.was_sent()));
                span.set_attribute(KeyValue::new("error.type", failure_type(failure.status)));
                span.set_status(Status::error(failure.message.clone()));
            }
        }
        span.end();
    }

    fn call_finished(self: Box<Self>, result: Result<&CallResult, &CallError>) {
        let span = self.cx.span();
        if let Some(cost) = self.cost.total() {
            span.set_attributes(attributes(&cost));
        }
        if let Some(n) = self.input_tokens {
            span.set_attribute(KeyValue::new("gen_ai.usage.input_tokens", n as i64));
        }
        if let Some(n) = self.output_tokens {
            span.set_attribute(KeyValue::new("gen_ai.usage.output_tokens", n as i64));
        }
        match result {
            Ok(result) => {
                if let Some(reason) = result.finish_reason {
                    span.set_attribute(finish_reasons(&[reason.as_str()]));
                }
                if let Some(model) = &result.model {
                    span.set_attribute(KeyValue::new("gen_ai.response.model", model.clone()));
                }
                if let Some(a) = result.attempts {
                    span.set_attribute(KeyValue::new("callai.attempts.count", i64::from(a.count)));
                    span.set_attribute(KeyValue::new(
                        "callai.attempts.usage_complete",
                        a.usage_complete,
                    ));
                }
                span.set_status(Status::Ok);
            }
            Err(error) => {
                if let Some(n) = error.total_attempts() {
                    span.set_attribute(KeyValue::new("callai.attempts.count", i64::from(n)));
                }
                span.set_attribute(KeyValue::new("error.type", error.code.as_str()));
                span.set_status(Status::error(error.message.clone()));
            }
        }
        span.end();
    }
}

fn finish_reasons(reasons: &[&'static str]) -> KeyValue {
    let values: Vec<StringValue> = reasons.iter().map(|r| StringValue::from(*r)).collect();
    KeyValue::new(
        "gen_ai.response.finish_reasons",
        Value::Array(Array::String(values)),
    )
}

fn mode_str(mode: StructuredOutput) -> &'static str {
    match mode {
        StructuredOutput::Native => "native",
        StructuredOutput::Prompt => "prompt",
    }
}

/// `error.type` of a failed request: its HTTP status, or what happened.
fn failure_type(status: Option<u16>) -> Value {
    match status {
        Some(s) => Value::String(s.to_string().into()),
        None => Value::String("transport".into()),
    }
}
