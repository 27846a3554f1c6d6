//! The observer that traces calls as the engine makes them: each request
//! that reached a provider, why it was sent, what came back, its cost; then
//! the call's outcome, kept in the [`CallStore`].

use super::record::{CallTrace, RequestTrace};
use super::store::CallStore;
use super::text::TracedText;
use crate::ids::fresh_id;
use crate::metrics::Metrics;
use crate::outcome::{TraceError, outcome};
use callai_engine::RequestReason;
use callai_engine::cost::{Cost, CostSum, Usage};
use callai_engine::observe::{CallObserver, CallStart, CallWatch, RequestEnd, RequestStart};
use callai_engine::wire::{Attempts, CallError, CallRequest, CallResult};
use smallvec::SmallVec;
use smol_str::SmolStr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The record of a call that sent nothing.
const NONE_SENT: Attempts = Attempts {
    count: 0,
    output_tokens: None,
    usage_complete: true,
    structured_output: None,
};

/// The trace's word for why a request was sent.
fn reason(r: RequestReason) -> &'static str {
    match r {
        RequestReason::First => "first",
        RequestReason::Truncation => "truncation",
        // A reply that was not JSON broke the schema as surely.
        RequestReason::SchemaViolation | RequestReason::ParseError => "schema_violation",
        RequestReason::Transient => "transient",
        // Both put the schema in the prompt instead of asking natively.
        RequestReason::Fallback | RequestReason::NativeRejected => "fallback",
        RequestReason::ProviderFallback => "provider_fallback",
    }
}

/// Where a tracer's calls come from.
#[derive(Debug, Clone)]
pub struct Origin {
    /// The tenant.
    pub tenant: SmolStr,
    /// `call`, `chat_completions`, `messages`, `responses` or `run`.
    pub endpoint: &'static str,
    /// The run, for a pack's calls.
    pub run_id: Option<String>,
    /// The response cache's part: `miss` for a call it looked up and did
    /// not find.
    pub cache: Option<&'static str>,
}

/// Traces the calls it observes into a [`CallStore`]: one call whose id
/// was chosen before it started (`/v1/call`, a drop-in), or each call of a
/// pack run under an id of its own.
#[derive(Debug)]
pub struct CallTracer {
    store: Arc<CallStore>,
    origin: Origin,
    /// Where its requests' cost is counted (`callai_cost_total`).
    metrics: Arc<Metrics>,
    /// The id the next call takes, when it was chosen.
    next_id: Mutex<Option<String>>,
    /// The cost of the last call that ended, for its answer.
    last_cost: Arc<Mutex<Option<Cost>>>,
}

impl CallTracer {
    /// A tracer of calls from `origin` into `store`, counting their cost in
    /// `metrics`; the first call takes `id` when given.
    pub fn new(
        store: Arc<CallStore>,
        origin: Origin,
        metrics: Arc<Metrics>,
        id: Option<String>,
    ) -> Self {
        Self {
            store,
            origin,
            metrics,
            next_id: Mutex::new(id),
            last_cost: Arc::default(),
        }
    }

    /// What the last call that ended cost, when a price was known.
    pub fn last_cost(&self) -> Option<Cost> {
        self.last_cost.lock().ok()?.clone()
    }

    /// The watch of `call`, whose prompt is `prompt`.
    fn watch(&self, call: &CallStart<'_>, prompt: Option<TracedText>) -> Box<TraceWatch> {
        let id = self
            .next_id
            .lock()
            .expect("the id is only taken")
            .take()
            .unwrap_or_else(|| fresh_id("call_"));
        let now_ms = callai_engine::events::now_ms();
        Box::new(TraceWatch {
            store: self.store.clone(),
            metrics: self.metrics.clone(),
            last_cost: self.last_cost.clone(),
            trace: CallTrace {
                id: id.into(),
                tenant: self.origin.tenant.clone(),
                endpoint: self.origin.endpoint,
                run_id: self.origin.run_id.clone(),
                node_id: call.node_id.into(),
                prompt,
                started_ms: now_ms,
                route: call.route.map(SmolStr::from),
                outcome: "",
                error: None,
                attempts: NONE_SENT,
                cost: None,
                requests: SmallVec::new(),
                duration_ms: 0,
                cache: self.origin.cache,
                cached_from: None,
            },
            started: Instant::now(),
            sent: None,
        })
    }
}

impl CallObserver for CallTracer {
    fn call_started(&self, call: &CallStart<'_>) -> Box<dyn CallWatch> {
        self.watch(call, self.store.text().prompt(call.request))
    }

    fn call_refused(&self, node_id: &str, error: &CallError) {
        // Refused before any request (a provider the policy denies): a
        // trace of no requests says so.
        let start = CallStart {
            node_id,
            route: None,
            provider: "",
            model: "",
            max_tokens: 0,
            structured: None,
            request: &CallRequest::default(),
        };
        self.watch(&start, None).call_finished(Err(error));
    }
}

/// One call being traced.
struct TraceWatch {
    store: Arc<CallStore>,
    metrics: Arc<Metrics>,
    last_cost: Arc<Mutex<Option<Cost>>>,
    trace: CallTrace,
    started: Instant,
    /// When the request in flight was sent.
    sent: Option<Instant>,
}

impl CallWatch for TraceWatch {
    fn request_started(&mut self, _: &RequestStart<'_>) {
        self.sent = Some(Instant::now());
    }

    fn request_finished(
        &mut self,
        request: &RequestStart<'_>,
        end: RequestEnd<'_>,
        cost: Option<&Cost>,
    ) {
        let latency = self.sent.take().map_or(0, |at| at.elapsed().as_millis());
        // A request that never reached a provider is no attempt.
        if end.is_err_and(|f| !f.was_sent()) {
            return;
        }
        let usage = end.map_or_else(|_| Usage::default(), Usage::from);
        let (outcome, status, answer) = match end {
            Ok(reply) => (
                reply.stop_said().as_str(),
                reply.status,
                self.store.text().answer(reply),
            ),
            Err(failure) => ("error", failure.status, None),
        };
        if let Some(c) = cost {
            self.metrics.spent(
                &self.trace.tenant,
                request.provider,
                request.model,
                request.reason.as_str(),
                c,
            );
        }
        self.trace.requests.push(RequestTrace {
            cost: cost.cloned(),
            n: request.number,
            reason: reason(request.reason),
            provider: request.provider.into(),
            model: request.model.into(),
            max_tokens: request.max_tokens,
            outcome,
            status,
            input_tokens: usage.input,
            cached_input_tokens: usage.cached,
            cache_write_input_tokens: usage.written,
            output_tokens: usage.output,
            latency_ms: u64::try_from(latency).unwrap_or(u64::MAX),
            answer,
        });
    }

    fn call_finished(mut self: Box<Self>, result: Result<&CallResult, &CallError>) {
        let sent = &self.trace.requests;
        let summed = Attempts {
            count: sent.len() as u32,
            output_tokens: sent
                .iter()
                .filter_map(|r| r.output_tokens)
                .map(u64::from)
                .reduce(|a, b| a + b),
            usage_complete: sent.iter().all(|r| r.output_tokens.is_some()),
            structured_output: None,
        };
        let (outcome, attempts) = match result {
            Ok(r) => ("ok", r.attempts.unwrap_or(summed)),
            Err(e) => {
                let last = self.trace.requests.last().map(|r| r.provider.as_str());
                self.trace.error = Some(Box::new(TraceError::of(e, last)));
                (outcome(e), summed)
            }
        };
        self.trace.outcome = outcome;
        self.trace.attempts = attempts;
        let mut sum = CostSum::default();
        for request in &self.trace.requests {
            sum.add(request.cost.as_ref());
        }
        self.trace.cost = sum.total();
        if let Ok(mut last) = self.last_cost.lock() {
            last.clone_from(&self.trace.cost);
        }
        self.trace.duration_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(0);
        let TraceWatch { store, trace, .. } = *self;
        store.record(trace);
    }
}
