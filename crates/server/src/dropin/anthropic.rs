//! `POST /v1/messages`: the Anthropic Messages API, mapped onto a ctx.callAI
//! request. Structured output is the Messages API's own JSON-schema output
//! (`output_config.format`, as the `anthropic` client 2.x sends it; the
//! beta's `output_format` is read too). Tools, extended thinking and
//! non-text content are refused naming them; `metadata`, `top_p`, `top_k`
//! and `service_tier` are dropped.

use super::{
    AnswerExtension, Api, DropinError, Extension, Mapped, Streaming, answer_id, answer_model,
    answer_text, attempts_headers, sse,
};
use crate::app::AppState;
use crate::tenants::Caller;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use callai_engine::wire::{CallResult, FinishReason};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// A Messages request, as far as this host reads it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessagesRequest {
    model: String,
    max_tokens: u32,
    messages: Vec<AnthropicMessage>,
    system: Option<Blocks>,
    stop_sequences: Option<Vec<String>>,
    temperature: Option<f64>,
    stream: Option<bool>,
    output_config: Option<OutputConfig>,
    output_format: Option<OutputFormat>,
    // Refused when present.
    tools: Option<Value>,
    tool_choice: Option<Value>,
    thinking: Option<Value>,
    container: Option<Value>,
    mcp_servers: Option<Value>,
    // Dropped: they do not change what the answer means.
    #[serde(rename = "metadata")]
    _metadata: Option<IgnoredAny>,
    #[serde(rename = "top_p")]
    _top_p: Option<IgnoredAny>,
    #[serde(rename = "top_k")]
    _top_k: Option<IgnoredAny>,
    #[serde(rename = "service_tier")]
    _service_tier: Option<IgnoredAny>,
    /// The RFC 0248 extension (`extra_body={"callai": {...}}`).
    callai: Option<Extension>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnthropicMessage {
    role: String,
    content: Blocks,
}

/// A string, or content blocks.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Blocks {
    Text(String),
    Blocks(Vec<Map<String, Value>>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputConfig {
    format: Option<OutputFormat>,
    #[serde(rename = "effort")]
    _effort: Option<IgnoredAny>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputFormat {
    #[serde(rename = "type")]
    kind: String,
    schema: Value,
}

/// The text of `blocks` (at `param`): text blocks only.
fn text_of(param: &str, blocks: &Blocks) -> Result<String, DropinError> {
    match blocks {
        Blocks::Text(t) => Ok(t.clone()),
        Blocks::Blocks(blocks) => {
            let mut text = String::new();
            for (j, block) in blocks.iter().enumerate() {
                match (block.get("type").and_then(Value::as_str), block.get("text")) {
                    (Some("text"), Some(Value::String(t))) => text.push_str(t),
                    (kind, _) => {
                        return Err(DropinError::invalid(
                            Api::Anthropic,
                            format!("{param}[{j}]"),
                            format!(
                                "a block of type {:?}: this host takes text blocks only",
                                kind.unwrap_or("?")
                            ),
                        ));
                    }
                }
            }
            Ok(text)
        }
    }
}

/// The request as a ctx.callAI request.
pub fn map(r: MessagesRequest) -> Result<Mapped, DropinError> {
    let api = Api::Anthropic;
    let present = [
        ("tools", r.tools.is_some()),
        ("tool_choice", r.tool_choice.is_some()),
        ("thinking", r.thinking.is_some()),
        ("container", r.container.is_some()),
        ("mcp_servers", r.mcp_servers.is_some()),
    ];
    if let Some((param, _)) = present.iter().find(|(_, p)| *p) {
        return Err(DropinError::invalid(
            api,
            *param,
            "this host does not offer it: a callAI call is text or a JSON schema",
        ));
    }
    let mut wire = Map::new();
    if let Some(system) = &r.system {
        wire.insert("systemPrompt".into(), text_of("system", system)?.into());
    }
    let mut messages = Vec::new();
    for (i, m) in r.messages.iter().enumerate() {
        let role = match m.role.as_str() {
            "user" | "assistant" => m.role.as_str(),
            other => {
                return Err(DropinError::invalid(
                    api,
                    format!("messages[{i}].role"),
                    format!("{other:?}: the Messages API takes user and assistant messages"),
                ));
            }
        };
        let text = text_of(&format!("messages[{i}].content"), &m.content)?;
        messages.push(json!({"role": role, "content": text}));
    }
    wire.insert("messages".into(), Value::Array(messages));
    wire.insert("maxTokens".into(), r.max_tokens.into());
    if let Some(t) = r.temperature {
        wire.insert("temperature".into(), json!(t));
    }
    if let Some(s) = r.stop_sequences {
        wire.insert("stopSequences".into(), json!(s));
    }
    let format = r.output_config.and_then(|c| c.format).or(r.output_format);
    if let Some(format) = format {
        if format.kind != "json_schema" {
            return Err(DropinError::invalid(
                api,
                "output_config.format.type",
                format!("{:?}: this host takes json_schema", format.kind),
            ));
        }
        wire.insert("responseSchema".into(), format.schema);
    }
    let streaming = match r.stream {
        Some(true) => Streaming::On {
            include_usage: true,
        },
        _ => Streaming::Off,
    };
    Ok(Mapped {
        wire,
        extension: r.callai.unwrap_or_default(),
        streaming,
        model: r.model,
    })
}

/// A stop reason in the Messages API's words.
fn stop_reason(reason: Option<FinishReason>) -> &'static str {
    match reason {
        Some(FinishReason::Length) => "max_tokens",
        Some(FinishReason::ContentFilter) => "refusal",
        Some(FinishReason::ToolCall) => "tool_use",
        _ => "end_turn",
    }
}

/// `usage` in the Messages API's words: the final attempt's; a count the
/// provider did not report is absent (the `callai` extension and the
/// headers say the usage is incomplete).
fn usage(result: &CallResult) -> Value {
    let u = result.usage.unwrap_or_default();
    let mut usage = Map::new();
    if let Some(i) = u.input_tokens {
        usage.insert("input_tokens".into(), i.into());
    }
    if let Some(o) = u.output_tokens {
        usage.insert("output_tokens".into(), o.into());
    }
    Value::Object(usage)
}

/// `POST /v1/messages`.
pub async fn messages(
    State(state): State<Arc<AppState>>,
    axum::Extension(caller): axum::Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, DropinError> {
    let api = Api::Anthropic;
    let request: MessagesRequest = super::read_body(api, body)?;
    let mut mapped = map(request)?;
    if mapped.streaming != Streaming::Off && !mapped.wire.contains_key("responseSchema") {
        // A text call streams as its provider does: its usage is not known
        // at the start.
        let call = super::prepare(&state, &caller, api, &headers, &mut mapped)?;
        let framer = MessageFramer {
            id: answer_id("msg_"),
            model: answer_model(&state, &mapped.wire, &CallResult::default()),
            start_usage: json!({"input_tokens": 0, "output_tokens": 0}),
        };
        return super::streaming::relay(state.clone(), caller, api, call, framer).await;
    }
    let (result, budget) = super::settle(&state, &caller, api, &headers, &mut mapped).await?;
    let model = answer_model(&state, &mapped.wire, &result);
    let id = answer_id("msg_");
    let mut headers = attempts_headers(&result);
    headers.extend(budget);
    if mapped.streaming != Streaming::Off {
        let mut start_usage = usage(&result);
        start_usage["output_tokens"] = json!(0);
        let framer = MessageFramer {
            id,
            model,
            start_usage,
        };
        let frames = super::streaming::settled(framer, &result);
        return Ok((headers, sse::body(frames)).into_response());
    }
    let extension = AnswerExtension {
        attempts: result.attempts,
    };
    let answer = json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": answer_text(&result)}],
        "stop_reason": stop_reason(result.finish_reason),
        "stop_sequence": null,
        "usage": usage(&result),
        "callai": extension,
    });
    Ok((headers, axum::Json(answer)).into_response())
}

/// The events of a streamed text call.
struct MessageFramer {
    id: String,
    model: String,
    /// `usage` in `message_start`.
    start_usage: Value,
}

impl super::streaming::Framer for MessageFramer {
    fn start(&mut self) -> Vec<sse::Frame> {
        let start = json!({"type": "message_start", "message": {
            "id": self.id, "type": "message", "role": "assistant", "model": self.model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": self.start_usage}});
        let block = json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}});
        vec![
            (Some("message_start"), start.to_string()),
            (Some("content_block_start"), block.to_string()),
        ]
    }

    fn text(&mut self, text: &str) -> Vec<sse::Frame> {
        let delta = json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": text}});
        vec![(Some("content_block_delta"), delta.to_string())]
    }

    fn end(&mut self, result: &CallResult) -> Vec<sse::Frame> {
        let extension = AnswerExtension {
            attempts: result.attempts,
        };
        let delta = json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason(result.finish_reason), "stop_sequence": null},
            "usage": usage(result), "callai": extension});
        vec![
            (
                Some("content_block_stop"),
                json!({"type": "content_block_stop", "index": 0}).to_string(),
            ),
            (Some("message_delta"), delta.to_string()),
            (
                Some("message_stop"),
                json!({"type": "message_stop"}).to_string(),
            ),
        ]
    }

    fn error(&mut self, error: &DropinError) -> Vec<sse::Frame> {
        vec![(Some("error"), error.body().to_string())]
    }
}
