//! The ctx.callAI request and its RFC 0248 §B retry policy.

use crate::error::CallError;
use crate::parse;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The most provider requests RFC 0248 §B lets one call ask for (`1..=16`).
pub const MAX_ATTEMPTS: u32 = 16;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The end user (or the pack speaking for them).
    User,
    /// The model.
    Assistant,
    /// A system instruction inside the conversation.
    System,
}

impl Role {
    /// `user`, `assistant` or `system`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::System => "system",
        }
    }
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The text.
    pub content: String,
}

impl Message {
    /// A message from `role`.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }
}

/// RFC 0248 §B: the caller's narrowing of the host's retries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryPolicy {
    /// `1..=16`: the most provider requests this call may make.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Default true; false keeps a truncation retry at the request's maxTokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grow_max_tokens: Option<bool>,
}

impl RetryPolicy {
    /// Host retries off: one request, no budget growth.
    pub const OFF: Self = Self {
        max_attempts: Some(1),
        grow_max_tokens: Some(false),
    };

    /// Refuses a `maxAttempts` outside `1..=16` (§B.5), naming the key.
    pub fn check(&self) -> Result<(), CallError> {
        match self.max_attempts {
            Some(n) if !(1..=MAX_ATTEMPTS).contains(&n) => Err(CallError::validation(
                "retry.maxAttempts",
                format!("must be an integer 1..{MAX_ATTEMPTS}, got {n}"),
            )),
            _ => Ok(()),
        }
    }
}

/// A ctx.callAI request (wire shape: camelCase JSON).
///
/// Serialising a request gives its canonical JSON: fields in a fixed order,
/// object keys sorted, absent fields left out. Two requests that differ only
/// in key order serialise the same.
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
    /// `0..=2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Output budget, `>= 1`.
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

/// Whether a host reads a request's `retry` (RFC 0248 §B): its
/// `callAccounting.retryPolicy` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryField {
    /// `retry` is read, and a malformed one refused (§B.5).
    Honoured,
    /// `retry` is ignored, even when malformed, as an older host ignores an
    /// unknown field.
    Ignored,
}

impl RetryField {
    /// The handling a host advertising `retryPolicy: flag` gives `retry`.
    pub fn advertised(flag: bool) -> Self {
        if flag { Self::Honoured } else { Self::Ignored }
    }
}

impl CallRequest {
    /// Parses and checks the wire JSON of a request; a refusal is a
    /// `validation_error` whose `details.field` names the key.
    ///
    /// `retry` says whether the host honours the `retry` field (its
    /// `callAccounting.retryPolicy` flag). Unknown top-level fields are ignored
    /// for the same reason. Whole numbers written as decimals (`3.0`, `3e0`)
    /// are integers, as they are to JSON Schema and JavaScript.
    ///
    /// What this checks is the shape; a host checks the `responseSchema`
    /// itself (it alone compiles schemas).
    pub fn from_json(text: &str, retry: RetryField) -> Result<Self, CallError> {
        Self::from_json_naming_unknown(text, retry).map(|(request, _)| request)
    }

    /// [`CallRequest::from_json`], with the top-level fields the spec does
    /// not define (which it ignores), each with the field it looks like.
    pub fn from_json_naming_unknown(
        text: &str,
        retry: RetryField,
    ) -> Result<(Self, Vec<crate::UnknownField>), CallError> {
        parse::request(text)?.check(retry)
    }

    /// As [`CallRequest::from_json`], from a parsed value.
    pub fn from_value(value: &Value, retry: RetryField) -> Result<Self, CallError> {
        let (request, _) = parse::request_value(value)?.check(retry)?;
        Ok(request)
    }

    /// The range checks of a request that is already typed (the host's
    /// typed entry): messages, temperature, maxTokens and, when honoured,
    /// `retry`. With [`RetryField::Ignored`] the policy is left unchecked.
    pub fn check(&self, retry: RetryField) -> Result<(), CallError> {
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
        if retry == RetryField::Honoured
            && let Some(policy) = &self.retry
        {
            policy.check()?;
        }
        Ok(())
    }

    /// Whether this is a structured call.
    pub fn is_structured(&self) -> bool {
        self.response_schema.is_some()
    }

    /// The canonical JSON value of the request (sorted keys).
    pub fn canonical(&self) -> Value {
        serde_json::to_value(self).expect("a CallRequest always serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_change_the_canonical_form() {
        let a = CallRequest::from_json(
            r#"{"messages": [{"role": "user", "content": "x"}],
                "responseSchema": {"type": "object", "required": ["a"]}}"#,
            RetryField::Honoured,
        )
        .unwrap();
        let b = CallRequest::from_json(
            r#"{"responseSchema": {"required": ["a"], "type": "object"},
                "messages": [{"content": "x", "role": "user"}]}"#,
            RetryField::Honoured,
        )
        .unwrap();
        assert_eq!(a, b);
        let text = serde_json::to_string(&a).unwrap();
        assert_eq!(text, serde_json::to_string(&b).unwrap());
        // Object keys come out sorted (serde_json without preserve_order).
        assert!(
            text.contains(r#"{"required":["a"],"type":"object"}"#),
            "{text}"
        );
        assert_eq!(
            a.canonical()["messages"][0],
            json!({"role": "user", "content": "x"})
        );
    }

    #[test]
    fn the_policy_off_is_one_request_without_growth() {
        assert_eq!(
            serde_json::to_value(RetryPolicy::OFF).unwrap(),
            json!({"maxAttempts": 1, "growMaxTokens": false})
        );
        assert!(RetryPolicy::OFF.check().is_ok());
        let over = RetryPolicy {
            max_attempts: Some(17),
            ..RetryPolicy::default()
        };
        assert_eq!(over.check().unwrap_err().field(), Some("retry.maxAttempts"));
    }
}
