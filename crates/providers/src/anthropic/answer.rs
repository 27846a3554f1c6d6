//! What the Messages API answers, typed: a message, or the events of one
//! streamed, folded as they come (each piece appended once, so a long
//! stream costs time linear in its length). A tool call's input is kept
//! as the JSON text it came as, never parsed here.

use crate::usage::{ErrorObject, Tokens, all_input, nullable};
use callai_engine::wire::{ThinkingBlock, ToolCall};
use callai_engine::{FailureKind, ProviderFailure, ProviderReply, StopReason};
use serde::Deserialize;
use serde_json::value::RawValue;

/// A message.
#[derive(Debug, Deserialize)]
pub struct Message {
    #[serde(default)]
    content: Option<Vec<Block>>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    usage: Usage,
}

/// A content block: text, a tool call with its input, or thinking.
#[derive(Debug, Default, Deserialize)]
struct Block {
    /// A `thinking` block's text.
    #[serde(default)]
    thinking: Option<String>,
    /// A `thinking` block's signature.
    #[serde(default)]
    signature: Option<String>,
    /// A `redacted_thinking` block's encrypted thinking.
    #[serde(default)]
    data: Option<String>,
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    input: Option<Box<RawValue>>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Tokens,
    #[serde(default)]
    output_tokens: Tokens,
    /// Read from the prompt cache: beside `input_tokens`, not in it.
    #[serde(default)]
    cache_read_input_tokens: Tokens,
    /// Written to the prompt cache: beside `input_tokens` too.
    #[serde(default)]
    cache_creation_input_tokens: Tokens,
}

impl Usage {
    /// Every input token, cached or not (the Messages API counts the
    /// cache's apart from `input_tokens`; the host counts them in, as
    /// OpenAI does), and of them those read from the cache.
    fn input(&self) -> (Option<u32>, Option<u32>) {
        let cached = self.cache_read_input_tokens.0;
        let written = self.cache_creation_input_tokens.0;
        (all_input(self.input_tokens.0, cached, written), cached)
    }
}

/// One event of a stream.
#[derive(Debug, Deserialize)]
pub struct Event {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: Option<StartMessage>,
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    content_block: Option<Block>,
    #[serde(default, deserialize_with = "nullable")]
    delta: Delta,
    #[serde(default)]
    usage: Option<PartialUsage>,
    #[serde(default)]
    error: Option<ErrorObject>,
}

/// `message_start`'s message: the model and the input usage.
#[derive(Debug, Deserialize)]
struct StartMessage {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<PartialUsage>,
}

/// Usage as events carry it: each count when it is there.
#[derive(Debug, Default, Deserialize)]
struct PartialUsage {
    #[serde(default)]
    input_tokens: Option<Tokens>,
    #[serde(default)]
    output_tokens: Option<Tokens>,
    #[serde(default)]
    cache_read_input_tokens: Option<Tokens>,
    #[serde(default)]
    cache_creation_input_tokens: Option<Tokens>,
}

#[derive(Debug, Default, Deserialize)]
struct Delta {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    partial_json: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    stop_reason: Option<String>,
}

/// A streamed block as far as its deltas went.
#[derive(Debug, Default)]
struct FoldedBlock {
    kind: String,
    id: Option<String>,
    name: Option<String>,
    /// Its text; a `thinking` block's thinking.
    text: String,
    input: String,
    /// A `thinking` block's signature; a `redacted_thinking` block's data.
    signature: String,
}

impl Block {
    /// The thinking block it is, if it is one.
    fn thinking(self) -> Option<ThinkingBlock> {
        match self.kind.as_str() {
            "thinking" => Some(ThinkingBlock::Thinking {
                thinking: self.thinking.unwrap_or_default(),
                signature: self.signature.unwrap_or_default(),
            }),
            "redacted_thinking" => Some(ThinkingBlock::RedactedThinking {
                data: self.data.unwrap_or_default(),
            }),
            _ => None,
        }
    }
}

impl FoldedBlock {
    /// The thinking block it is, if it is one.
    fn thinking(&mut self) -> Option<ThinkingBlock> {
        match self.kind.as_str() {
            "thinking" => Some(ThinkingBlock::Thinking {
                thinking: std::mem::take(&mut self.text),
                signature: std::mem::take(&mut self.signature),
            }),
            "redacted_thinking" => Some(ThinkingBlock::RedactedThinking {
                data: std::mem::take(&mut self.signature),
            }),
            _ => None,
        }
    }
}

/// A streamed message as far as its events went.
#[derive(Debug, Default)]
pub struct Folded {
    blocks: Vec<FoldedBlock>,
    stop_reason: Option<String>,
    model: Option<String>,
    usage: Usage,
    /// `message_stop` came.
    stopped: bool,
}

fn stop(reason: Option<&str>) -> StopReason {
    match reason {
        Some("end_turn" | "stop_sequence" | "tool_use") => StopReason::Stop,
        Some("max_tokens") => StopReason::Length,
        Some("refusal") => StopReason::Refusal,
        _ => StopReason::Other,
    }
}

fn reply(
    content: String,
    tool_calls: Vec<ToolCall>,
    thinking: Vec<ThinkingBlock>,
    reason: Option<&str>,
    model: Option<String>,
    usage: Usage,
) -> ProviderReply {
    ProviderReply {
        content,
        tool_calls,
        stop: stop(reason),
        input_tokens: usage.input().0,
        cached_input_tokens: usage.input().1,
        cache_write_input_tokens: usage.cache_creation_input_tokens.0,
        reasoning_tokens: None,
        output_tokens: usage.output_tokens.0,
        model,
        status: None,
        thinking,
    }
}

impl Message {
    /// Its reply: its text blocks, and its tool calls (each input as the
    /// JSON text it came as).
    pub fn into_reply(self) -> Result<ProviderReply, ProviderFailure> {
        let blocks = self.content.ok_or_else(|| {
            ProviderFailure::new(
                FailureKind::Transient,
                Some(200),
                "the response has no content",
            )
        })?;
        let content = blocks
            .iter()
            .filter(|b| b.kind == "text")
            .filter_map(|b| b.text.as_deref())
            .collect();
        let (mut calls, mut thinking) = (Vec::new(), Vec::new());
        for b in blocks {
            if b.kind == "tool_use" {
                calls.push(ToolCall {
                    id: b.id.unwrap_or_default(),
                    name: b.name.unwrap_or_default(),
                    arguments: b
                        .input
                        .map_or_else(|| "null".to_owned(), |i| i.get().to_owned()),
                });
            } else if let Some(block) = b.thinking() {
                thinking.push(block);
            }
        }
        Ok(reply(
            content,
            calls,
            thinking,
            self.stop_reason.as_deref(),
            self.model,
            self.usage,
        ))
    }
}

impl Folded {
    fn merge(&mut self, usage: Option<PartialUsage>) {
        let Some(usage) = usage else {
            return;
        };
        if let Some(n) = usage.input_tokens {
            self.usage.input_tokens = n;
        }
        if let Some(n) = usage.output_tokens {
            self.usage.output_tokens = n;
        }
        if let Some(n) = usage.cache_read_input_tokens {
            self.usage.cache_read_input_tokens = n;
        }
        if let Some(n) = usage.cache_creation_input_tokens {
            self.usage.cache_creation_input_tokens = n;
        }
    }

    /// Folds in one event; the text it adds, if any.
    pub fn fold(&mut self, event: Event) -> Result<Option<String>, ProviderFailure> {
        match event.kind.as_str() {
            "message_start" => {
                if let Some(message) = event.message {
                    self.model = message.model;
                    self.merge(message.usage);
                }
            }
            "content_block_start" => {
                let block = event.content_block.unwrap_or_default();
                // A redacted block comes whole; a thinking block's text and
                // signature follow in deltas (or come here, if whole).
                let signature = block.signature.or(block.data).unwrap_or_default();
                self.blocks.push(FoldedBlock {
                    kind: block.kind,
                    id: block.id,
                    name: block.name,
                    text: block.text.or(block.thinking).unwrap_or_default(),
                    input: String::new(),
                    signature,
                });
            }
            "content_block_delta" => {
                let index = event.index.unwrap_or(0);
                let Some(block) = self.blocks.get_mut(index) else {
                    return Ok(None);
                };
                match event.delta.kind.as_deref() {
                    Some("text_delta") => {
                        let text = event.delta.text.filter(|t| !t.is_empty());
                        if let Some(text) = &text {
                            block.text.push_str(text);
                        }
                        return Ok(text);
                    }
                    Some("input_json_delta") => {
                        if let Some(json) = &event.delta.partial_json {
                            block.input.push_str(json);
                        }
                    }
                    Some("thinking_delta") => {
                        if let Some(thinking) = &event.delta.thinking {
                            block.text.push_str(thinking);
                        }
                    }
                    Some("signature_delta") => {
                        if let Some(signature) = &event.delta.signature {
                            block.signature.push_str(signature);
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if event.delta.stop_reason.is_some() {
                    self.stop_reason = event.delta.stop_reason;
                }
                self.merge(event.usage);
            }
            "message_stop" => self.stopped = true,
            "error" => {
                let message = event
                    .error
                    .and_then(|e| e.message)
                    .unwrap_or_else(|| "an error in the stream".into());
                return Err(ProviderFailure::new(
                    FailureKind::Transient,
                    None,
                    format!("the provider's stream failed: {message}"),
                ));
            }
            _ => {}
        }
        Ok(None)
    }

    /// The reply the stream made; a stream that ended with neither a stop
    /// reason nor `message_stop` was cut, and is a failure.
    pub fn into_reply(self) -> Result<ProviderReply, ProviderFailure> {
        if !self.stopped && self.stop_reason.is_none() {
            return Err(ProviderFailure::new(
                FailureKind::Transient,
                None,
                "the provider's stream ended before its end (no stop reason, no message_stop): the reply was cut",
            ));
        }
        let content = self
            .blocks
            .iter()
            .filter(|b| b.kind == "text")
            .map(|b| b.text.as_str())
            .collect();
        let (mut calls, mut thinking) = (Vec::new(), Vec::new());
        for mut b in self.blocks {
            if b.kind == "tool_use" {
                calls.push(ToolCall {
                    id: b.id.unwrap_or_default(),
                    name: b.name.unwrap_or_default(),
                    // A call with no input deltas took no arguments.
                    arguments: match b.input.is_empty() {
                        true => "{}".to_owned(),
                        false => b.input,
                    },
                });
            } else if let Some(block) = b.thinking() {
                thinking.push(block);
            }
        }
        Ok(reply(
            content,
            calls,
            thinking,
            self.stop_reason.as_deref(),
            self.model,
            self.usage,
        ))
    }
}

#[cfg(test)]
#[path = "answer_tests.rs"]
mod tests;
