//! What an OpenAI-compatible server answers, typed: a chat completion, or
//! the chunks of one streamed, folded as they come (each piece of text
//! appended once, so a long stream costs time linear in its length).

use crate::usage::{ErrorObject, Tokens, nullable};
use callai_engine::wire::ToolCall;
use callai_engine::{FailureKind, ProviderFailure, ProviderReply, StopReason};
use serde::Deserialize;

/// A chat completion.
#[derive(Debug, Deserialize)]
pub struct Completion {
    #[serde(default, deserialize_with = "nullable")]
    choices: Vec<Choice>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default, deserialize_with = "nullable")]
    message: Message,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Message {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    tool_calls: Vec<WireCall>,
}

/// A tool call as a completion carries it (in a stream, a piece of one:
/// its `index`, and the pieces of its arguments).
#[derive(Debug, Default, Deserialize)]
struct WireCall {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    function: WireFunction,
}

#[derive(Debug, Default, Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

impl WireCall {
    fn into_call(self) -> ToolCall {
        ToolCall {
            id: self.id.unwrap_or_default(),
            name: self.function.name.unwrap_or_default(),
            arguments: self.function.arguments.unwrap_or_default(),
        }
    }
}

/// Usage, in both a completion and a stream's last chunk.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Tokens,
    #[serde(default)]
    completion_tokens: Tokens,
    /// Of the prompt, what was read from OpenAI's prompt cache.
    #[serde(default, deserialize_with = "crate::usage::nullable")]
    prompt_tokens_details: PromptDetails,
    /// Of the completion, what a reasoning model spent reasoning.
    #[serde(default, deserialize_with = "crate::usage::nullable")]
    completion_tokens_details: CompletionDetails,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Tokens,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Tokens,
}

/// One `chat.completion.chunk` of a stream, or an error event.
#[derive(Debug, Deserialize)]
pub struct Chunk {
    #[serde(default, deserialize_with = "nullable")]
    choices: Vec<ChunkChoice>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<ErrorObject>,
}

#[derive(Debug, Deserialize)]
struct ChunkChoice {
    #[serde(default, deserialize_with = "nullable")]
    delta: Delta,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    tool_calls: Vec<WireCall>,
}

/// A streamed completion as far as its chunks went.
#[derive(Debug, Default)]
pub struct Folded {
    content: String,
    refusal: String,
    /// The tool calls, by their stream `index`, their arguments appended.
    calls: Vec<ToolCall>,
    finish_reason: Option<String>,
    model: Option<String>,
    usage: Option<Usage>,
    /// `[DONE]` came.
    done: bool,
}

/// The stop reason of a finish reason; a refusal wins.
fn stop(refused: bool, finish_reason: Option<&str>) -> StopReason {
    match (refused, finish_reason) {
        (true, _) => StopReason::Refusal,
        (false, Some("stop")) => StopReason::Stop,
        (false, Some("length")) => StopReason::Length,
        (false, Some("content_filter")) => StopReason::ContentFilter,
        (false, Some("tool_calls" | "function_call")) => StopReason::ToolCall,
        _ => StopReason::Other,
    }
}

fn reply(
    content: String,
    refusal: Option<String>,
    finish_reason: Option<&str>,
    model: Option<String>,
    usage: Option<Usage>,
    tool_calls: Vec<ToolCall>,
) -> ProviderReply {
    let usage = usage.unwrap_or_default();
    ProviderReply {
        stop: stop(refusal.is_some(), finish_reason),
        content: refusal.unwrap_or(content),
        tool_calls,
        input_tokens: usage.prompt_tokens.0,
        cached_input_tokens: usage.prompt_tokens_details.cached_tokens.0,
        // OpenAI caches by itself, at no price for writing.
        cache_write_input_tokens: None,
        reasoning_tokens: usage.completion_tokens_details.reasoning_tokens.0,
        output_tokens: usage.completion_tokens.0,
        model,
        status: None,
        thinking: Vec::new(),
    }
}

impl Completion {
    /// The reply of its first choice.
    pub fn into_reply(self) -> Result<ProviderReply, ProviderFailure> {
        let Some(choice) = self.choices.into_iter().next() else {
            return Err(ProviderFailure::new(
                FailureKind::Transient,
                Some(200),
                "the response has no choices",
            ));
        };
        let Message {
            content,
            refusal,
            tool_calls,
        } = choice.message;
        let refusal = refusal.filter(|r| !r.is_empty());
        Ok(reply(
            content.unwrap_or_default(),
            refusal,
            choice.finish_reason.as_deref(),
            self.model,
            self.usage,
            tool_calls.into_iter().map(WireCall::into_call).collect(),
        ))
    }
}

impl Folded {
    /// Folds in one chunk; the text it adds, if any.
    pub fn fold(&mut self, chunk: Chunk) -> Result<Option<String>, ProviderFailure> {
        if let Some(error) = chunk.error {
            let message = error.message.as_deref().unwrap_or("an error in the stream");
            return Err(ProviderFailure::new(
                FailureKind::Transient,
                None,
                format!("the provider's stream failed: {message}"),
            ));
        }
        if chunk.model.is_some() {
            self.model = chunk.model;
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        let Some(choice) = chunk.choices.into_iter().next() else {
            return Ok(None);
        };
        if choice.finish_reason.is_some() {
            self.finish_reason = choice.finish_reason;
        }
        if let Some(refusal) = &choice.delta.refusal {
            self.refusal.push_str(refusal);
        }
        for piece in choice.delta.tool_calls {
            self.fold_call(piece);
        }
        let text = choice.delta.content.filter(|t| !t.is_empty());
        if let Some(text) = &text {
            self.content.push_str(text);
        }
        Ok(text)
    }

    /// A piece of a streamed tool call: its id and name come first, its
    /// arguments in pieces, each appended once.
    fn fold_call(&mut self, piece: WireCall) {
        let index = piece.index.unwrap_or(self.calls.len().saturating_sub(1));
        // Indexes come in order from 0; one far past the calls so far is
        // not trusted to size anything.
        if index > self.calls.len() {
            return;
        }
        if index == self.calls.len() {
            self.calls.push(ToolCall {
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
            });
        }
        let call = &mut self.calls[index];
        if let Some(id) = piece.id {
            call.id = id;
        }
        if let Some(name) = piece.function.name {
            call.name.push_str(&name);
        }
        if let Some(arguments) = piece.function.arguments {
            call.arguments.push_str(&arguments);
        }
    }

    /// `[DONE]` came: the stream ended as it should.
    pub fn done(&mut self) {
        self.done = true;
    }

    /// The reply the stream made; a stream that ended with neither a
    /// finish reason nor `[DONE]` was cut, and is a failure.
    pub fn into_reply(self) -> Result<ProviderReply, ProviderFailure> {
        if !self.done && self.finish_reason.is_none() {
            return Err(ProviderFailure::new(
                FailureKind::Transient,
                None,
                "the provider's stream ended before its end (no finish reason, no [DONE]): the reply was cut",
            ));
        }
        let refusal = (!self.refusal.is_empty()).then_some(self.refusal);
        Ok(reply(
            self.content,
            refusal,
            self.finish_reason.as_deref(),
            self.model,
            self.usage,
            self.calls,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(json: &str) -> Chunk {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_completion_reads_its_text_stop_and_usage() {
        let c: Completion = serde_json::from_str(
            r#"{"model": "m", "choices": [{"message": {"content": "hi"}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": -2}, "extra": [1]}"#,
        )
        .unwrap();
        let r = c.into_reply().unwrap();
        assert_eq!((r.content.as_str(), r.stop), ("hi", StopReason::Length));
        assert_eq!((r.input_tokens, r.output_tokens), (Some(3), None));
        let none: Completion = serde_json::from_str(r#"{"choices": []}"#).unwrap();
        assert!(none.into_reply().is_err());
    }

    #[test]
    fn cached_prompt_tokens_are_read_as_part_of_the_input() {
        let c: Completion = serde_json::from_str(
            r#"{"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 2006, "completion_tokens": 300,
                          "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0}}}"#,
        )
        .unwrap();
        let r = c.into_reply().unwrap();
        assert_eq!(
            (r.input_tokens, r.cached_input_tokens),
            (Some(2006), Some(1920))
        );
        let null: Completion = serde_json::from_str(
            r#"{"choices": [{"message": {"content": "hi"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "prompt_tokens_details": null}}"#,
        )
        .unwrap();
        assert_eq!(null.into_reply().unwrap().cached_input_tokens, None);
    }

    #[test]
    fn tool_calls_are_read_whole_and_streamed() {
        let c: Completion = serde_json::from_str(
            r#"{"choices": [{"message": {"content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
                "finish_reason": "tool_calls"}]}"#,
        )
        .unwrap();
        let r = c.into_reply().unwrap();
        assert_eq!(r.stop, StopReason::ToolCall);
        assert_eq!(r.tool_calls[0].arguments, r#"{"a":1}"#);
        let mut f = Folded::default();
        for piece in [
            r#"{"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f", "arguments": ""}}]}}]}"#,
            r#"{"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"a\":"}}]}}]}"#,
            r#"{"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}}]}"#,
            r#"{"choices": [{"delta": {"tool_calls": [{"index": 1, "id": "c2", "function": {"name": "g", "arguments": "{}"}}]}}]}"#,
            r#"{"choices": [{"delta": {"tool_calls": [{"index": 9, "function": {"arguments": "x"}}]}, "finish_reason": "tool_calls"}]}"#,
        ] {
            f.fold(chunk(piece)).unwrap();
        }
        f.done();
        let r = f.into_reply().unwrap();
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(
            (
                r.tool_calls[0].id.as_str(),
                r.tool_calls[0].arguments.as_str()
            ),
            ("c1", r#"{"a":1}"#)
        );
        assert_eq!(r.tool_calls[1].name, "g");
    }

    #[test]
    fn a_stream_folds_its_pieces_and_needs_its_end() {
        let mut f = Folded::default();
        assert_eq!(
            f.fold(chunk(
                r#"{"model": "m", "choices": [{"delta": {"content": "a"}}]}"#
            ))
            .unwrap()
            .as_deref(),
            Some("a")
        );
        f.fold(chunk(
            r#"{"choices": [{"delta": {"content": "b"}, "finish_reason": "stop"}]}"#,
        ))
        .unwrap();
        f.fold(chunk(
            r#"{"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}"#,
        ))
        .unwrap();
        f.done();
        let r = f.into_reply().unwrap();
        assert_eq!((r.content.as_str(), r.output_tokens), ("ab", Some(2)));
        // Issue 31 #14: no finish reason and no [DONE] is a cut.
        let mut cut = Folded::default();
        cut.fold(chunk(r#"{"choices": [{"delta": {"content": "a"}}]}"#))
            .unwrap();
        assert!(cut.into_reply().unwrap_err().message.contains("cut"));
        let e = Folded::default()
            .fold(chunk(r#"{"error": {"message": "boom"}}"#))
            .unwrap_err();
        assert!(e.message.contains("boom"));
    }
}
