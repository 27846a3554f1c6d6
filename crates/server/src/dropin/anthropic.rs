//! `POST /v1/messages`: the Anthropic Messages API, mapped onto a ctx.callAI
//! request. Structured output is the Messages API's own JSON-schema output
//! (`output_config.format`, as the `anthropic` client 2.x sends it; the
//! beta's `output_format` is read too). Tools, extended thinking and
//! non-text content are refused naming them; `metadata`, `top_p`, `top_k`
//! and `service_tier` are dropped.

use super::api::{
    AnswerExtension, Api, DropinApi, Extension, Framer, Mapped, Streaming, TextOrParts, answer_id,
    answer_text, text_of, text_or_parts,
};
use super::sse::Frame;
use crate::error::ApiError;
use callai_engine::wire::{CallRequest, CallResult, FinishReason, Message, Role};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;

/// A Messages request, as far as this host reads it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessagesRequest {
    model: String,
    max_tokens: u32,
    messages: Vec<AnthropicMessage>,
    #[serde(default, deserialize_with = "optional_blocks")]
    system: Option<TextOrParts>,
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
    #[serde(deserialize_with = "blocks")]
    content: TextOrParts,
}

/// A string, or content blocks (`null` is neither).
fn blocks<'de, D: serde::Deserializer<'de>>(d: D) -> Result<TextOrParts, D::Error> {
    text_or_parts(d, "Blocks")?.ok_or_else(|| {
        serde::de::Error::custom("data did not match any variant of untagged enum Blocks")
    })
}

/// `system`: a string, content blocks, or `null` (none).
fn optional_blocks<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<TextOrParts>, D::Error> {
    text_or_parts(d, "Blocks")
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

/// The Anthropic Messages API.
pub struct Anthropic;

impl DropinApi for Anthropic {
    const API: Api = Api::Anthropic;
    type Request = MessagesRequest;
    type Framer = MessageFramer;

    fn map(r: MessagesRequest) -> Result<Mapped, ApiError> {
        let present = [
            ("tools", r.tools.is_some()),
            ("tool_choice", r.tool_choice.is_some()),
            ("thinking", r.thinking.is_some()),
            ("container", r.container.is_some()),
            ("mcp_servers", r.mcp_servers.is_some()),
        ];
        if let Some((param, _)) = present.iter().find(|(_, p)| *p) {
            return Err(ApiError::invalid(
                param,
                "this host does not offer it: a callAI call is text or a JSON schema",
            ));
        }
        let system_prompt = r
            .system
            .map(|system| text_of("system", "block", system))
            .transpose()?;
        let mut messages = Vec::with_capacity(r.messages.len());
        for (i, m) in r.messages.into_iter().enumerate() {
            let role = match m.role.as_str() {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                other => {
                    return Err(ApiError::invalid(
                        &format!("messages[{i}].role"),
                        format!("{other:?}: the Messages API takes user and assistant messages"),
                    ));
                }
            };
            let text = text_of(&format!("messages[{i}].content"), "block", m.content)?;
            messages.push(Message::new(role, text));
        }
        let format = r.output_config.and_then(|c| c.format).or(r.output_format);
        let response_schema = match format {
            Some(format) if format.kind != "json_schema" => {
                return Err(ApiError::invalid(
                    "output_config.format.type",
                    format!("{:?}: this host takes json_schema", format.kind),
                ));
            }
            Some(format) => Some(format.schema),
            None => None,
        };
        let request = CallRequest {
            system_prompt,
            messages,
            max_tokens: Some(r.max_tokens),
            temperature: r.temperature,
            stop_sequences: r.stop_sequences,
            response_schema,
            ..CallRequest::default()
        };
        let streaming = match r.stream {
            Some(true) => Streaming::On {
                include_usage: true,
            },
            _ => Streaming::Off,
        };
        Ok(Mapped {
            request,
            extension: r.callai.unwrap_or_default(),
            streaming,
            model: r.model,
        })
    }

    fn answer<'a>(model: &'a str, result: &'a CallResult) -> impl Serialize + 'a {
        MessageAnswer {
            callai: AnswerExtension::of(result),
            content: [TextBlock {
                text: answer_text(result),
                kind: "text",
            }],
            id: answer_id("msg_"),
            model,
            role: "assistant",
            stop_reason: stop_reason(result.finish_reason),
            stop_sequence: None,
            kind: "message",
            usage: usage(result),
        }
    }

    fn framer(model: String, _: Streaming, settled: Option<&CallResult>) -> MessageFramer {
        // A live stream's usage is not known at its start.
        let start_usage = match settled {
            Some(result) => Usage {
                output_tokens: Some(0),
                ..usage(result)
            },
            None => Usage {
                input_tokens: Some(0),
                output_tokens: Some(0),
            },
        };
        MessageFramer {
            id: answer_id("msg_"),
            model,
            start_usage,
        }
    }
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
#[derive(Debug, Clone, Copy, Serialize)]
struct Usage {
    #[serde(skip_serializing_if = "Option::is_none")]
    input_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_tokens: Option<u32>,
}

fn usage(result: &CallResult) -> Usage {
    let u = result.usage.unwrap_or_default();
    Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
    }
}

// The answers' keys are in byte order, as they were when the answers were
// built as JSON trees.

/// A `message`.
#[derive(Serialize)]
struct MessageAnswer<'a> {
    callai: AnswerExtension,
    content: [TextBlock<'a>; 1],
    id: String,
    model: &'a str,
    role: &'static str,
    stop_reason: &'static str,
    stop_sequence: Option<()>,
    #[serde(rename = "type")]
    kind: &'static str,
    usage: Usage,
}

#[derive(Serialize)]
struct TextBlock<'a> {
    text: Cow<'a, str>,
    #[serde(rename = "type")]
    kind: &'static str,
}

/// `message_start`'s message: no content yet.
#[derive(Serialize)]
struct StartMessage<'a> {
    content: [(); 0],
    id: &'a str,
    model: &'a str,
    role: &'static str,
    stop_reason: Option<()>,
    stop_sequence: Option<()>,
    #[serde(rename = "type")]
    kind: &'static str,
    usage: Usage,
}

/// The events of the stream, each `{..., "type"}`.
#[derive(Serialize)]
struct MessageStart<'a> {
    message: StartMessage<'a>,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct BlockStart<'a> {
    content_block: TextBlock<'a>,
    index: u32,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct BlockDelta<'a> {
    delta: TextDelta<'a>,
    index: u32,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct BlockStop {
    index: u32,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct MessageDelta {
    callai: AnswerExtension,
    delta: StopDelta,
    #[serde(rename = "type")]
    kind: &'static str,
    usage: Usage,
}

#[derive(Serialize)]
struct MessageStop {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct TextDelta<'a> {
    text: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct StopDelta {
    stop_reason: &'static str,
    stop_sequence: Option<()>,
}

/// The events of a streamed call.
pub struct MessageFramer {
    id: String,
    model: String,
    /// `usage` in `message_start`.
    start_usage: Usage,
}

/// An event as a frame named by its type.
fn frame(name: &'static str, event: &impl Serialize) -> Frame {
    let data = serde_json::to_string(event).expect("an event always serialises");
    (Some(name), data)
}

impl Framer for MessageFramer {
    fn start(&mut self) -> Vec<Frame> {
        let message = StartMessage {
            content: [],
            id: &self.id,
            model: &self.model,
            role: "assistant",
            stop_reason: None,
            stop_sequence: None,
            kind: "message",
            usage: self.start_usage,
        };
        let block = TextBlock {
            text: Cow::Borrowed(""),
            kind: "text",
        };
        let start = MessageStart {
            message,
            kind: "message_start",
        };
        let block = BlockStart {
            content_block: block,
            index: 0,
            kind: "content_block_start",
        };
        vec![
            frame("message_start", &start),
            frame("content_block_start", &block),
        ]
    }

    fn text(&mut self, text: &str) -> Vec<Frame> {
        let delta = BlockDelta {
            delta: TextDelta {
                text,
                kind: "text_delta",
            },
            index: 0,
            kind: "content_block_delta",
        };
        vec![frame("content_block_delta", &delta)]
    }

    fn end(&mut self, result: &CallResult) -> Vec<Frame> {
        let stop = BlockStop {
            index: 0,
            kind: "content_block_stop",
        };
        let delta = MessageDelta {
            callai: AnswerExtension::of(result),
            delta: StopDelta {
                stop_reason: stop_reason(result.finish_reason),
                stop_sequence: None,
            },
            kind: "message_delta",
            usage: usage(result),
        };
        let end = MessageStop {
            kind: "message_stop",
        };
        vec![
            frame("content_block_stop", &stop),
            frame("message_delta", &delta),
            frame("message_stop", &end),
        ]
    }

    fn error(&mut self, error: &ApiError) -> Vec<Frame> {
        let body = super::error::body(Api::Anthropic, error);
        vec![(
            Some("error"),
            String::from_utf8(body).expect("JSON is UTF-8"),
        )]
    }
}
