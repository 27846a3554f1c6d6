//! Classifying one provider reply, in the order of RFC 0032: refusal, then
//! truncation, then parse / schema violation.

use super::recovery::{RecoveryPath, recover};
use super::schema::CompiledSchema;
use super::tools::CompiledTools;
use crate::provider::{ProviderReply, StopReason};
use serde_json::Value;

/// What one reply means for the call.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Usable: the text of a text call, or schema-valid data.
    Accept {
        /// The parsed data, for a structured call.
        data: Option<Value>,
        /// How the data was recovered, when not directly.
        recovery: Option<RecoveryPath>,
    },
    /// The provider refused (explicitly or by a content filter).
    Refusal,
    /// The output budget cut the reply off.
    Truncated,
    /// No JSON at all could be recovered: the model answered in prose.
    ParseError(String),
    /// JSON, but not valid for the schema; the masked complaint.
    SchemaViolation(String),
    /// A tool call that is not usable (not JSON, against its tool's
    /// schema, a tool not offered, text where a call was required): a
    /// schema violation whose corrective text names the tool.
    ToolViolation(String),
    /// The reply is larger than `limits.maxResponseBytes`.
    TooLarge {
        /// The limit it passed.
        limit: u64,
        /// Its size: its text and its tool calls.
        bytes: u64,
    },
}

impl Verdict {
    /// The `reason` spelling of RFC 0032 events.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Accept { .. } => "none",
            Self::Refusal => "refusal",
            Self::Truncated => "truncation",
            Self::ParseError(_) => "parse-error",
            Self::SchemaViolation(_) | Self::ToolViolation(_) => "schema-violation",
            Self::TooLarge { .. } => "x-host-callai-limit",
        }
    }
}

/// The bytes of a reply: its text and its tool calls' arguments.
pub(crate) fn reply_bytes(reply: &ProviderReply) -> u64 {
    reply.content.len() as u64
        + reply
            .tool_calls
            .iter()
            .map(|c| (c.arguments.len() + c.name.len() + c.id.len()) as u64)
            .sum::<u64>()
}

/// Classifies `reply`. `schema` is present for structured calls; a text
/// call's reply is accepted unless refused (its truncation is reported to
/// the caller as `finishReason: length`, not retried). A reply that calls
/// a tool, or any reply when `tools` force a call, is judged as a tool
/// answer (a cut one is a truncation, retried). A reply over `max_bytes`
/// is not looked at.
pub fn classify(
    reply: &ProviderReply,
    schema: Option<&CompiledSchema>,
    tools: Option<&CompiledTools>,
    max_bytes: u64,
) -> Verdict {
    let bytes = reply_bytes(reply);
    if bytes > max_bytes {
        return Verdict::TooLarge {
            limit: max_bytes,
            bytes,
        };
    }
    if matches!(reply.stop, StopReason::Refusal | StopReason::ContentFilter) {
        return Verdict::Refusal;
    }
    if let Some(tools) = tools.filter(|t| t.applies_to(reply)) {
        if reply.stop == StopReason::Length {
            return Verdict::Truncated;
        }
        return match tools.check(reply) {
            Ok(()) => Verdict::Accept {
                data: None,
                recovery: None,
            },
            Err(complaint) => Verdict::ToolViolation(complaint),
        };
    }
    let Some(schema) = schema else {
        return Verdict::Accept {
            data: None,
            recovery: None,
        };
    };
    // Truncation wins over an unparseable reply.
    if reply.stop == StopReason::Length {
        return Verdict::Truncated;
    }
    match recover(&reply.content) {
        Err(parse_error) => Verdict::ParseError(parse_error),
        Ok((value, path)) => match schema.check(&value) {
            Ok(()) => Verdict::Accept {
                data: Some(value),
                recovery: (path != RecoveryPath::Direct).then_some(path),
            },
            Err(complaint) => Verdict::SchemaViolation(complaint),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reply(content: &str, stop: StopReason) -> ProviderReply {
        ProviderReply {
            content: content.into(),
            tool_calls: Vec::new(),
            stop,
            input_tokens: None,
            cached_input_tokens: None,
            cache_write_input_tokens: None,
            reasoning_tokens: None,
            output_tokens: None,
            model: None,
            status: None,
            thinking: Vec::new(),
        }
    }

    fn classify_(reply: &ProviderReply, schema: Option<&CompiledSchema>) -> Verdict {
        classify(reply, schema, None, 1 << 20)
    }

    #[test]
    fn an_oversized_reply_is_not_looked_at() {
        let big = reply(&"x".repeat(2000), StopReason::Stop);
        assert_eq!(
            classify(&big, None, None, 1000),
            Verdict::TooLarge {
                limit: 1000,
                bytes: 2000
            }
        );
        assert!(matches!(
            classify(&big, None, None, 2000),
            Verdict::Accept { .. }
        ));
    }

    fn schema() -> CompiledSchema {
        CompiledSchema::compile(&json!({"type": "object", "required": ["scene"]}), 1_000_000)
            .unwrap()
    }

    #[test]
    fn refusal_comes_first() {
        let s = schema();
        for stop in [StopReason::Refusal, StopReason::ContentFilter] {
            assert_eq!(
                classify_(&reply("{\"scene\":1}", stop), Some(&s)),
                Verdict::Refusal
            );
            assert_eq!(classify_(&reply("text", stop), None), Verdict::Refusal);
        }
    }

    #[test]
    fn truncation_wins_over_unparseable() {
        let s = schema();
        assert_eq!(
            classify_(&reply("{\"scene\": \"cu", StopReason::Length), Some(&s)),
            Verdict::Truncated
        );
    }

    #[test]
    fn text_calls_accept_truncated_text() {
        assert!(matches!(
            classify_(&reply("cut", StopReason::Length), None),
            Verdict::Accept { data: None, .. }
        ));
    }

    #[test]
    fn parse_and_schema_failures_are_told_apart() {
        let s = schema();
        assert!(matches!(
            classify_(&reply("prose only", StopReason::Stop), Some(&s)),
            Verdict::ParseError(_)
        ));
        assert!(matches!(
            classify_(&reply("{\"other\": 1}", StopReason::Stop), Some(&s)),
            Verdict::SchemaViolation(_)
        ));
    }

    #[test]
    fn recovered_replies_say_how() {
        let s = schema();
        assert_eq!(
            classify_(
                &reply("```json\n{\"scene\": \"x\"}\n```", StopReason::Stop),
                Some(&s)
            ),
            Verdict::Accept {
                data: Some(json!({"scene": "x"})),
                recovery: Some(RecoveryPath::MarkdownFence)
            }
        );
        assert_eq!(
            classify_(&reply("{\"scene\": \"x\"}", StopReason::Stop), Some(&s)),
            Verdict::Accept {
                data: Some(json!({"scene": "x"})),
                recovery: None
            }
        );
    }
}
