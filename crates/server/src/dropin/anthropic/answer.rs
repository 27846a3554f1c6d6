//! The Messages API's answers: a `message` (thinking blocks, text, then
//! `tool_use` blocks), and the events of a streamed one (text as it comes,
//! tool calls once judged, each in a block of its own; a call that thinks
//! is judged whole, its thinking blocks first).

use crate::dropin::api::{AnswerExtension, Api, Framer, answer_text};
use crate::dropin::sse::Frame;
use crate::error::ApiError;
use callai_engine::wire::{CallResult, FinishReason, ThinkingBlock, ToolCall};
use serde::Serialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// A stop reason in the Messages API's words.
pub(super) fn stop_reason(reason: Option<FinishReason>) -> &'static str {
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
pub(super) struct Usage {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u32>,
}

pub(super) fn usage(result: &CallResult) -> Usage {
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
pub(super) struct MessageAnswer<'a> {
    pub callai: AnswerExtension,
    pub content: Vec<OutBlock<'a>>,
    pub id: String,
    pub model: &'a str,
    pub role: &'static str,
    pub stop_reason: &'static str,
    pub stop_sequence: Option<()>,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub usage: Usage,
}

/// A block of an answer: text, a tool call, or thinking (with its own
/// `type`, as the provider gave it).
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum OutBlock<'a> {
    Text(TextBlock<'a>),
    ToolUse(ToolUseBlock<'a>),
    Thinking(&'a ThinkingBlock),
}

#[derive(Serialize)]
pub(super) struct TextBlock<'a> {
    pub text: Cow<'a, str>,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

#[derive(Serialize)]
pub(super) struct ToolUseBlock<'a> {
    id: &'a str,
    input: Cow<'a, RawValue>,
    name: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
}

/// A tool call's arguments (a JSON object the engine validated) as a
/// block's `input`.
fn input(arguments: &str) -> Cow<'_, RawValue> {
    match serde_json::from_str::<&RawValue>(arguments) {
        Ok(raw) => Cow::Borrowed(raw),
        Err(_) => Cow::Owned(RawValue::from_string("{}".to_owned()).expect("{} is JSON")),
    }
}

fn tool_use(call: &ToolCall) -> ToolUseBlock<'_> {
    ToolUseBlock {
        id: &call.id,
        input: input(&call.arguments),
        name: &call.name,
        kind: "tool_use",
    }
}

/// The content of `result`'s answer: its thinking blocks, its text (when
/// it has some, or calls no tool), then its tool calls.
pub(super) fn content(result: &CallResult) -> Vec<OutBlock<'_>> {
    let text = answer_text(result);
    let calls = result.tool_calls.as_deref().unwrap_or_default();
    let text = (!text.is_empty() || calls.is_empty())
        .then_some(OutBlock::Text(TextBlock { text, kind: "text" }));
    let thinking = result.thinking.iter().map(OutBlock::Thinking);
    thinking
        .chain(text)
        .chain(calls.iter().map(|c| OutBlock::ToolUse(tool_use(c))))
        .collect()
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
    content_block: OutBlock<'a>,
    index: u32,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct BlockDelta<'a> {
    delta: PieceDelta<'a>,
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

/// A piece of a block: text, or a tool call's input as JSON text.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[allow(clippy::enum_variant_names)] // Each is the Messages API's own `type`.
enum PieceDelta<'a> {
    TextDelta { text: &'a str },
    InputJsonDelta { partial_json: &'a str },
    ThinkingDelta { thinking: &'a str },
    SignatureDelta { signature: &'a str },
}

#[derive(Serialize)]
struct StopDelta {
    stop_reason: &'static str,
    stop_sequence: Option<()>,
}

/// The events of a streamed call.
pub struct MessageFramer {
    pub(super) id: String,
    pub(super) model: String,
    /// `usage` in `message_start`.
    pub(super) start_usage: Usage,
    /// Whether the text block was closed (tool calls came).
    pub(super) text_closed: bool,
    /// The thinking blocks of a settled call, which lead its answer: the
    /// text block's index is their count.
    pub(super) thinking: Vec<ThinkingBlock>,
}

impl MessageFramer {
    /// The text block's index: after the thinking blocks.
    fn text_index(&self) -> u32 {
        u32::try_from(self.thinking.len()).unwrap_or(u32::MAX)
    }

    /// The frames of the thinking blocks, as the Messages API streams them:
    /// a thinking block starts empty, its text and signature follow in
    /// deltas; a redacted one comes whole.
    fn thinking_frames(&self) -> Vec<Frame> {
        let mut frames = Vec::new();
        let empty = ThinkingBlock::Thinking {
            thinking: String::new(),
            signature: String::new(),
        };
        for (i, block) in self.thinking.iter().enumerate() {
            let index = u32::try_from(i).unwrap_or(u32::MAX);
            let (start, deltas) = match block {
                ThinkingBlock::Thinking {
                    thinking,
                    signature,
                } => (
                    &empty,
                    vec![
                        PieceDelta::ThinkingDelta { thinking },
                        PieceDelta::SignatureDelta { signature },
                    ],
                ),
                redacted @ ThinkingBlock::RedactedThinking { .. } => (redacted, Vec::new()),
            };
            let start = BlockStart {
                content_block: OutBlock::Thinking(start),
                index,
                kind: "content_block_start",
            };
            frames.push(frame("content_block_start", &start));
            for delta in deltas {
                let delta = BlockDelta {
                    delta,
                    index,
                    kind: "content_block_delta",
                };
                frames.push(frame("content_block_delta", &delta));
            }
            let stop = BlockStop {
                index,
                kind: "content_block_stop",
            };
            frames.push(frame("content_block_stop", &stop));
        }
        frames
    }
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
        let block = OutBlock::Text(TextBlock {
            text: Cow::Borrowed(""),
            kind: "text",
        });
        let start = MessageStart {
            message,
            kind: "message_start",
        };
        let block = BlockStart {
            content_block: block,
            index: self.text_index(),
            kind: "content_block_start",
        };
        let mut frames = vec![frame("message_start", &start)];
        frames.extend(self.thinking_frames());
        frames.push(frame("content_block_start", &block));
        frames
    }

    fn text(&mut self, text: &str) -> Vec<Frame> {
        let delta = BlockDelta {
            delta: PieceDelta::TextDelta { text },
            index: self.text_index(),
            kind: "content_block_delta",
        };
        vec![frame("content_block_delta", &delta)]
    }

    fn tool_calls(&mut self, calls: &[ToolCall]) -> Vec<Frame> {
        let stop = |index| BlockStop {
            index,
            kind: "content_block_stop",
        };
        let first = self.text_index();
        let mut frames = vec![frame("content_block_stop", &stop(first))];
        self.text_closed = true;
        for (i, call) in calls.iter().enumerate() {
            let index = u32::try_from(i + 1)
                .unwrap_or(u32::MAX)
                .saturating_add(first);
            // The block starts with an empty input; the input follows whole.
            let empty = ToolUseBlock {
                input: Cow::Owned(RawValue::from_string("{}".to_owned()).expect("{} is JSON")),
                ..tool_use(call)
            };
            let start = BlockStart {
                content_block: OutBlock::ToolUse(empty),
                index,
                kind: "content_block_start",
            };
            let delta = BlockDelta {
                delta: PieceDelta::InputJsonDelta {
                    partial_json: &call.arguments,
                },
                index,
                kind: "content_block_delta",
            };
            frames.push(frame("content_block_start", &start));
            frames.push(frame("content_block_delta", &delta));
            frames.push(frame("content_block_stop", &stop(index)));
        }
        frames
    }

    fn end(&mut self, result: &CallResult) -> Vec<Frame> {
        let stop = BlockStop {
            index: self.text_index(),
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
        let mut frames = Vec::with_capacity(3);
        if !self.text_closed {
            frames.push(frame("content_block_stop", &stop));
        }
        frames.push(frame("message_delta", &delta));
        frames.push(frame("message_stop", &end));
        frames
    }

    fn error(&mut self, error: &ApiError) -> Vec<Frame> {
        let body = crate::dropin::error::body(Api::Anthropic, error);
        vec![(
            Some("error"),
            String::from_utf8(body).expect("JSON is UTF-8"),
        )]
    }
}
