//! `POST /v1/call`: ctx.callAI as a service, for hosts whose nodes are not
//! wasm. The call goes through a run session of its own, so it meets the
//! same engine, limits, events, metrics and traces as a pack's call.

use crate::answer::CallAnswer;
use crate::body::CallBody;
use crate::calls::{CallTracer, Cost, Origin};
use crate::error::{ApiCode, ApiError};
use crate::state::AppState;
use crate::tenants::{Caller, TenantBudget};
use axum::http::HeaderName;
use axum::response::{IntoResponse, Response};
use callai_engine::events::Event;
use callai_engine::observe::SharedObserver;
use callai_engine::wire::{Attempts, CallError, CallResult, StructuredOutput};
use callai_engine::{CallInput, DeltaSink, EventLog, Journal, RunError, RunSession};
use std::sync::Arc;

/// The node id a call's events carry when the caller names none.
pub const DEFAULT_NODE_ID: &str = "callai.call";

/// The header naming a call's id: its trace is `GET /v1/calls/{id}`.
pub const CALL_ID_HEADER: &str = "x-callai-call-id";

// The answer's header names, made once: a name given as a `&str` is
// copied into a fresh allocation at each insert, these are not. The log
// line reads its figures back by the same names.
pub(crate) const CALL_ID: HeaderName = HeaderName::from_static(CALL_ID_HEADER);
pub(crate) const COST: HeaderName = HeaderName::from_static("x-callai-cost");
pub(crate) const COST_CURRENCY: HeaderName = HeaderName::from_static("x-callai-cost-currency");
pub(crate) const ATTEMPTS_COUNT: HeaderName = HeaderName::from_static("x-callai-attempts-count");
pub(crate) const ATTEMPTS_OUTPUT_TOKENS: HeaderName =
    HeaderName::from_static("x-callai-attempts-output-tokens");
const USAGE_COMPLETE: HeaderName = HeaderName::from_static("x-callai-usage-complete");
const STRUCTURED_OUTPUT: HeaderName = HeaderName::from_static("x-callai-structured-output");

/// Adds what a call cost to `headers`: `x-callai-cost` (the amount, a
/// decimal) and `x-callai-cost-currency`.
pub fn add_cost(headers: &mut axum::http::HeaderMap, cost: Option<&Cost>) {
    let Some(cost) = cost else { return };
    if let (Some(amount), Ok(currency)) = (
        decimal(cost.amount),
        axum::http::HeaderValue::from_str(&cost.currency),
    ) {
        headers.insert(COST, amount);
        headers.insert(COST_CURRENCY, currency);
    }
}

/// `amount` as a header value: a decimal, never an exponent (as `f64`'s
/// `Display` writes it). Written on the stack first: through a `String` it
/// would be two allocations, not the header value's one.
pub(crate) fn decimal(amount: f64) -> Option<axum::http::HeaderValue> {
    use std::io::Write as _;
    let mut buf = [0u8; 48];
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    match write!(cursor, "{amount}") {
        Ok(()) => {
            let len = cursor.position() as usize;
            axum::http::HeaderValue::from_bytes(&buf[..len]).ok()
        }
        // Longer than the buffer (an amount past 1e47, or below 1e-40).
        Err(_) => axum::http::HeaderValue::from_str(&amount.to_string()).ok(),
    }
}

/// Adds the RFC 0248 `x-callai-*` headers of `attempts` to `headers`.
pub fn add_attempts(headers: &mut axum::http::HeaderMap, attempts: &Attempts) {
    use axum::http::HeaderValue;
    headers.insert(ATTEMPTS_COUNT, HeaderValue::from(attempts.count));
    if let Some(t) = attempts.output_tokens {
        headers.insert(ATTEMPTS_OUTPUT_TOKENS, HeaderValue::from(t));
    }
    let complete = if attempts.usage_complete {
        "true"
    } else {
        "false"
    };
    headers.insert(USAGE_COMPLETE, HeaderValue::from_static(complete));
    let mode = match attempts.structured_output {
        Some(StructuredOutput::Native) => "native",
        Some(StructuredOutput::Prompt) => "prompt",
        None => "none",
    };
    headers.insert(STRUCTURED_OUTPUT, HeaderValue::from_static(mode));
}

/// What a call charged, as its answer says it in headers: the caller's
/// budget after the call (when it has one) and what the call cost.
#[derive(Debug, Default)]
pub struct Charged {
    /// The caller's budget.
    pub budget: Option<TenantBudget>,
    /// What the call cost, when a price is known (the body says it too).
    pub cost: Option<Cost>,
}

impl Charged {
    /// Writes the `x-callai-budget-remaining-*` and `x-callai-cost`
    /// headers into `headers` (an answer's own map: no map of their own
    /// merged in).
    pub fn add_to(&self, headers: &mut axum::http::HeaderMap) {
        if let Some(budget) = &self.budget {
            budget.add_headers(headers);
        }
        add_cost(headers, self.cost.as_ref());
    }
}

/// Adds the call's id to `headers`.
pub fn add_call_id(headers: &mut axum::http::HeaderMap, id: &str) {
    if let Ok(value) = axum::http::HeaderValue::from_str(id) {
        headers.insert(CALL_ID, value);
    }
}

/// A call that ran to its end: the engine's outcome, and its events when
/// the caller asked for them.
#[derive(Debug)]
pub struct Settled {
    /// The result, or the call error (with its own code and details).
    pub outcome: Result<CallResult, CallError>,
    /// The call's events, when asked for.
    pub events: Option<Vec<Event>>,
    /// What it charged.
    pub charged: Charged,
}

/// Serves one call: `POST /v1/call`'s answer.
pub async fn serve(
    state: &AppState,
    caller: &Caller,
    call: CallBody,
) -> Result<Response, ApiError> {
    let id = call.id.clone();
    let settled = match settle(state, caller, call, None).await {
        Ok(settled) => settled,
        Err(e) => {
            let mut response = e.into_response();
            add_call_id(response.headers_mut(), &id);
            return Ok(response);
        }
    };
    let attempts = settled.outcome.as_ref().ok().and_then(|r| r.attempts);
    let Settled {
        outcome,
        events,
        charged,
    } = settled;
    let (mut response, error) = match outcome {
        Ok(result) => {
            let answer = CallAnswer {
                result,
                events,
                cost: charged.cost.clone(),
            };
            (axum::Json(answer).into_response(), None)
        }
        Err(error) => {
            let e = ApiError::from_call(&error);
            let body = axum::Json(e.body(events));
            ((e.status(), body).into_response(), Some(e))
        }
    };
    // Into the answer's own header map: no map of their own merged in.
    let headers = response.headers_mut();
    if let Some(attempts) = &attempts {
        add_attempts(headers, attempts);
    }
    charged.add_to(headers);
    add_call_id(headers, &id);
    if let Some(e) = error {
        e.add_headers(response.headers_mut());
    }
    Ok(response)
}

/// What observes one call: the metrics, its trace (under the call's id),
/// and the OTel spans when traces are sent.
fn observer(
    state: &AppState,
    caller: &Caller,
    call: &CallBody,
) -> (SharedObserver, Arc<CallTracer>) {
    let tracer = Arc::new(CallTracer::new(
        state.calls.clone(),
        Origin {
            tenant: caller.name().into(),
            endpoint: call.endpoint,
            run_id: None,
        },
        state.metrics.clone(),
        Some(call.id.clone()),
    ));
    let mut observers = state.observers();
    if let Some(t) = &state.telemetry {
        observers = observers.with(Arc::new(t.calls()));
    }
    (Arc::new(observers.with(tracer.clone())), tracer)
}

/// Runs one call through the engine, as `/v1/call` and the drop-in
/// endpoints do: admitted (or refused, overloaded), observed (metrics,
/// traces), bounded by the run's limits. What is not the call's own
/// outcome (the host full or shutting down, a limit, a host fault) is the
/// error. A text call's text goes to `deltas` as its provider streams it,
/// when there is a sink.
pub async fn settle(
    state: &AppState,
    caller: &Caller,
    call: CallBody,
    deltas: Option<DeltaSink>,
) -> Result<Settled, ApiError> {
    let host = &caller.0.host;
    if call.script.is_some() {
        let provider = call
            .provider
            .as_deref()
            .unwrap_or(&state.config().defaults.provider);
        // A provider the host does not have, or its policy refuses, is the
        // engine's to refuse (validation_error on provider, policy_denied),
        // as `callai run` does; a script is refused only for one it calls.
        if provider != "mock" && host.allowed_providers().contains(&provider) {
            return Err(ApiError::invalid(
                "script",
                format!("a script is for the mock provider; this call goes to {provider:?}"),
            ));
        }
    }
    let mut ticket = state.admission.admit()?;
    tokio::select! {
        () = ticket.start() => {}
        () = state.admission.stopped() => {
            return Err(ApiError::unavailable(
                ApiCode::ShuttingDown,
                "this host shut down before the call started",
                1,
            ));
        }
    }
    state.report_load();
    let (observer, tracer) = observer(state, caller, &call);
    // A call's events are made only for a caller that asked for them.
    let events = match call.events {
        true => EventLog::new(),
        false => EventLog::discarding(),
    };
    let node_id = call.node_id.as_deref().unwrap_or(DEFAULT_NODE_ID);
    // A call that does not reach the mock needs no mock of its own: it
    // goes through the caller's host as it is.
    let provider = call
        .provider
        .as_deref()
        .unwrap_or(&state.config().defaults.provider);
    let host = match call.script {
        None if provider != "mock" => caller.0.host.clone(),
        script => state.host_for(&caller.0, script),
    };
    let mut session = RunSession::new(host, node_id, Journal::live())
        .with_observer(observer)
        .with_events(events.clone());
    let budget = TenantBudget::of(caller);
    if let Some(budget) = &budget {
        session = session.with_budget(budget.shared());
    }
    if let Some(deltas) = deltas {
        session = session.with_deltas(deltas);
    }
    let limits = state.config().limits;
    session = session.with_deadline(
        tokio::time::Instant::now() + std::time::Duration::from_millis(limits.wall_ms),
    );
    let outcome = tokio::select! {
        outcome = session.call(CallInput::Parsed(call.request)) => Some(outcome),
        () = state.admission.stopped() => None,
    };
    drop(ticket);
    state.report_load();
    let events = call.events.then(|| events.snapshot());
    match outcome {
        Some(Ok(outcome)) => Ok(Settled {
            outcome,
            events,
            charged: Charged {
                budget,
                cost: tracer.last_cost(),
            },
        }),
        Some(Err(RunError::Limit { key, message })) => Err(ApiError::over_limit(
            ApiCode::LimitExceeded,
            key,
            format!("{key}: {message}"),
        )),
        Some(Err(e)) => Err(ApiError::internal(e.to_string())),
        None => Err(ApiError::unavailable(
            ApiCode::ShuttingDown,
            "this host shut down while the call was going on",
            1,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::decimal;

    #[test]
    fn an_amount_is_a_decimal_never_an_exponent() {
        let text = |amount: f64| decimal(amount).unwrap().to_str().unwrap().to_owned();
        assert_eq!(text(0.0), "0");
        assert_eq!(text(1.5e-7), "0.00000015");
        assert_eq!(text(2.5), "2.5");
        assert_eq!(text(12_345_678.0), "12345678");
        // Past the stack buffer: written through a String, the same way.
        assert_eq!(text(1e-45), format!("{}", 1e-45));
        assert!(text(1e-45).starts_with("0.000"));
        assert_eq!(text(1e60).len(), 61);
    }
}
