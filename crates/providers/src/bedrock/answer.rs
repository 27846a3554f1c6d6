//! What the Converse API answers, typed: a `ConverseResponse` whole, or
//! ConverseStream's events (each named by its frame's `:event-type`
//! header, since the payload does not say what it is). A tool call's
//! `input` is kept as the JSON text it came as; reasoning blocks are the
//! reply's thinking, kept with their signatures to be passed back.

use crate::usage::{Tokens, all_input};
use callai_engine::wire::{ThinkingBlock, ToolCall};
use callai_engine::{FailureKind, ProviderFailure, ProviderReply, StopReason};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::BTreeMap;

/// A whole Converse answer.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Converse {
    #[serde(default)]
    output: Option<Output>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Default, Deserialize)]
struct Output {
    #[serde(default)]
    message: Option<OutMessage>,
}

#[derive(Debug, Default, Deserialize)]
struct OutMessage {
    #[serde(default)]
    content: Vec<OutBlock>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OutBlock {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_use: Option<ToolUse>,
    #[serde(default)]
    reasoning_content: Option<ReasoningOut>,
}

/// A `reasoningContent` block: the reasoning and its signature, or the
/// provider's encrypted content.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReasoningOut {
    #[serde(default)]
    reasoning_text: Option<ReasoningText>,
    #[serde(default)]
    redacted_content: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct ReasoningText {
    #[serde(default)]
    text: String,
    #[serde(default)]
    signature: String,
}

impl ReasoningOut {
    /// Adds a streamed piece.
    fn add(&mut self, piece: ReasoningPiece) {
        if let Some(data) = piece.redacted_content {
            self.redacted_content = Some(data);
            return;
        }
        let text = self.reasoning_text.get_or_insert_with(Default::default);
        if let Some(t) = piece.text {
            text.text.push_str(&t);
        }
        if let Some(s) = piece.signature {
            text.signature.push_str(&s);
        }
    }

    /// The thinking block it is, if it holds any.
    fn into_block(self) -> Option<ThinkingBlock> {
        if let Some(data) = self.redacted_content {
            return Some(ThinkingBlock::RedactedThinking { data });
        }
        self.reasoning_text.map(|r| ThinkingBlock::Thinking {
            thinking: r.text,
            signature: r.signature,
        })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolUse {
    #[serde(default)]
    tool_use_id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    input: Option<Box<RawValue>>,
}

/// Token usage: `inputTokens` counts neither the tokens read from the
/// prompt cache nor those written to it.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Usage {
    #[serde(default)]
    input_tokens: Tokens,
    #[serde(default)]
    output_tokens: Tokens,
    #[serde(default)]
    cache_read_input_tokens: Tokens,
    #[serde(default)]
    cache_write_input_tokens: Tokens,
}

/// Why generation stopped, by Bedrock's word: a guardrail or a content
/// filter is the provider's refusal (never retried).
fn stop(reason: &str) -> StopReason {
    match reason {
        "end_turn" | "stop_sequence" => StopReason::Stop,
        "tool_use" => StopReason::ToolCall,
        "max_tokens" | "model_context_window_exceeded" => StopReason::Length,
        "guardrail_intervened" | "content_filtered" => StopReason::ContentFilter,
        _ => StopReason::Other,
    }
}

/// The answer's parts, as read from a whole answer or a stream.
struct Parts {
    text: String,
    tool_calls: Vec<ToolCall>,
    thinking: Vec<ThinkingBlock>,
}

/// The reply of an answer's parts, a stop reason and usage.
fn reply(
    parts: Parts,
    reason: Option<&str>,
    usage: Option<Usage>,
    missing: &str,
) -> Result<ProviderReply, ProviderFailure> {
    let Some(reason) = reason else {
        return Err(ProviderFailure::new(
            FailureKind::Transient,
            Some(200),
            missing,
        ));
    };
    let u = usage.unwrap_or_default();
    let (cached, written) = (u.cache_read_input_tokens.0, u.cache_write_input_tokens.0);
    let input = all_input(u.input_tokens.0, cached, written);
    Ok(ProviderReply {
        content: parts.text,
        tool_calls: parts.tool_calls,
        stop: stop(reason),
        input_tokens: input,
        cached_input_tokens: cached,
        cache_write_input_tokens: written,
        output_tokens: u.output_tokens.0,
        reasoning_tokens: None,
        model: None,
        status: None,
        thinking: parts.thinking,
    })
}

impl Converse {
    /// The reply: its text blocks joined, its `toolUse` blocks as calls,
    /// its `reasoningContent` as thinking.
    pub fn into_reply(self) -> Result<ProviderReply, ProviderFailure> {
        let blocks = self
            .output
            .and_then(|o| o.message)
            .map(|m| m.content)
            .unwrap_or_default();
        let (mut text, mut calls, mut thinking) = (String::new(), Vec::new(), Vec::new());
        for block in blocks {
            if let Some(block) = block.reasoning_content.and_then(ReasoningOut::into_block) {
                thinking.push(block);
                continue;
            }
            if let Some(call) = block.tool_use {
                calls.push(ToolCall {
                    id: call.tool_use_id,
                    name: call.name,
                    arguments: call
                        .input
                        .map_or_else(|| "{}".to_owned(), |i| i.get().to_owned()),
                });
            } else if let Some(t) = block.text {
                text.push_str(&t);
            }
        }
        let missing = "the response has no stopReason";
        let parts = Parts {
            text,
            tool_calls: calls,
            thinking,
        };
        reply(parts, self.stop_reason.as_deref(), self.usage, missing)
    }
}

/// One ConverseStream event.
#[derive(Debug)]
pub enum Event {
    /// `contentBlockStart`: a tool call's id and name.
    Start(BlockStart),
    /// `contentBlockDelta`: text, or a piece of a tool call's input.
    Delta(BlockDelta),
    /// `messageStop`: the stop reason.
    Stop(MessageStop),
    /// `metadata`: the usage.
    Metadata(Metadata),
    /// `messageStart`, `contentBlockStop`, or one this host does not read.
    Other,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockStart {
    #[serde(default)]
    content_block_index: usize,
    #[serde(default)]
    start: Option<StartOf>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StartOf {
    #[serde(default)]
    tool_use: Option<ToolUse>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDelta {
    #[serde(default)]
    content_block_index: usize,
    #[serde(default)]
    delta: Option<DeltaOf>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeltaOf {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_use: Option<InputPiece>,
    #[serde(default)]
    reasoning_content: Option<ReasoningPiece>,
}

/// A piece of a reasoning block: text, its signature, or (whole) its
/// encrypted content.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReasoningPiece {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    redacted_content: Option<String>,
}

#[derive(Debug, Deserialize)]
struct InputPiece {
    #[serde(default)]
    input: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageStop {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Metadata {
    #[serde(default)]
    usage: Option<Usage>,
}

impl Event {
    /// The event a frame of type `kind` carries as `data`.
    pub fn read(kind: &str, data: &str) -> serde_json::Result<Self> {
        Ok(match kind {
            "contentBlockStart" => Self::Start(serde_json::from_str(data)?),
            "contentBlockDelta" => Self::Delta(serde_json::from_str(data)?),
            "messageStop" => Self::Stop(serde_json::from_str(data)?),
            "metadata" => Self::Metadata(serde_json::from_str(data)?),
            _ => Self::Other,
        })
    }
}

/// A stream as far as its events went.
#[derive(Debug, Default)]
pub struct Folded {
    text: String,
    /// Tool calls by block index: id, name, input so far.
    calls: BTreeMap<usize, ToolCall>,
    /// Reasoning blocks by block index, so far.
    reasoning: BTreeMap<usize, ReasoningOut>,
    stop_reason: Option<String>,
    usage: Option<Usage>,
}

impl Folded {
    /// Folds `event` in; the answer text it adds, if any.
    pub fn fold(&mut self, event: Event) -> Result<Option<String>, ProviderFailure> {
        match event {
            Event::Start(start) => {
                if let Some(call) = start.start.and_then(|s| s.tool_use) {
                    let entry = ToolCall {
                        id: call.tool_use_id,
                        name: call.name,
                        arguments: String::new(),
                    };
                    self.calls.insert(start.content_block_index, entry);
                }
            }
            Event::Delta(d) => {
                let Some(delta) = d.delta else {
                    return Ok(None);
                };
                if let Some(piece) = delta.tool_use {
                    if let Some(call) = self.calls.get_mut(&d.content_block_index) {
                        call.arguments.push_str(&piece.input);
                    }
                } else if let Some(piece) = delta.reasoning_content {
                    let block = self.reasoning.entry(d.content_block_index).or_default();
                    block.add(piece);
                } else if let Some(text) = delta.text.filter(|t| !t.is_empty()) {
                    self.text.push_str(&text);
                    return Ok(Some(text));
                }
            }
            Event::Stop(stop) => self.stop_reason = stop.stop_reason,
            Event::Metadata(m) => self.usage = m.usage.or(self.usage),
            Event::Other => {}
        }
        Ok(None)
    }

    /// The reply; a failure when the stream ended before `messageStop`.
    pub fn into_reply(self) -> Result<ProviderReply, ProviderFailure> {
        let calls = self
            .calls
            .into_values()
            .map(|mut c| {
                // A call with no input pieces took no arguments.
                if c.arguments.trim().is_empty() {
                    c.arguments = "{}".into();
                }
                c
            })
            .collect();
        let missing = "the stream ended before its messageStop";
        let parts = Parts {
            text: self.text,
            tool_calls: calls,
            thinking: self
                .reasoning
                .into_values()
                .filter_map(ReasoningOut::into_block)
                .collect(),
        };
        reply(parts, self.stop_reason.as_deref(), self.usage, missing)
    }
}
