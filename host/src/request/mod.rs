//! The ctx.callAI request: its wire JSON, and the checks that refuse a
//! malformed one with `validation_error` naming the field.

mod wire;

use crate::error::CallError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wire::{messages, opt_number, opt_schema, opt_string, opt_strings, opt_u32, retry};

/// The most provider requests RFC 0248 §B lets a caller ask for.
pub const MAX_ATTEMPTS_LIMIT: u32 = 16;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The end user (or the pack speaking for them).
    User,
    /// The model.
    Assistant,
    /// A system instruction inside the conversation.
    System,
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The text.
    pub content: String,
}

impl Message {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
        }
    }
}

/// RFC 0248 §B: the caller's narrowing of the host's retries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryPolicy {
    /// 1..16: the most provider requests this call may make.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Default true; false keeps a truncation retry at the request's maxTokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grow_max_tokens: Option<bool>,
}

/// A validated ctx.callAI request (wire shape: camelCase JSON).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallRequest {
    /// Provider id; the host default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Model id; the provider's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// System instruction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// The conversation, at least one message.
    pub messages: Vec<Message>,
    /// 0..2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Output budget, >= 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    /// A JSON Schema: the call becomes a structured call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<Value>,
    /// RFC 0248 §B.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryPolicy>,
}

impl CallRequest {
    /// Parses and validates the wire JSON of a request.
    ///
    /// `honour_retry` is the host's `callAccounting.retryPolicy` flag: when it
    /// is false the `retry` field is ignored, even when malformed, as an older
    /// host ignores an unknown field. Unknown top-level fields are ignored for
    /// the same reason.
    pub fn from_json(text: &str, honour_retry: bool) -> Result<Self, CallError> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| CallError::validation("request", format!("not valid JSON: {e}")))?;
        Self::from_value(&value, honour_retry)
    }

    /// As [`CallRequest::from_json`], from a parsed value.
    pub fn from_value(value: &Value, honour_retry: bool) -> Result<Self, CallError> {
        let obj = value
            .as_object()
            .ok_or_else(|| CallError::validation("request", "must be a JSON object"))?;
        let request = Self {
            provider: opt_string(obj, "provider")?,
            model: opt_string(obj, "model")?,
            system_prompt: opt_string(obj, "systemPrompt")?,
            messages: messages(obj)?,
            temperature: opt_number(obj, "temperature")?,
            max_tokens: opt_u32(obj, "maxTokens")?,
            stop_sequences: opt_strings(obj, "stopSequences")?,
            response_schema: opt_schema(obj)?,
            retry: if honour_retry { retry(obj)? } else { None },
        };
        request.validate(honour_retry)?;
        Ok(request)
    }

    /// Range checks shared by the JSON and the typed entry. With
    /// `honour_retry` false the `retry` field is dropped unchecked.
    pub fn validate(&self, honour_retry: bool) -> Result<(), CallError> {
        if self.messages.is_empty() {
            return Err(CallError::validation(
                "messages",
                "must hold at least one message",
            ));
        }
        if let Some(t) = self.temperature
            && !(t.is_finite() && (0.0..=2.0).contains(&t))
        {
            return Err(CallError::validation(
                "temperature",
                format!("must be a number 0..2, got {t}"),
            ));
        }
        if self.max_tokens == Some(0) {
            return Err(CallError::validation(
                "maxTokens",
                "must be an integer >= 1, got 0",
            ));
        }
        if let Some(schema) = &self.response_schema {
            crate::engine::schema::check_schema(schema)?;
        }
        if honour_retry
            && let Some(RetryPolicy {
                max_attempts: Some(n),
                ..
            }) = self.retry
            && !(1..=MAX_ATTEMPTS_LIMIT).contains(&n)
        {
            return Err(CallError::validation(
                "retry.maxAttempts",
                format!("must be an integer 1..{MAX_ATTEMPTS_LIMIT}, got {n}"),
            ));
        }
        Ok(())
    }

    /// Whether this is a structured call.
    pub fn is_structured(&self) -> bool {
        self.response_schema.is_some()
    }
}

#[cfg(test)]
mod tests;
