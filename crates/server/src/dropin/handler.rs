//! The one handler of every drop-in API: the body read into the API's
//! types, mapped onto the engine's typed request, its model resolved (once)
//! and its per-call policy read, planned and run through the gateway's one
//! call path as `/v1/call` is (the same admission, limits, events, metrics
//! and traces), and answered in the API's shape, streamed or not.

use super::api::{AnswerExtension, DropinApi, Keep, Mapped, Streaming};
use super::outcome::{CallFailure, run};
use super::{sse, streaming};
use crate::body::{self, Naming};
use crate::cache_mark::{CacheMiss, cache_word};
use crate::call_headers::CallHeaders;
use crate::error::ApiError;
use crate::headers;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use callai_engine::MockScript;
use callai_engine::wire::{ParsedRequest, ParsedRetry, RetryPolicy};
use callai_gateway::Gateway;
use callai_gateway::call::{CallPlan, Planned, Route};
use callai_gateway::ids::fresh_id;
use callai_gateway::tenants::Caller;
use futures_util::future::{self, Either, FutureExt};
use std::sync::Arc;

/// `POST` to a drop-in endpoint of API `A`.
pub async fn handle<A: DropinApi>(
    State(gateway): State<Arc<Gateway>>,
    axum::Extension(caller): axum::Extension<Caller>,
    miss: Option<axum::Extension<CacheMiss>>,
    headers: CallHeaders,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, CallFailure> {
    // The body's bytes end here, not with the call.
    let (mapped, echo) = {
        let bytes = body::bytes(body, "server.maxBodyBytes")?;
        A::map(body::parse_naming(&bytes, Naming::FullPath)?)?
    };
    let cache = cache_word(miss);
    serve::<A>(&gateway, &caller, headers, mapped, echo, None, cache).await
}

/// Runs a mapped call of API `A` and answers it, `keep` given its result
/// first when there is one; `cache` is the response cache's part, for its
/// trace.
///
/// This and [`answer`] are not `async fn`s: each does its part before the
/// call and hands its arguments on into the future it returns. An `async
/// fn` keeps its arguments for as long as it runs (rust-lang/rust#62958),
/// and these futures last as long as the provider takes: measured with
/// `-Zprint-type-sizes`, nesting them cost a drop-in call in flight 1.8
/// KiB more than `/v1/call`.
// As on `outcome::run`: the closure's result is the `async fn`'s it was.
#[allow(clippy::result_large_err)]
pub(super) fn serve<'a, A: DropinApi>(
    gateway: &'a Arc<Gateway>,
    caller: &'a Caller,
    headers: CallHeaders,
    mapped: Mapped,
    echo: A::Echo,
    keep: Option<Keep>,
    cache: Option<&'static str>,
) -> impl Future<Output = Result<Response, CallFailure>> + Send + 'a {
    let streaming = mapped.streaming;
    // A structured call, a call with tools, and one that thinks (its
    // thinking blocks lead the answer, and are known with it) is judged
    // whole before any of it goes out (a retry could replace it).
    let thinks = (mapped.request.thinking.as_deref()).is_some_and(|t| t.required());
    let judged_whole = mapped.request.is_structured() || mapped.request.offers_tools() || thinks;
    let mut plan = match prepare::<A>(gateway, caller, headers, mapped) {
        Ok(plan) => plan,
        Err(e) => return Either::Left(future::ready(Err(e.into()))),
    };
    plan.cache = cache;
    let id = plan.id.clone();
    let how = How {
        streaming,
        judged_whole,
        keep,
    };
    // Every answer of the call names it, its failures too.
    Either::Right(
        answer::<A>(gateway, caller, plan, how, echo).map(move |mut answer| {
            match &mut answer {
                Ok(response) => headers::call_id(response.headers_mut(), &id),
                Err(failure) => headers::call_id(&mut failure.headers, &id),
            }
            answer
        }),
    )
}

/// How a planned call is answered.
struct How {
    streaming: Streaming,
    judged_whole: bool,
    keep: Option<Keep>,
}

/// The answer of a planned call: streamed as its provider streams it, or
/// once it ended.
fn answer<'a, A: DropinApi>(
    gateway: &'a Arc<Gateway>,
    caller: &'a Caller,
    plan: CallPlan,
    how: How,
    echo: A::Echo,
) -> impl Future<Output = Result<Response, CallFailure>> + Send + 'a {
    let id = plan.id.clone();
    let route = plan.route.clone();
    let streaming = how.streaming;
    if streaming != Streaming::Off && !how.judged_whole {
        // A text call streams as its provider does (boxed: the common
        // answer's future is not made the size of this one).
        let model = route.answer_model(&gateway.host, &Default::default());
        let keep = how.keep.map(|keep| (keep, id.clone(), model.clone()));
        let framer = A::framer(model, id, streaming, None, echo);
        let relay = streaming::relay(gateway.clone(), caller.clone(), plan, framer, keep);
        return Either::Left(Box::pin(relay));
    }
    let keep = how.keep;
    Either::Right(
        run(gateway, caller, plan, None).then(move |ran| async move {
            let (result, charged) = ran?;
            let model = route.answer_model(&gateway.host, &result);
            if let Some(keep) = keep {
                keep(&result, &id, &model).await;
            }
            let mut response = if streaming != Streaming::Off {
                let framer = A::framer(model, id, streaming, Some(&result), echo);
                let frames = streaming::settled(framer, &result);
                sse::body(frames).into_response()
            } else {
                let callai = AnswerExtension::of(&result).with_cost(charged.cost.clone());
                axum::Json(A::answer(&model, &id, &result, callai, &echo)).into_response()
            };
            // Into the answer's own header map: no map of their own merged in.
            let map = response.headers_mut();
            if let Some(attempts) = &result.attempts {
                headers::attempts(map, attempts);
            }
            headers::charged(map, &charged);
            Ok(response)
        }),
    )
}

/// Counts the request under `endpoint` if it is a client's own retry (see
/// [`CallHeaders::client_retry`]), on top of the host's: so that nested
/// retries show (the docs say to set `max_retries=0`).
pub fn count_client_retry(gateway: &Gateway, endpoint: &'static str, resent: bool) {
    if resent {
        gateway.metrics.client_retry(endpoint);
    }
}

/// The per-call policy of the headers `x-callai-max-attempts` and
/// `x-callai-grow-max-tokens`, under the body's own `callai.retry`; a body
/// policy that is refused is refused whatever the headers say.
fn retry_policy(
    headers: &CallHeaders,
    body: Option<ParsedRetry>,
) -> Result<Option<ParsedRetry>, ApiError> {
    let mut policy = RetryPolicy::default();
    fn text(v: &HeaderValue) -> &str {
        v.to_str().unwrap_or("\u{fffd}")
    }
    if let Some(text) = headers.max_attempts.as_ref().map(text) {
        let n: u32 = text.trim().parse().map_err(|_| {
            ApiError::invalid(
                "retry.maxAttempts",
                format!("x-callai-max-attempts {text:?} is not a whole number"),
            )
        })?;
        policy.max_attempts = Some(n);
    }
    if let Some(text) = headers.grow_max_tokens.as_ref().map(text) {
        policy.grow_max_tokens = Some(match text.trim() {
            "true" => true,
            "false" => false,
            _ => {
                return Err(ApiError::invalid(
                    "retry.growMaxTokens",
                    format!("x-callai-grow-max-tokens {text:?} is neither true nor false"),
                ));
            }
        });
    }
    match body {
        Some(ParsedRetry(Ok(body))) => {
            policy.max_attempts = body.max_attempts.or(policy.max_attempts);
            policy.grow_max_tokens = body.grow_max_tokens.or(policy.grow_max_tokens);
        }
        refused @ Some(ParsedRetry(Err(_))) => return Ok(refused),
        None => {}
    }
    let any = policy.max_attempts.is_some() || policy.grow_max_tokens.is_some();
    Ok(any.then_some(ParsedRetry(Ok(policy))))
}

/// A mapped call planned for the gateway, after counting a client's own
/// retry and resolving its model and policy.
fn prepare<A: DropinApi>(
    gateway: &Gateway,
    caller: &Caller,
    headers: CallHeaders,
    mapped: Mapped,
) -> Result<CallPlan, ApiError> {
    let api = A::API;
    count_client_retry(gateway, api.endpoint(), headers.client_retry);
    let Mapped {
        mut request,
        extension,
        model,
        ..
    } = mapped;
    let route = Route::of_model(&gateway.host, &model)?;
    // The engine routes a model name, as it does the same name on /v1/call.
    route.apply(&mut request);
    let retry = retry_policy(&headers, extension.retry)?;
    let script = match extension.script {
        None => None,
        Some(raw) => Some((
            MockScript::from_json(raw.get()).map_err(|e| ApiError::invalid("callai.script", e))?,
            "callai.script",
        )),
    };
    let planned = Planned {
        id: fresh_id(A::ID_PREFIX),
        endpoint: api.endpoint(),
        request: ParsedRequest::typed(request, retry),
        route,
        script,
        node_id: extension.node_id.map(|id| (id, "callai.nodeId")),
        events: false,
        trace_parent: headers.trace_parent,
    };
    Ok(CallPlan::new(caller, planned)?)
}
