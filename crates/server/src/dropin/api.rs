//! What a drop-in API is to the one handler that serves them all: how its
//! request maps onto the engine's typed request, and how a call's result
//! is answered and streamed in its shape. The request goes from the API's
//! types to the engine's without passing through JSON in between.

use super::sse::Frame;
use crate::error::ApiError;
use callai_engine::BoxFuture;
use callai_engine::cost::Cost;
use callai_engine::wire::{Attempts, CallRequest, CallResult, FinishReason, ParsedRetry, ToolCall};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::borrow::Cow;

/// Whose wire format a request and its answer use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI Chat Completions.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses (its errors in OpenAI's shape).
    Responses,
    /// OpenAI Embeddings (its errors in OpenAI's shape).
    Embeddings,
}

impl Api {
    /// The label of `callai_client_retries_total`.
    pub fn endpoint(self) -> &'static str {
        match self {
            Self::OpenAi => "chat_completions",
            Self::Anthropic => "messages",
            Self::Responses => "responses",
            Self::Embeddings => "embeddings",
        }
    }
}

/// What a drop-in does with a call's result before its answer goes out,
/// given the call's id and the model the answer names (the Responses API
/// keeps a stored response): awaited, so that the answer is never ahead of
/// it.
pub type Keep = Box<dyn FnOnce(&CallResult, &str, &str) -> BoxFuture<'static, ()> + Send>;

/// How an API frames a streamed call.
pub trait Framer: Send + 'static {
    /// The frames before any text.
    fn start(&mut self) -> Vec<Frame>;
    /// The frames of a piece of text.
    fn text(&mut self, text: &str) -> Vec<Frame>;
    /// The frames of the answer's tool calls, judged (after its text).
    fn tool_calls(&mut self, calls: &[ToolCall]) -> Vec<Frame>;
    /// The frames of the call's end.
    fn end(&mut self, result: &CallResult) -> Vec<Frame>;
    /// The frames of a failure after text went out.
    fn error(&mut self, error: &ApiError) -> Vec<Frame>;
}

/// One drop-in API.
pub trait DropinApi: Send + Sync + 'static {
    /// Which one.
    const API: Api;
    /// How its answers' ids begin (`chatcmpl-`, `msg_`): a call's id is
    /// its answer's.
    const ID_PREFIX: &'static str;
    /// Its request body, as far as this host reads it.
    type Request: DeserializeOwned + Send;
    /// The frames of its streamed answer.
    type Framer: Framer;
    /// What of the request its answer repeats (the Responses API's
    /// `instructions`, `tools`, `text`, …); `()` for an API that repeats
    /// nothing.
    type Echo: Send + 'static;

    /// The request in the engine's terms, or the refusal of what the host
    /// cannot honour, naming the API's own field; with what its answer
    /// repeats.
    fn map(request: Self::Request) -> Result<(Mapped, Self::Echo), ApiError>;

    /// The answer `id` of a call to `model` that ended with `result`,
    /// with the `callai` extension `callai`.
    fn answer<'a>(
        model: &'a str,
        id: &'a str,
        result: &'a CallResult,
        callai: AnswerExtension,
        echo: &'a Self::Echo,
    ) -> impl Serialize + 'a;

    /// The frames of a streamed answer for a call to `model`: as the
    /// provider streams it, or of a call that already ended (`settled`: a
    /// structured call, whose text is known only at its end).
    fn framer(
        model: String,
        id: String,
        streaming: Streaming,
        settled: Option<&CallResult>,
        echo: Self::Echo,
    ) -> Self::Framer;
}

/// The `callai` body extension: the per-call retry policy (RFC 0248 §B), a
/// mock script, the node id the call's events carry.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Extension {
    /// `{"maxAttempts", "growMaxTokens"}`, read as a ctx.callAI request's
    /// `retry` is (`null` too: it is refused, naming `retry`).
    #[serde(default, deserialize_with = "present_retry")]
    pub retry: Option<ParsedRetry>,
    /// A mock script for this call alone.
    pub script: Option<Box<RawValue>>,
    /// The node id of the call's events.
    pub node_id: Option<String>,
}

/// A `retry` that is present, `null` included, as `Some`.
fn present_retry<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<ParsedRetry>, D::Error> {
    ParsedRetry::deserialize(d).map(Some)
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
#[derive(Debug)]
pub struct Mapped {
    /// The request, its provider and model not yet resolved from `model`.
    pub request: CallRequest,
    /// The extension, if the body carried one.
    pub extension: Extension,
    /// How to answer.
    pub streaming: Streaming,
    /// The `model` as the caller wrote it.
    pub model: String,
}

/// The `callai` extension of an answer: `{"attempts": {...}, "cost": {...}}`.
#[derive(Debug, Clone, Serialize)]
pub struct AnswerExtension {
    /// The RFC 0248 record, when the host advertises it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<Attempts>,
    /// What the call cost, when a price is known (not on a stream: its
    /// end is framed before the call is priced).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
}

impl AnswerExtension {
    /// The extension of `result`'s answer.
    pub fn of(result: &CallResult) -> Self {
        Self {
            attempts: result.attempts,
            cost: None,
        }
    }

    /// With what the call cost.
    pub fn with_cost(self, cost: Option<Cost>) -> Self {
        Self { cost, ..self }
    }
}

/// The answer's text: a text call's content, or a structured call's JSON.
pub fn answer_text(result: &CallResult) -> Cow<'_, str> {
    match (&result.data, &result.content) {
        (Some(data), _) => Cow::Owned(data.to_string()),
        (None, Some(text)) => Cow::Borrowed(text),
        (None, None) => Cow::Borrowed(""),
    }
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
