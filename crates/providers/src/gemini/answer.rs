//! What the Gemini API answers, typed: a `GenerateContentResponse`, whole
//! or as the chunks of a stream (each a response of its own, whose parts
//! add to the reply's and whose last carries the finish reason and the
//! usage). Thought parts are the model's reasoning, never its answer; a
//! function call's `args` are kept as the JSON text they came as.

use crate::usage::{ErrorObject, Tokens, nullable};
use callai_engine::wire::ToolCall;
use callai_engine::{FailureKind, ProviderFailure, ProviderReply, StopReason};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::sync::atomic::{AtomicU64, Ordering};

/// A response, or one chunk of a streamed one.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    #[serde(default, deserialize_with = "nullable")]
    candidates: Vec<Candidate>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    model_version: Option<String>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
    /// An error a stream ends with.
    #[serde(default)]
    error: Option<ErrorObject>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Content {
    #[serde(default, deserialize_with = "nullable")]
    parts: Vec<Part>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    #[serde(default)]
    text: Option<String>,
    /// A part of the model's reasoning, not of its answer.
    #[serde(default)]
    thought: bool,
    #[serde(default)]
    function_call: Option<FunctionCall>,
}

#[derive(Debug, Deserialize)]
struct FunctionCall {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    args: Option<Box<RawValue>>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    /// Every input token, those read from the cache included.
    #[serde(default)]
    prompt_token_count: Tokens,
    #[serde(default)]
    cached_content_token_count: Tokens,
    #[serde(default)]
    candidates_token_count: Tokens,
    /// Thinking, billed as output.
    #[serde(default)]
    thoughts_token_count: Tokens,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
}

/// A response as far as its chunks went.
#[derive(Debug, Default)]
pub struct Folded {
    text: String,
    tool_calls: Vec<ToolCall>,
    finish: Option<String>,
    blocked: Option<String>,
    usage: Option<UsageMetadata>,
    model: Option<String>,
}

/// An id for a function call the model gave none (older models): unique
/// in this process, so that its result names it alone.
fn call_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("call_gemini_{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Why generation stopped, by Gemini's word: a block of any kind is the
/// provider's refusal (never retried).
fn stop(reason: &str) -> StopReason {
    match reason {
        "STOP" => StopReason::Stop,
        "MAX_TOKENS" => StopReason::Length,
        "SAFETY" | "RECITATION" | "PROHIBITED_CONTENT" | "BLOCKLIST" | "SPII" | "IMAGE_SAFETY"
        | "LANGUAGE" => StopReason::ContentFilter,
        _ => StopReason::Other,
    }
}

impl Folded {
    /// Folds `chunk` in; the answer text it adds, if any.
    pub fn fold(&mut self, chunk: Response) -> Result<Option<String>, ProviderFailure> {
        if let Some(e) = chunk.error {
            let message = e.message.unwrap_or_else(|| "the stream failed".into());
            return Err(ProviderFailure::new(FailureKind::Transient, None, message));
        }
        if let Some(reason) = chunk.prompt_feedback.and_then(|f| f.block_reason) {
            self.blocked = Some(reason);
        }
        if chunk.usage_metadata.is_some() {
            self.usage = chunk.usage_metadata;
        }
        if chunk.model_version.is_some() {
            self.model = chunk.model_version;
        }
        let mut added = String::new();
        // One candidate is asked for; others, if any, are not the answer.
        if let Some(candidate) = chunk.candidates.into_iter().next() {
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                if let Some(call) = part.function_call {
                    self.tool_calls.push(ToolCall {
                        id: call.id.filter(|id| !id.is_empty()).unwrap_or_else(call_id),
                        name: call.name,
                        arguments: call
                            .args
                            .map_or_else(|| "{}".to_owned(), |a| a.get().to_owned()),
                    });
                } else if let Some(text) = part.text.filter(|_| !part.thought) {
                    added.push_str(&text);
                }
            }
            if candidate.finish_reason.is_some() {
                self.finish = candidate.finish_reason;
            }
        }
        self.text.push_str(&added);
        Ok((!added.is_empty()).then_some(added))
    }

    /// The reply; a failure when it has neither a finish reason nor a
    /// block (a stream cut off, with `streamed`, or an empty answer).
    pub fn into_reply(self, streamed: bool) -> Result<ProviderReply, ProviderFailure> {
        let stop = match (&self.finish, &self.blocked) {
            (_, Some(_)) => StopReason::ContentFilter,
            (Some(reason), None) => stop(reason),
            (None, None) => {
                let why = if streamed {
                    "the stream ended before its finishReason"
                } else {
                    "the response has no candidate"
                };
                return Err(ProviderFailure::new(FailureKind::Transient, Some(200), why));
            }
        };
        let usage = self.usage.unwrap_or_default();
        let thoughts = usage.thoughts_token_count.0;
        let output = match (usage.candidates_token_count.0, thoughts) {
            (Some(c), t) => Some(c.saturating_add(t.unwrap_or(0))),
            // A reply of no text (a block) reports no candidates' count.
            (None, Some(t)) => Some(t),
            (None, None) if self.usage.is_some() && self.text.is_empty() => Some(0),
            (None, None) => None,
        };
        Ok(ProviderReply {
            content: self.text,
            tool_calls: self.tool_calls,
            stop,
            input_tokens: usage.prompt_token_count.0,
            cached_input_tokens: usage.cached_content_token_count.0,
            cache_write_input_tokens: None,
            output_tokens: output,
            reasoning_tokens: thoughts,
            model: self.model,
            status: None,
            thinking: Vec::new(),
        })
    }
}
