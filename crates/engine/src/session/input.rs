//! A call as it comes to the session: its entry (JSON text, a typed
//! request, or a request a server read in the same pass as its body), and
//! its size as the wire JSON would be, for `limits.maxRequestBytes`.

use crate::runlog::Entry;
use callai_wire::{CallRequest, ParsedRequest};
use std::io::Write;

/// A ctx.callAI call as a pack made it, before any check.
#[derive(Debug, Clone)]
pub enum CallInput {
    /// Through `call-ai-json`: the request's wire JSON text.
    Json(String),
    /// Through `call-ai`: the typed request (not yet checked).
    Typed(CallRequest),
    /// Read from a caller's JSON by its server in the same pass as the
    /// body around it (`POST /v1/call`), not yet checked.
    Parsed(ParsedRequest),
}

impl CallInput {
    pub(super) fn entry(&self) -> Entry {
        match self {
            Self::Json(_) | Self::Parsed(_) => Entry::Json,
            Self::Typed(_) => Entry::Typed,
        }
    }

    /// The bytes the request carries, counted on its wire JSON: every
    /// message costs its framing too, so a request of many empty messages
    /// is as large as what a provider would be sent.
    pub(super) fn size(&self) -> u64 {
        match self {
            Self::Json(text) => text.len() as u64,
            Self::Typed(request) => wire_size(request),
            Self::Parsed(parsed) => wire_size(parsed.request()),
        }
    }
}

/// The length of `request`'s wire JSON, counted without writing it: each
/// string's escaped length plus the framing around it.
fn wire_size(r: &CallRequest) -> u64 {
    fn text(s: &str) -> u64 {
        s.bytes()
            .map(|b| match b {
                b'"' | b'\\' => 2,
                0x08 | 0x09 | 0x0a | 0x0c | 0x0d => 2,
                0..0x20 => 6,
                _ => 1,
            })
            .sum::<u64>()
            + 2
    }
    let field = |name: &str, value: Option<u64>| value.map_or(0, |v| name.len() as u64 + 4 + v);
    let messages: u64 = r
        .messages
        .iter()
        // {"role":"user","content":...},
        .map(|m| {
            let calls = (!m.tool_calls.is_empty()).then(|| json(&m.tool_calls[..]));
            23 + m.role.as_str().len() as u64
                + text(&m.content)
                + field("toolCalls", calls)
                + field("toolCallId", m.tool_call_id.as_deref().map(text))
        })
        .sum();
    let stops = r
        .stop_sequences
        .as_ref()
        .map(|s| s.iter().map(|x| text(x) + 1).sum::<u64>() + 2);
    let schema = r.response_schema.as_ref().map(json);
    2 + field("messages", Some(messages + 2))
        + field("provider", r.provider.as_deref().map(text))
        + field("model", r.model.as_deref().map(text))
        + field("systemPrompt", r.system_prompt.as_deref().map(text))
        + field("temperature", r.temperature.map(|_| 24))
        + field("maxTokens", r.max_tokens.map(|_| 10))
        + field("stopSequences", stops)
        + field("responseSchema", schema)
        + field("retry", r.retry.map(|_| 48))
        + field("tools", r.tools.as_deref().map(json))
        + field("toolChoice", r.tool_choice.as_ref().map(json))
        + field("parallelToolCalls", r.parallel_tool_calls.map(|_| 5))
}

/// The length of `value`'s JSON, counted as it is written, not kept.
fn json<T: serde::Serialize + ?Sized>(value: &T) -> u64 {
    let mut counter = ByteCounter(0);
    serde_json::to_writer(&mut counter, value).expect("counting cannot fail");
    counter.0
}

struct ByteCounter(u64);

impl Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_counted_size_is_the_wire_json_or_a_little_more() {
        let many = json!({"messages": vec![json!({"role": "user", "content": ""}); 1000]});
        for request in [
            json!({"messages": [{"role": "user", "content": "hi"}]}),
            json!({"messages": [{"role": "assistant", "content": "quotes \" and \\ and \n and \u{1} é ✓"}],
                   "provider": "mock", "model": "m", "systemPrompt": "s\"", "temperature": 0.123456789,
                   "maxTokens": 4_000_000_000u32, "stopSequences": ["a", "\"b\""],
                   "responseSchema": {"type": "object", "properties": {"x": {"enum": ["\"", 1.5]}}},
                   "retry": {"maxAttempts": 16, "growMaxTokens": false}}),
            json!({"messages": [{"role": "assistant", "content": "",
                                 "toolCalls": [{"id": "c\"1", "name": "f", "arguments": "{\"a\": 1}"}]},
                                {"role": "tool", "toolCallId": "c\"1", "content": "r"}],
                   "tools": [{"name": "f", "description": "d", "parameters": {"type": "object"}, "strict": true}],
                   "toolChoice": "f", "parallelToolCalls": false}),
            many,
        ] {
            let r = CallRequest::from_value(&request, callai_wire::RetryField::Honoured).unwrap();
            let real = serde_json::to_string(&r).unwrap().len() as u64;
            let counted = wire_size(&r);
            assert!(counted >= real, "{counted} < {real}");
            assert!(counted <= real + 128, "{counted} vs {real}");
        }
    }
}
