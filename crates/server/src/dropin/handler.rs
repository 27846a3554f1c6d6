//! The one handler of every drop-in API: the body read into the API's
//! types, mapped onto the engine's typed request, its model and per-call
//! policy resolved, run through the engine as `/v1/call` is (the same
//! admission, limits, events, metrics and traces), and answered in the
//! API's shape, streamed or not.

use super::api::{AnswerExtension, DropinApi, Mapped, Streaming};
use super::outcome::{CallFailure, run};
use super::{sse, streaming};
use crate::body::{self, CallBody, Naming};
use crate::call::{add_attempts, add_call_id};
use crate::error::ApiError;
use crate::state::AppState;
use crate::tenants::Caller;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use callai_engine::MockScript;
use callai_engine::wire::{CallResult, ParsedRequest, ParsedRetry, RetryPolicy};
use std::sync::Arc;

/// `POST` to a drop-in endpoint of API `A`.
pub async fn handle<A: DropinApi>(
    State(state): State<Arc<AppState>>,
    axum::Extension(caller): axum::Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, CallFailure> {
    let bytes = body::bytes(body, "server.maxBodyBytes")?;
    let request: A::Request = body::parse_naming(&bytes, Naming::FullPath)?;
    let mapped = A::map(request)?;
    let streaming = mapped.streaming;
    // A structured call, and a call with tools, is judged whole before
    // any of it goes out (a retry could replace it).
    let judged_whole = mapped.request.is_structured() || mapped.request.offers_tools();
    let (call, route) = prepare::<A>(&state, &caller, &headers, mapped)?;
    let id = call.id.clone();
    // Every answer of the call names it, its failures too.
    let mut answer = answer::<A>(&state, caller, call, route, streaming, judged_whole).await;
    match &mut answer {
        Ok(response) => add_call_id(response.headers_mut(), &id),
        Err(failure) => add_call_id(&mut failure.headers, &id),
    }
    answer
}

/// The answer of a prepared call: streamed as its provider streams it, or
/// once it ended.
async fn answer<A: DropinApi>(
    state: &Arc<AppState>,
    caller: Caller,
    call: CallBody,
    route: Route,
    streaming: Streaming,
    judged_whole: bool,
) -> Result<Response, CallFailure> {
    let id = call.id.clone();
    if streaming != Streaming::Off && !judged_whole {
        // A text call streams as its provider does.
        let model = route.answer_model(state, &CallResult::default());
        let framer = A::framer(model, id, streaming, None);
        return streaming::relay(state.clone(), caller, call, framer).await;
    }
    let (result, charged) = run(state, &caller, call, None).await?;
    let model = route.answer_model(state, &result);
    let mut response = if streaming != Streaming::Off {
        let framer = A::framer(model, id, streaming, Some(&result));
        let frames = streaming::settled(framer, &result);
        sse::body(frames).into_response()
    } else {
        let callai = AnswerExtension::of(&result).with_cost(charged.cost.clone());
        axum::Json(A::answer(&model, &id, &result, callai)).into_response()
    };
    // Into the answer's own header map: no map of their own merged in.
    let headers = response.headers_mut();
    if let Some(attempts) = &result.attempts {
        add_attempts(headers, attempts);
    }
    charged.add_to(headers);
    Ok(response)
}

/// Where a drop-in `model` sends the call.
pub enum Route {
    /// A model name `[models.NAME]` routes: the engine picks its targets.
    Model(String),
    /// A provider, and the model when `model` named one (else the
    /// provider's own).
    Provider {
        /// The provider.
        provider: String,
        /// The model asked of it.
        model: Option<String>,
    },
}

impl Route {
    /// Where a drop-in `model` goes: a routed model name, else
    /// `PROVIDER/MODEL`, or a provider alone (its configured model).
    fn of(state: &AppState, model: &str) -> Result<Self, ApiError> {
        if state.host.config().models.contains_key(model) {
            return Ok(Self::Model(model.to_owned()));
        }
        let providers = state.host.providers();
        if let Some((provider, name)) = model.split_once('/')
            && providers.get(provider).is_some()
            && !name.is_empty()
        {
            return Ok(Self::Provider {
                provider: provider.to_owned(),
                model: Some(name.to_owned()),
            });
        }
        if providers.get(model).is_some() {
            return Ok(Self::Provider {
                provider: model.to_owned(),
                model: None,
            });
        }
        let known: Vec<&str> = providers.names().collect();
        let routes = &state.host.config().models;
        let message = if routes.is_empty() {
            format!(
                "{model:?} names no provider of this host: use PROVIDER/MODEL or PROVIDER, \
                 with one of {known:?}"
            )
        } else {
            let routed: Vec<&String> = routes.keys().collect();
            format!(
                "{model:?} names no model or provider of this host: use a model name of \
                 [models] ({routed:?}), PROVIDER/MODEL or PROVIDER, with one of {known:?}"
            )
        };
        Err(ApiError::invalid("model", message))
    }

    /// The providers a call of this route may reach, before the policy.
    fn providers<'s>(&'s self, state: &'s AppState) -> Vec<&'s str> {
        match self {
            Self::Provider { provider, .. } => vec![provider.as_str()],
            Self::Model(name) => state.host.config().models[name]
                .target_names()
                .map(|t| t.provider)
                .collect(),
        }
    }

    /// The model an answer names: the routed name the client sent, or
    /// `PROVIDER/MODEL`, as `/v1/models` lists them.
    fn answer_model(&self, state: &AppState, result: &CallResult) -> String {
        let (provider, model) = match self {
            Self::Model(name) => return name.clone(),
            Self::Provider { provider, model } => (provider, model),
        };
        let model = result
            .model
            .as_deref()
            .or(model.as_deref())
            .or_else(|| {
                let (_, found) = state.host.providers().get(provider)?;
                Some(found.default_model())
            })
            .unwrap_or_default();
        format!("{provider}/{model}")
    }
}

/// Counts the request if it is a client's own retry (the OpenAI and
/// Anthropic SDKs say so in `x-stainless-retry-count`), on top of the
/// host's: so that nested retries show (the docs say to set
/// `max_retries=0`).
pub fn count_client_retry(state: &AppState, endpoint: &'static str, headers: &HeaderMap) {
    let resent = headers
        .get("x-stainless-retry-count")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|n| n > 0);
    if resent {
        state.metrics.client_retry(endpoint);
    }
}

/// The per-call policy of the headers `x-callai-max-attempts` and
/// `x-callai-grow-max-tokens`, under the body's own `callai.retry`; a body
/// policy that is refused is refused whatever the headers say.
fn retry_policy(
    headers: &HeaderMap,
    body: Option<ParsedRetry>,
) -> Result<Option<ParsedRetry>, ApiError> {
    let mut policy = RetryPolicy::default();
    let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    if let Some(text) = header("x-callai-max-attempts") {
        let n: u32 = text.trim().parse().map_err(|_| {
            ApiError::invalid(
                "retry.maxAttempts",
                format!("x-callai-max-attempts {text:?} is not a whole number"),
            )
        })?;
        policy.max_attempts = Some(n);
    }
    if let Some(text) = header("x-callai-grow-max-tokens") {
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

/// A mapped call ready for the engine, after counting a client's own
/// retry and resolving its model and policy; and where it goes.
fn prepare<A: DropinApi>(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    mapped: Mapped,
) -> Result<(CallBody, Route), ApiError> {
    let api = A::API;
    count_client_retry(state, api.endpoint(), headers);
    let Mapped {
        mut request,
        extension,
        model,
        ..
    } = mapped;
    let route = Route::of(state, &model)?;
    let provider = match &route {
        Route::Model(name) => {
            // The engine routes it, as it does the same name on /v1/call.
            request.provider = None;
            request.model = Some(name.clone());
            None
        }
        Route::Provider { provider, model } => {
            request.provider = Some(provider.clone());
            if let Some(model) = model {
                request.model = Some(model.clone());
            }
            Some(provider.clone())
        }
    };
    let retry = retry_policy(headers, extension.retry)?;
    let script = match extension.script {
        None => None,
        Some(raw) => Some(
            MockScript::from_json(raw.get()).map_err(|e| ApiError::invalid("callai.script", e))?,
        ),
    };
    // A provider the caller may not reach is the engine's to refuse
    // (`policy_denied`, naming it), before anything is said of a script.
    let policy = caller.0.host.config();
    if script.is_some()
        && let Some(other) = route
            .providers(state)
            .into_iter()
            .find(|&p| p != "mock" && policy.provider_allowed(p))
    {
        return Err(ApiError::invalid(
            "callai.script",
            format!("a script is for the mock provider; this call goes to {other:?}"),
        ));
    }
    if let Some(id) = &extension.node_id
        && !body::valid_node_id(id)
    {
        return Err(ApiError::invalid("callai.nodeId", body::NODE_ID_RULE));
    }
    let call = CallBody {
        id: crate::calls::fresh_id(A::ID_PREFIX),
        endpoint: api.endpoint(),
        request: ParsedRequest::typed(request, retry),
        provider,
        script,
        node_id: extension.node_id,
        events: false,
    };
    Ok((call, route))
}
