//! The Responses API's answer: a `response` object, its `output` items (a
//! `message` with its `output_text`, then each `function_call`), its
//! `status` (`completed`; `incomplete` with the reason when the output was
//! cut), the final attempt's `usage` in the API's words, and the `callai`
//! extension. A streamed response is the same object, built up by the
//! event framer.

use super::request::Echo;
use crate::dropin::api::{AnswerExtension, answer_text};
use crate::error::ApiError;
use callai_engine::wire::{CallResult, FinishReason, ToolCall};
use serde::Serialize;
use std::borrow::Cow;

/// A `response`.
#[derive(Serialize)]
pub(super) struct ResponseObject<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callai: Option<AnswerExtension>,
    pub created_at: u64,
    pub error: Option<ResponseError<'a>>,
    pub id: &'a str,
    pub incomplete_details: Option<Incomplete>,
    pub model: &'a str,
    pub object: &'static str,
    pub output: Cow<'a, [OutputItem<'a>]>,
    pub status: &'static str,
    pub usage: Option<ResponseUsage>,
    #[serde(flatten)]
    pub echo: &'a Echo,
}

/// `error` of a failed response.
#[derive(Serialize)]
pub(super) struct ResponseError<'a> {
    pub code: &'static str,
    pub message: &'a str,
}

impl<'a> ResponseError<'a> {
    pub fn of(error: &'a ApiError) -> Self {
        Self {
            code: error.code.as_str(),
            message: &error.message,
        }
    }
}

/// `incomplete_details`: why the output was cut.
#[derive(Serialize)]
pub(super) struct Incomplete {
    pub reason: &'static str,
}

/// One `output` item.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum OutputItem<'a> {
    Message {
        content: Vec<OutputText<'a>>,
        id: String,
        role: &'static str,
        status: &'static str,
    },
    FunctionCall {
        arguments: Cow<'a, str>,
        call_id: Cow<'a, str>,
        id: String,
        name: Cow<'a, str>,
        status: &'static str,
    },
}

/// An `output_text` part.
#[derive(Debug, Clone, Serialize)]
pub(super) struct OutputText<'a> {
    pub annotations: [(); 0],
    pub text: Cow<'a, str>,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

impl<'a> OutputText<'a> {
    pub fn new(text: Cow<'a, str>) -> Self {
        Self {
            annotations: [],
            text,
            kind: "output_text",
        }
    }
}

/// `usage` in the Responses API's words: the final attempt's (§A.4), each
/// count it reported; cached input and reasoning tokens where its provider
/// said.
#[derive(Serialize)]
pub(super) struct ResponseUsage {
    #[serde(skip_serializing_if = "Option::is_none")]
    input_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_tokens_details: Option<InputDetails>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_tokens_details: Option<OutputDetails>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_tokens: Option<u32>,
}

#[derive(Serialize)]
struct InputDetails {
    cached_tokens: u32,
}

#[derive(Serialize)]
struct OutputDetails {
    reasoning_tokens: u32,
}

pub(super) fn usage(result: &CallResult) -> Option<ResponseUsage> {
    let u = result.usage.as_ref()?;
    if u.input_tokens.is_none() && u.output_tokens.is_none() {
        return None;
    }
    Some(ResponseUsage {
        input_tokens: u.input_tokens,
        input_tokens_details: (result.cached_input_tokens)
            .map(|cached_tokens| InputDetails { cached_tokens }),
        output_tokens: u.output_tokens,
        output_tokens_details: (result.reasoning_tokens)
            .map(|reasoning_tokens| OutputDetails { reasoning_tokens }),
        total_tokens: u.total_tokens,
    })
}

/// The `status` of a response that ended with `result`, and why it is
/// incomplete when it is.
pub(super) fn status(result: &CallResult) -> (&'static str, Option<Incomplete>) {
    let reason = match result.finish_reason {
        Some(FinishReason::Length) => "max_output_tokens",
        Some(FinishReason::ContentFilter) => "content_filter",
        _ => return ("completed", None),
    };
    ("incomplete", Some(Incomplete { reason }))
}

/// The id of response `id`'s item `kind` (`msg`, `fc`) number `n`: the
/// call's id with the item's prefix, so that an item names its call.
pub(super) fn item_id(id: &str, kind: &str, n: usize) -> String {
    let call = id.strip_prefix("resp_").unwrap_or(id);
    match n {
        0 => format!("{kind}_{call}"),
        n => format!("{kind}_{call}_{n}"),
    }
}

/// A `function_call` item of `call`, the `n`th of response `id`.
pub(super) fn function_call<'a>(
    id: &str,
    n: usize,
    call: &'a ToolCall,
    status: &'static str,
) -> OutputItem<'a> {
    OutputItem::FunctionCall {
        arguments: Cow::Borrowed(&call.arguments),
        call_id: Cow::Borrowed(&call.id),
        id: item_id(id, "fc", n),
        name: Cow::Borrowed(&call.name),
        status,
    }
}

/// The `output` of response `id`, ended with `result`: its text as a
/// message (none when it only calls tools), then its tool calls.
pub(super) fn output<'a>(id: &str, result: &'a CallResult) -> Vec<OutputItem<'a>> {
    let (status, _) = status(result);
    let mut items = Vec::new();
    let calls = result.tool_calls.as_deref().unwrap_or_default();
    let text = answer_text(result);
    if calls.is_empty() || !text.is_empty() {
        items.push(OutputItem::Message {
            content: vec![OutputText::new(text)],
            id: item_id(id, "msg", 0),
            role: "assistant",
            status,
        });
    }
    let calls = calls.iter().enumerate();
    items.extend(calls.map(|(n, call)| function_call(id, n, call, "completed")));
    items
}
