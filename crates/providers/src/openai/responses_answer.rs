//! A Responses API answer read as a provider's reply: its `message` items'
//! `output_text` (a `refusal` part is a refusal), its `function_call` items,
//! its `status` (`incomplete` for `max_output_tokens` is a truncation, for
//! `content_filter` a filter), its usage (cached input and reasoning tokens
//! where it said); streamed, its typed events folded into the same reply,
//! the text passed on as each `response.output_text.delta` comes.

use crate::usage::{ErrorObject, Tokens, nullable};
use callai_engine::{FailureKind, ProviderFailure, ProviderReply, StopReason};
use callai_wire::ToolCall;
use serde::Deserialize;

/// A `response`, as far as this host reads it.
#[derive(Debug, Default, Deserialize)]
pub struct ResponseAnswer {
    #[serde(default)]
    status: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    output: Vec<OutputItem>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    incomplete_details: Option<Incomplete>,
    #[serde(default)]
    error: Option<ErrorObject>,
}

#[derive(Debug, Deserialize)]
struct OutputItem {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default, deserialize_with = "nullable")]
    content: Vec<OutputPart>,
    #[serde(default)]
    call_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Deserialize)]
struct OutputPart {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Incomplete {
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Tokens,
    #[serde(default)]
    output_tokens: Tokens,
    #[serde(default, deserialize_with = "nullable")]
    input_tokens_details: InputDetails,
    #[serde(default, deserialize_with = "nullable")]
    output_tokens_details: OutputDetails,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
struct InputDetails {
    #[serde(default)]
    cached_tokens: Tokens,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
struct OutputDetails {
    #[serde(default)]
    reasoning_tokens: Tokens,
}

impl ResponseAnswer {
    /// The reply it makes; a `failed` response is a failure worth another
    /// request, as a 5xx is.
    pub fn into_reply(self) -> Result<ProviderReply, ProviderFailure> {
        if self.status.as_deref() == Some("failed") {
            let said = self.error.and_then(|e| e.message);
            let message = said.unwrap_or_else(|| "no reason given".to_owned());
            return Err(ProviderFailure::new(
                FailureKind::Transient,
                None,
                format!("the provider's response failed: {message}"),
            ));
        }
        let (mut content, mut refusal, mut calls) = (String::new(), String::new(), Vec::new());
        for item in self.output {
            match item.kind.as_str() {
                "message" => {
                    for part in item.content {
                        match part.kind.as_str() {
                            "output_text" => content.push_str(&part.text.unwrap_or_default()),
                            "refusal" => refusal.push_str(&part.refusal.unwrap_or_default()),
                            _ => {}
                        }
                    }
                }
                "function_call" => calls.push(ToolCall {
                    id: item.call_id.unwrap_or_default(),
                    name: item.name.unwrap_or_default(),
                    arguments: item.arguments.unwrap_or_default(),
                }),
                // Reasoning items and the like carry nothing a reply holds.
                _ => {}
            }
        }
        let reason = self.incomplete_details.and_then(|i| i.reason);
        let stop = match (self.status.as_deref(), reason.as_deref()) {
            (_, _) if !refusal.is_empty() => StopReason::Refusal,
            (Some("incomplete"), Some("max_output_tokens")) => StopReason::Length,
            (Some("incomplete"), Some("content_filter")) => StopReason::ContentFilter,
            (Some("incomplete"), _) => StopReason::Other,
            _ if !calls.is_empty() => StopReason::ToolCall,
            _ => StopReason::Stop,
        };
        if content.is_empty() && !refusal.is_empty() {
            content = refusal;
        }
        let usage = self.usage.unwrap_or_default();
        Ok(ProviderReply {
            content,
            tool_calls: calls,
            stop,
            input_tokens: usage.input_tokens.0,
            cached_input_tokens: usage.input_tokens_details.cached_tokens.0,
            cache_write_input_tokens: None,
            reasoning_tokens: usage.output_tokens_details.reasoning_tokens.0,
            output_tokens: usage.output_tokens.0,
            model: self.model,
            status: None,
            thinking: Vec::new(),
        })
    }
}

/// One event of a streamed response, as far as this host reads it.
#[derive(Debug, Deserialize)]
pub struct ResponseEvent {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    delta: Option<String>,
    #[serde(default)]
    response: Option<ResponseAnswer>,
    #[serde(default)]
    message: Option<String>,
}

/// A streamed response as far as its events went: its text so far, and the
/// whole response once an event carried its end.
#[derive(Debug, Default)]
pub struct Folded {
    text: String,
    end: Option<ResponseAnswer>,
}

impl Folded {
    /// Folds in one event; the text it adds, if any.
    pub fn fold(&mut self, event: ResponseEvent) -> Result<Option<String>, ProviderFailure> {
        match event.kind.as_str() {
            "response.output_text.delta" => {
                let text = event.delta.filter(|t| !t.is_empty());
                if let Some(text) = &text {
                    self.text.push_str(text);
                }
                Ok(text)
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                self.end = event.response;
                Ok(None)
            }
            "error" => {
                let message = event
                    .message
                    .unwrap_or_else(|| "an error in the stream".into());
                Err(ProviderFailure::new(
                    FailureKind::Transient,
                    None,
                    format!("the provider's stream failed: {message}"),
                ))
            }
            _ => Ok(None),
        }
    }

    /// The reply the stream made: the response its last event carried (its
    /// text the deltas', when it repeated none); a stream that ended without
    /// one was cut, and is a failure.
    pub fn into_reply(self) -> Result<ProviderReply, ProviderFailure> {
        let Some(end) = self.end else {
            return Err(ProviderFailure::new(
                FailureKind::Transient,
                None,
                "the provider's stream ended before response.completed: the reply was cut",
            ));
        };
        let mut reply = end.into_reply()?;
        if reply.content.is_empty() {
            reply.content = self.text;
        }
        Ok(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> ProviderReply {
        serde_json::from_str::<ResponseAnswer>(json)
            .unwrap()
            .into_reply()
            .unwrap()
    }

    #[test]
    fn a_response_reads_its_text_calls_status_and_usage() {
        let reply = read(
            r#"{"status": "completed", "model": "gpt-x", "output": [
                 {"type": "reasoning", "summary": []},
                 {"type": "message", "content": [{"type": "output_text", "text": "Hi", "annotations": []}]},
                 {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}"}],
               "usage": {"input_tokens": 10, "output_tokens": 7, "total_tokens": 17,
                         "input_tokens_details": {"cached_tokens": 4},
                         "output_tokens_details": {"reasoning_tokens": 5}}}"#,
        );
        assert_eq!(reply.content, "Hi");
        assert_eq!(reply.tool_calls[0].id, "c1");
        assert_eq!(reply.stop, StopReason::ToolCall);
        assert_eq!(
            (reply.input_tokens, reply.output_tokens),
            (Some(10), Some(7))
        );
        assert_eq!(
            (reply.cached_input_tokens, reply.reasoning_tokens),
            (Some(4), Some(5))
        );
        let cut = read(
            r#"{"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
               "output": [{"type": "message", "content": [{"type": "output_text", "text": "{\"a\": "}]}]}"#,
        );
        assert_eq!(cut.stop, StopReason::Length);
        assert_eq!(cut.input_tokens, None, "no usage: unknown");
        let refused = read(
            r#"{"status": "completed", "output": [{"type": "message",
                 "content": [{"type": "refusal", "refusal": "No."}]}]}"#,
        );
        assert_eq!(
            (refused.stop, refused.content.as_str()),
            (StopReason::Refusal, "No.")
        );
    }

    #[test]
    fn a_stream_folds_its_deltas_and_a_cut_one_fails() {
        let event = |json: &str| serde_json::from_str::<ResponseEvent>(json).unwrap();
        let mut acc = Folded::default();
        let said = acc.fold(event(
            r#"{"type": "response.output_text.delta", "delta": "Hel"}"#,
        ));
        assert_eq!(said.unwrap().as_deref(), Some("Hel"));
        acc.fold(event(
            r#"{"type": "response.output_text.delta", "delta": "lo"}"#,
        ))
        .unwrap();
        let mut cut = Folded::default();
        cut.fold(event(
            r#"{"type": "response.output_text.delta", "delta": "x"}"#,
        ))
        .unwrap();
        assert!(cut.into_reply().is_err(), "no response.completed: cut");
        acc.fold(event(
            r#"{"type": "response.completed", "response": {"status": "completed", "output": [],
                "usage": {"input_tokens": 3, "output_tokens": 2}}}"#,
        ))
        .unwrap();
        let reply = acc.into_reply().unwrap();
        assert_eq!(reply.content, "Hello");
        assert_eq!(reply.output_tokens, Some(2));
        let failed = event(r#"{"type": "error", "message": "overloaded"}"#);
        assert!(Folded::default().fold(failed).is_err());
    }
}
