//! The drop-in endpoints: the OpenAI Chat Completions API
//! (`POST /v1/chat/completions`), the Anthropic Messages API
//! (`POST /v1/messages`) and the model list (`GET /v1/models`), so that the
//! clients people already have work against `callai serve` unchanged but for
//! their base URL. Each call goes through the engine as `/v1/call` does
//! (the same admission, limits, events, metrics and traces), and RFC 0248
//! travels in an extension strict clients ignore: `"callai": {"attempts"}`
//! in the body and the `x-callai-*` headers. `usage` keeps its meaning, the
//! final attempt's, in the API's own field names.

pub mod anthropic;
mod error;
pub mod openai;
mod sse;
mod streaming;

pub use error::DropinError;

use crate::app::AppState;
use crate::body::CallBody;
use crate::call::{self, Settled};
use crate::tenants::Caller;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::IntoResponse;
use callai_engine::wire::{Attempts, CallResult, FinishReason, StructuredOutput};
use callai_engine::{DeltaSink, MockScript};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Whose wire format a request and its answer use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI Chat Completions.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

impl Api {
    /// The label of `callai_client_retries_total`.
    pub fn endpoint(self) -> &'static str {
        match self {
            Self::OpenAi => "chat_completions",
            Self::Anthropic => "messages",
        }
    }
}

/// The `callai` body extension: the per-call retry policy (RFC 0248 §B), a
/// mock script, the node id the call's events carry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Extension {
    /// `{"maxAttempts", "growMaxTokens"}`, checked by the engine (`null`
    /// too: it is refused there, as on `/v1/call`).
    #[serde(default, deserialize_with = "crate::body::present")]
    retry: Option<Value>,
    /// A mock script for this call alone.
    script: Option<Value>,
    /// The node id of the call's events.
    node_id: Option<String>,
}

/// Whether and how to stream the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Streaming {
    /// One JSON answer.
    Off,
    /// Server-sent events; `usage` in a last chunk of its own when asked
    /// (OpenAI's `stream_options.include_usage`).
    On {
        /// A last chunk with `usage` and `callai.attempts`.
        include_usage: bool,
    },
}

/// A drop-in request mapped onto a ctx.callAI request.
#[derive(Debug, Clone)]
pub struct Mapped {
    /// The wire request (`messages`, `systemPrompt`, `maxTokens`, ...).
    pub wire: Map<String, Value>,
    /// The extension, if the body carried one.
    pub extension: Extension,
    /// How to answer.
    pub streaming: Streaming,
    /// The `model` as the caller wrote it.
    pub model: String,
}

/// The body of a drop-in request as `T`, refused in `api`'s shape (over
/// `[server] maxBodyBytes`, not JSON, a field that does not fit, named by
/// its whole path).
pub fn read_body<T: serde::de::DeserializeOwned>(
    api: Api,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<T, DropinError> {
    let bytes = crate::body::bytes(body, "server.maxBodyBytes")
        .map_err(|e| DropinError::from_api(api, e))?;
    crate::body::parse_naming(&bytes, crate::body::Naming::FullPath)
        .map_err(|e| DropinError::from_api(api, e))
}

/// Counts the request if it is a client's own retry (the OpenAI and
/// Anthropic SDKs say so in `x-stainless-retry-count`), on top of the
/// host's: so that nested retries show (the docs say to set
/// `max_retries=0`).
pub fn count_client_retry(state: &AppState, api: Api, headers: &HeaderMap) {
    let resent = headers
        .get("x-stainless-retry-count")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|n| n > 0);
    if resent {
        state.metrics.client_retry(api.endpoint());
    }
}

/// The API of a drop-in path.
pub fn api_of(path: &str) -> Option<Api> {
    match path {
        "/v1/chat/completions" => Some(Api::OpenAi),
        "/v1/messages" => Some(Api::Anthropic),
        _ => None,
    }
}

/// The provider and model a drop-in `model` names: `PROVIDER/MODEL`, or a
/// provider alone (its configured model).
pub fn resolve_model(
    state: &AppState,
    api: Api,
    model: &str,
) -> Result<(String, Option<String>), DropinError> {
    let providers = state.host.providers();
    if let Some((provider, name)) = model.split_once('/')
        && providers.get(provider).is_some()
        && !name.is_empty()
    {
        return Ok((provider.to_owned(), Some(name.to_owned())));
    }
    if providers.get(model).is_some() {
        return Ok((model.to_owned(), None));
    }
    let known: Vec<&str> = providers.names().collect();
    Err(DropinError::invalid(
        api,
        "model",
        format!(
            "{model:?} names no provider of this host: use PROVIDER/MODEL or PROVIDER, with one of {known:?}"
        ),
    ))
}

/// The per-call policy of the headers `x-callai-max-attempts` and
/// `x-callai-grow-max-tokens`, under the body's own `callai.retry`.
fn retry_policy(
    api: Api,
    headers: &HeaderMap,
    body: Option<Value>,
) -> Result<Option<Value>, DropinError> {
    let mut policy = Map::new();
    let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    if let Some(text) = header("x-callai-max-attempts") {
        let n: u32 = text.trim().parse().map_err(|_| {
            DropinError::invalid(
                api,
                "retry.maxAttempts",
                format!("x-callai-max-attempts {text:?} is not a whole number"),
            )
        })?;
        policy.insert("maxAttempts".into(), n.into());
    }
    if let Some(text) = header("x-callai-grow-max-tokens") {
        let grow = match text.trim() {
            "true" => true,
            "false" => false,
            _ => {
                return Err(DropinError::invalid(
                    api,
                    "retry.growMaxTokens",
                    format!("x-callai-grow-max-tokens {text:?} is neither true nor false"),
                ));
            }
        };
        policy.insert("growMaxTokens".into(), grow.into());
    }
    match body {
        Some(Value::Object(body)) => policy.extend(body),
        // Not a policy (`null`, a number): the engine refuses it, naming
        // `retry`, as it does on `/v1/call`.
        Some(other) => return Ok(Some(other)),
        None => {}
    }
    Ok((!policy.is_empty()).then_some(Value::Object(policy)))
}

/// A mapped call ready for the engine: the `/v1/call` body it makes,
/// after counting a client's own retry and resolving its model and policy.
pub fn prepare(
    state: &AppState,
    caller: &Caller,
    api: Api,
    headers: &HeaderMap,
    mapped: &mut Mapped,
) -> Result<CallBody, DropinError> {
    count_client_retry(state, api, headers);
    let (provider, model) = resolve_model(state, api, &mapped.model)?;
    mapped
        .wire
        .insert("provider".into(), provider.clone().into());
    if let Some(model) = model {
        mapped.wire.insert("model".into(), model.into());
    }
    let extension = std::mem::take(&mut mapped.extension);
    if let Some(retry) = retry_policy(api, headers, extension.retry)? {
        mapped.wire.insert("retry".into(), retry);
    }
    let script = match extension.script {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            MockScript::from_json(&v.to_string())
                .map_err(|e| DropinError::invalid(api, "callai.script", e))?,
        ),
    };
    // A provider the caller may not reach is the engine's to refuse
    // (`policy_denied`, naming it), before anything is said of a script.
    let allowed = caller
        .0
        .host
        .allowed_providers()
        .contains(&provider.as_str());
    if script.is_some() && provider != "mock" && allowed {
        return Err(DropinError::invalid(
            api,
            "callai.script",
            format!("a script is for the mock provider; this call goes to {provider:?}"),
        ));
    }
    if let Some(id) = &extension.node_id
        && !crate::body::valid_node_id(id)
    {
        return Err(DropinError::invalid(
            api,
            "callai.nodeId",
            crate::body::NODE_ID_RULE,
        ));
    }
    Ok(CallBody {
        request: Value::Object(mapped.wire.clone()).to_string(),
        provider: Some(provider),
        script,
        node_id: extension.node_id,
        events: false,
    })
}

/// Runs a prepared call through the engine, its text streamed to `deltas`
/// when given; the result with the caller's budget headers.
pub async fn run(
    state: &AppState,
    caller: &Caller,
    api: Api,
    call: CallBody,
    deltas: Option<DeltaSink>,
) -> Result<(CallResult, HeaderMap), DropinError> {
    let settled: Settled = call::settle(state, caller, call, deltas)
        .await
        .map_err(|e| DropinError::from_api(api, e))?;
    let budget = settled.budget_headers();
    match settled.outcome {
        Ok(result) => Ok((result, budget)),
        Err(e) => {
            let mut error = DropinError::from_call(api, &e);
            error.extra = (!budget.is_empty()).then(|| Box::new(budget));
            Err(error)
        }
    }
}

/// Runs a mapped call to its end.
pub async fn settle(
    state: &AppState,
    caller: &Caller,
    api: Api,
    headers: &HeaderMap,
    mapped: &mut Mapped,
) -> Result<(CallResult, HeaderMap), DropinError> {
    let call = prepare(state, caller, api, headers, mapped)?;
    run(state, caller, api, call, None).await
}

/// The `callai` extension of an answer: `{"attempts": {...}}`.
#[derive(Debug, Clone, Serialize)]
pub struct AnswerExtension {
    /// The RFC 0248 record, when the host advertises it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<Attempts>,
}

/// The `x-callai-*` headers of an answer.
pub fn attempts_headers(result: &CallResult) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(a) = &result.attempts {
        headers.insert("x-callai-attempts-count", HeaderValue::from(a.count));
        if let Some(t) = a.output_tokens {
            headers.insert("x-callai-attempts-output-tokens", HeaderValue::from(t));
        }
        let complete = if a.usage_complete { "true" } else { "false" };
        headers.insert(
            "x-callai-usage-complete",
            HeaderValue::from_static(complete),
        );
        let mode = match a.structured_output {
            Some(StructuredOutput::Native) => "native",
            Some(StructuredOutput::Prompt) => "prompt",
            None => "none",
        };
        headers.insert("x-callai-structured-output", HeaderValue::from_static(mode));
    }
    headers
}

/// The answer's text: a text call's content, or a structured call's JSON.
pub fn answer_text(result: &CallResult) -> String {
    match (&result.data, &result.content) {
        (Some(data), _) => data.to_string(),
        (None, Some(text)) => text.clone(),
        (None, None) => String::new(),
    }
}

/// The model an answer names: `PROVIDER/MODEL`, as `/v1/models` lists it.
pub fn answer_model(state: &AppState, wire: &Map<String, Value>, result: &CallResult) -> String {
    let provider = wire
        .get("provider")
        .and_then(Value::as_str)
        .unwrap_or("mock");
    let model = result
        .model
        .clone()
        .or_else(|| wire.get("model").and_then(Value::as_str).map(str::to_owned))
        .or_else(|| {
            state
                .host
                .providers()
                .get(provider)
                .map(|(_, p)| p.default_model().to_owned())
        })
        .unwrap_or_default();
    format!("{provider}/{model}")
}

/// A fresh id for an answer, after `prefix`.
pub fn answer_id(prefix: &str) -> String {
    let seed = callai_engine::runlog::RunSeed::fresh().seed;
    format!("{prefix}{seed:016x}")
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    callai_engine::events::now_ms() / 1000
}

/// A finish reason in OpenAI's words.
pub fn openai_finish(reason: Option<FinishReason>) -> &'static str {
    match reason {
        Some(FinishReason::Length) => "length",
        Some(FinishReason::ContentFilter) => "content_filter",
        Some(FinishReason::ToolCall) => "tool_calls",
        _ => "stop",
    }
}

/// `GET /v1/models`: every `PROVIDER/MODEL` this host routes for the caller
/// (each provider's configured model; a request may name any other model of
/// it); a tenant's list keeps to its `allowedProviders`.
pub async fn models(axum::Extension(caller): axum::Extension<Caller>) -> impl IntoResponse {
    let created = unix_now();
    // The caller's host: a tenant sees only the providers it may reach.
    let host = &caller.0.host;
    let data: Vec<Value> = host
        .allowed_providers()
        .into_iter()
        .filter_map(|name| {
            let (_, provider) = host.providers().get(name)?;
            Some(serde_json::json!({
                "id": format!("{name}/{}", provider.default_model()),
                "object": "model",
                "created": created,
                "owned_by": name,
            }))
        })
        .collect();
    axum::Json(serde_json::json!({"object": "list", "data": data}))
}
