//! The result of a successful call, with its RFC 0248 `attempts`.

use crate::bindings::openwop::callai::types as wit;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// A natural stop.
    Stop,
    /// The output budget ran out.
    Length,
    /// A safety filter stopped it.
    ContentFilter,
    /// A tool call.
    ToolCall,
    /// Anything else.
    Other,
}

/// How the final attempt of a structured call asked for JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StructuredOutput {
    /// The provider's own mechanism.
    Native,
    /// The schema written into the prompt.
    Prompt,
}

/// Token usage of the attempt whose output the result carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: Option<u32>,
    /// Completion tokens.
    pub output_tokens: Option<u32>,
    /// Their sum.
    pub total_tokens: Option<u32>,
}

/// What one call cost, over every provider request it made (RFC 0248 §A).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempts {
    /// Provider requests, retries and fallback included (≥ 1).
    pub count: u32,
    /// Output tokens summed over every attempt that reported usage.
    pub output_tokens: Option<u64>,
    /// False when an attempt reported no usage: `output_tokens` is a floor.
    pub usage_complete: bool,
    /// The final attempt's mode, for structured calls.
    pub structured_output: Option<StructuredOutput>,
}

/// A successful call.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    content: Option<String>,
    data: Option<Value>,
    usage: Option<Usage>,
    finish_reason: Option<FinishReason>,
    model: Option<String>,
    attempts: Option<Attempts>,
}

impl Response {
    /// The text of a text call.
    pub fn content(&self) -> Option<&str> {
        self.content.as_deref()
    }

    /// The schema-valid JSON of a structured call.
    pub fn data(&self) -> Option<&Value> {
        self.data.as_ref()
    }

    /// The data of a structured call, deserialised.
    pub fn data_as<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_value(self.data.clone().unwrap_or(Value::Null))
    }

    /// The final attempt's usage (RFC 0248 §A.4).
    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// The final attempt's finish reason.
    pub fn finish_reason(&self) -> Option<FinishReason> {
        self.finish_reason
    }

    /// The model that answered.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// Every provider request this call made. `None` when the host does not
    /// advertise `callAccounting.attempts`.
    pub fn attempts(&self) -> Option<Attempts> {
        self.attempts
    }

    /// The result's wire JSON (camelCase), fields absent when the host left them out.
    pub fn to_json(&self) -> Value {
        let mut o = serde_json::Map::new();
        if let Some(c) = &self.content {
            o.insert("content".into(), c.clone().into());
        }
        if let Some(d) = &self.data {
            o.insert("data".into(), d.clone());
        }
        if let Some(u) = self.usage {
            let mut m = serde_json::Map::new();
            for (k, v) in [
                ("inputTokens", u.input_tokens),
                ("outputTokens", u.output_tokens),
                ("totalTokens", u.total_tokens),
            ] {
                if let Some(v) = v {
                    m.insert(k.into(), v.into());
                }
            }
            o.insert("usage".into(), Value::Object(m));
        }
        if let Some(f) = self.finish_reason {
            let s = match f {
                FinishReason::Stop => "stop",
                FinishReason::Length => "length",
                FinishReason::ContentFilter => "content-filter",
                FinishReason::ToolCall => "tool-call",
                FinishReason::Other => "other",
            };
            o.insert("finishReason".into(), s.into());
        }
        if let Some(m) = &self.model {
            o.insert("model".into(), m.clone().into());
        }
        if let Some(a) = self.attempts {
            let mut m = serde_json::Map::new();
            m.insert("count".into(), a.count.into());
            if let Some(t) = a.output_tokens {
                m.insert("outputTokens".into(), t.into());
            }
            m.insert("usageComplete".into(), a.usage_complete.into());
            if let Some(s) = a.structured_output {
                let s = match s {
                    StructuredOutput::Native => "native",
                    StructuredOutput::Prompt => "prompt",
                };
                m.insert("structuredOutput".into(), json!(s));
            }
            o.insert("attempts".into(), Value::Object(m));
        }
        Value::Object(o)
    }

    pub(crate) fn from_wit(r: wit::CallResult) -> Self {
        Self {
            content: r.content,
            // The host sends data it has parsed and validated itself.
            data: r
                .data
                .map(|d| serde_json::from_str(&d).unwrap_or(Value::String(d))),
            usage: r.usage.map(|u| Usage {
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
                total_tokens: u.total_tokens,
            }),
            finish_reason: r.finish_reason.map(|f| match f {
                wit::FinishReason::Stop => FinishReason::Stop,
                wit::FinishReason::Length => FinishReason::Length,
                wit::FinishReason::ContentFilter => FinishReason::ContentFilter,
                wit::FinishReason::ToolCall => FinishReason::ToolCall,
                wit::FinishReason::Other => FinishReason::Other,
            }),
            model: r.model,
            attempts: r.attempts.map(|a| Attempts {
                count: a.count,
                output_tokens: a.output_tokens,
                usage_complete: a.usage_complete,
                structured_output: a.structured_output.map(|s| match s {
                    wit::StructuredOutput::Native => StructuredOutput::Native,
                    wit::StructuredOutput::Prompt => StructuredOutput::Prompt,
                }),
            }),
        }
    }
}
