//! The ctx.callAI result and its RFC 0248 §A `attempts` record.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why the model stopped, as the result reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FinishReason {
    /// A natural stop.
    Stop,
    /// The output budget ran out.
    Length,
    /// A safety filter stopped the output.
    ContentFilter,
    /// The model called a tool.
    ToolCall,
    /// Anything else.
    Other,
}

impl FinishReason {
    /// The wire spelling, e.g. `content-filter`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ContentFilter => "content-filter",
            Self::ToolCall => "tool-call",
            Self::Other => "other",
        }
    }
}

/// How a structured call's attempt asked for JSON (RFC 0248 §A.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StructuredOutput {
    /// The provider's own mechanism: a JSON-schema response format, a forced tool call.
    Native,
    /// The schema written into the instructions.
    Prompt,
}

impl StructuredOutput {
    /// The mode of a provider that has (`true`) or lacks native structured
    /// output, as a config's `native` key says.
    pub fn native_if(native: bool) -> Self {
        if native { Self::Native } else { Self::Prompt }
    }

    /// `native` or `prompt`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Prompt => "prompt",
        }
    }
}

/// Token usage of one attempt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Prompt tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u32>,
    /// Completion tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u32>,
    /// Their sum, when both are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u32>,
}

impl Usage {
    /// Usage from the two counts a provider reports; the total is derived.
    pub fn new(input_tokens: Option<u32>, output_tokens: Option<u32>) -> Self {
        let total_tokens = match (input_tokens, output_tokens) {
            (Some(i), Some(o)) => i.checked_add(o),
            _ => None,
        };
        Self {
            input_tokens,
            output_tokens,
            total_tokens,
        }
    }
}

/// RFC 0248 §A: every provider request one call made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempts {
    /// Provider requests this call made, retries and fallback included (≥ 1).
    pub count: u32,
    /// Output tokens summed over every attempt that reported usage; absent
    /// when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// False when any attempt reported no usage: `output_tokens` is a floor.
    pub usage_complete: bool,
    /// Only for structured calls: the final attempt's mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_output: Option<StructuredOutput>,
}

/// A successful call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallResult {
    /// The text, for text calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The parsed, schema-valid JSON, for structured calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// The tool calls of the answer, each with arguments valid against its
    /// tool's `parameters` (finish reason `tool-call`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<crate::tools::ToolCall>>,
    /// The final attempt's usage (§A.4); absent when it reported none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The final attempt's finish reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// The model that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Present when the host advertises `callAccounting.attempts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<Attempts>,
    /// The final attempt's thinking blocks, for a drop-in's answer to pass
    /// on (the Messages API's `thinking` and `redacted_thinking`). Not part
    /// of the result's JSON: a pack is given the answer, not the thinking.
    #[serde(skip)]
    pub thinking: Vec<crate::thinking::ThinkingBlock>,
    /// Of the final attempt's input tokens, those its provider said it read
    /// from its prompt cache, for a drop-in's `usage` to say (the Responses
    /// API's `input_tokens_details.cached_tokens`); `None` when it said
    /// nothing of a cache. Not part of the result's JSON (§A.4 fixes it).
    #[serde(skip)]
    pub cached_input_tokens: Option<u32>,
    /// Of the final attempt's output tokens, those its model spent
    /// reasoning, where its provider said (the Responses API's
    /// `output_tokens_details.reasoning_tokens`). Not part of the result's
    /// JSON.
    #[serde(skip)]
    pub reasoning_tokens: Option<u32>,
}

impl CallResult {
    /// The wire JSON of the result.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a CallResult always serialises")
    }
}

/// RFC 0248 §C: what a host advertises under `aiProviders.callAccounting`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct CallAccounting {
    /// §A: results carry `attempts`.
    pub attempts: bool,
    /// §B: the per-call `retry` is honoured.
    pub retry_policy: bool,
}

impl CallAccounting {
    /// How a host advertising these flags treats a request's `retry`.
    pub fn retry_field(&self) -> crate::request::RetryField {
        crate::request::RetryField::advertised(self.retry_policy)
    }
}

impl Default for CallAccounting {
    /// Both flags on, as this project's host advertises them by default.
    fn default() -> Self {
        Self {
            attempts: true,
            retry_policy: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_rfc_example_serialises_to_its_wire_shape() {
        let result = CallResult {
            data: Some(json!({"scene": "…"})),
            usage: Some(Usage::new(None, Some(1800))),
            attempts: Some(Attempts {
                count: 2,
                output_tokens: Some(3800),
                usage_complete: true,
                structured_output: Some(StructuredOutput::Native),
            }),
            ..CallResult::default()
        };
        assert_eq!(
            result.to_json(),
            json!({ "data": { "scene": "…" }, "usage": { "outputTokens": 1800 },
              "attempts": { "count": 2, "outputTokens": 3800, "usageComplete": true, "structuredOutput": "native" } })
        );
        let back: CallResult = serde_json::from_value(result.to_json()).unwrap();
        assert_eq!(back, result);
    }

    #[test]
    fn total_tokens_only_when_both_counts_are_known() {
        assert_eq!(Usage::new(Some(10), Some(5)).total_tokens, Some(15));
        assert_eq!(Usage::new(None, Some(5)).total_tokens, None);
        assert_eq!(Usage::new(Some(u32::MAX), Some(5)).total_tokens, None);
    }

    #[test]
    fn enums_use_their_wire_spellings() {
        for f in [
            FinishReason::Stop,
            FinishReason::Length,
            FinishReason::ContentFilter,
            FinishReason::ToolCall,
            FinishReason::Other,
        ] {
            assert_eq!(serde_json::to_value(f).unwrap(), f.as_str());
        }
        for s in [StructuredOutput::Native, StructuredOutput::Prompt] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }
}
