//! The error a failed ctx.callAI throws: `{code, message, details?}`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// The error codes of the spec, plus the host's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The request is malformed; `details.field` names the offending key.
    ValidationError,
    /// The host refused before any request reached a provider.
    PolicyDenied,
    /// Parse or schema violations exhausted the retries.
    EnvelopeInvalid,
    /// Truncation exhausted the retries.
    EnvelopeTruncationUnrecoverable,
    /// The provider refused; never retried.
    EnvelopeRefusal,
    /// Transport or server failure after the host gave up.
    ProviderUnavailable,
    /// The provider rejected the request (a 4xx other than 408 and 429).
    ProviderRejected,
    /// A limit of the host was reached.
    LimitExceeded,
}

impl ErrorCode {
    /// Every code, in the WIT's order.
    pub const ALL: [Self; 8] = [
        Self::ValidationError,
        Self::PolicyDenied,
        Self::EnvelopeInvalid,
        Self::EnvelopeTruncationUnrecoverable,
        Self::EnvelopeRefusal,
        Self::ProviderUnavailable,
        Self::ProviderRejected,
        Self::LimitExceeded,
    ];

    /// The wire spelling, e.g. `validation_error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ValidationError => "validation_error",
            Self::PolicyDenied => "policy_denied",
            Self::EnvelopeInvalid => "envelope_invalid",
            Self::EnvelopeTruncationUnrecoverable => "envelope_truncation_unrecoverable",
            Self::EnvelopeRefusal => "envelope_refusal",
            Self::ProviderUnavailable => "provider_unavailable",
            Self::ProviderRejected => "provider_rejected",
            Self::LimitExceeded => "limit_exceeded",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed call, as the pack sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallError {
    /// What kind of failure.
    pub code: ErrorCode,
    /// A sentence for a person.
    pub message: String,
    /// Machine-readable details, e.g. `{"field": "retry.maxAttempts"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Map<String, Value>>,
}

impl CallError {
    /// An error with no details.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: None,
        }
    }

    /// A `validation_error` naming the offending field, in `details.field`
    /// and at the start of the message.
    pub fn validation(field: impl Into<String>, message: impl Into<String>) -> Self {
        let field = field.into();
        let message = format!("{field}: {}", message.into());
        Self::new(ErrorCode::ValidationError, message).with_detail("field", field)
    }

    /// Adds one key to `details`.
    pub fn with_detail(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.details
            .get_or_insert_with(Map::new)
            .insert(key.to_owned(), value.into());
        self
    }

    /// `details.field` of a validation error.
    pub fn field(&self) -> Option<&str> {
        self.details.as_ref()?.get("field")?.as_str()
    }

    /// Provider requests the host made before giving up
    /// (`details.totalAttempts`), when it made any.
    pub fn total_attempts(&self) -> Option<u32> {
        let n = self.details.as_ref()?.get("totalAttempts")?.as_u64()?;
        u32::try_from(n).ok()
    }

    /// Output tokens the host reported over the failed call's requests
    /// (`details.outputTokens`, 0 when absent), and whether that sum is
    /// complete (`details.usageComplete`); `None` when the host gave neither.
    pub fn output_tokens(&self) -> Option<(u64, bool)> {
        let d = self.details.as_ref()?;
        let complete = d.get("usageComplete")?.as_bool()?;
        let tokens = d.get("outputTokens").and_then(Value::as_u64).unwrap_or(0);
        Some((tokens, complete))
    }

    /// The wire JSON `{code, message, details?}`.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a CallError always serialises")
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for CallError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_error_names_the_field_in_details_and_message() {
        let e = CallError::validation("retry.maxAttempts", "must be an integer 1..16, got 0");
        assert_eq!(e.code, ErrorCode::ValidationError);
        assert_eq!(e.field(), Some("retry.maxAttempts"));
        assert!(e.message.starts_with("retry.maxAttempts: "));
        let json = e.to_json();
        assert_eq!(json["code"], "validation_error");
        assert_eq!(json["details"]["field"], "retry.maxAttempts");
        assert_eq!(e.to_string(), format!("validation_error: {}", e.message));
    }

    #[test]
    fn codes_round_trip_through_their_wire_spelling() {
        for code in ErrorCode::ALL {
            let v = serde_json::to_value(code).unwrap();
            assert_eq!(v, code.as_str());
            assert_eq!(serde_json::from_value::<ErrorCode>(v).unwrap(), code);
        }
    }

    #[test]
    fn failed_call_details_read_back() {
        let e = CallError::new(ErrorCode::EnvelopeInvalid, "m")
            .with_detail("totalAttempts", 2)
            .with_detail("outputTokens", 4000)
            .with_detail("usageComplete", false);
        assert_eq!(e.total_attempts(), Some(2));
        assert_eq!(e.output_tokens(), Some((4000, false)));
        let bare = CallError::new(ErrorCode::PolicyDenied, "no");
        assert_eq!((bare.total_attempts(), bare.output_tokens()), (None, None));
    }
}
