//! Errors a pack sees: a failed call, and a node's own failure.

use crate::bindings::openwop::callai::types as wit;
use serde_json::{Map, Value};
use std::fmt;

/// What kind of failure a call met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// The request is malformed; [`CallError::field`] names the key.
    ValidationError,
    /// The host refused before any request was sent.
    PolicyDenied,
    /// Parse or schema violations exhausted the retries.
    EnvelopeInvalid,
    /// Truncation exhausted the retries.
    EnvelopeTruncationUnrecoverable,
    /// The provider refused.
    EnvelopeRefusal,
    /// Transport or server failure after the host gave up.
    ProviderUnavailable,
    /// The provider rejected the request.
    ProviderRejected,
    /// A per-run limit of the host was reached.
    LimitExceeded,
}

impl ErrorCode {
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

/// A failed call: `{code, message, details?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct CallError {
    /// What kind of failure.
    pub code: ErrorCode,
    /// A sentence for a person.
    pub message: String,
    /// Machine-readable details, e.g. `{"field": "retry.maxAttempts"}`.
    pub details: Option<Map<String, Value>>,
}

impl CallError {
    /// `details.field` of a validation error.
    pub fn field(&self) -> Option<&str> {
        self.details.as_ref()?.get("field")?.as_str()
    }

    /// Provider requests the host made before giving up (`details.totalAttempts`),
    /// when it made any.
    pub fn total_attempts(&self) -> Option<u32> {
        let n = self.details.as_ref()?.get("totalAttempts")?.as_u64()?;
        u32::try_from(n).ok()
    }

    /// Output tokens the host reported over the failed call's requests
    /// (`details.outputTokens`), and whether that sum is complete
    /// (`details.usageComplete`); `None` when the host gave neither.
    pub fn output_tokens(&self) -> Option<(u64, bool)> {
        let d = self.details.as_ref()?;
        let complete = d.get("usageComplete")?.as_bool()?;
        let tokens = d.get("outputTokens").and_then(Value::as_u64).unwrap_or(0);
        Some((tokens, complete))
    }

    /// The wire JSON `{code, message, details?}`.
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("code".into(), self.code.as_str().into());
        o.insert("message".into(), self.message.clone().into());
        if let Some(d) = &self.details {
            o.insert("details".into(), Value::Object(d.clone()));
        }
        Value::Object(o)
    }

    pub(crate) fn from_wit(e: wit::CallError) -> Self {
        use wit::ErrorCode as W;
        Self {
            code: match e.code {
                W::ValidationError => ErrorCode::ValidationError,
                W::PolicyDenied => ErrorCode::PolicyDenied,
                W::EnvelopeInvalid => ErrorCode::EnvelopeInvalid,
                W::EnvelopeTruncationUnrecoverable => ErrorCode::EnvelopeTruncationUnrecoverable,
                W::EnvelopeRefusal => ErrorCode::EnvelopeRefusal,
                W::ProviderUnavailable => ErrorCode::ProviderUnavailable,
                W::ProviderRejected => ErrorCode::ProviderRejected,
                W::LimitExceeded => ErrorCode::LimitExceeded,
            },
            message: e.message,
            details: e
                .details
                .and_then(|d| serde_json::from_str::<Map<String, Value>>(&d).ok()),
        }
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for CallError {}

/// Why a node failed; the host reports its text as the run's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeError(String);

impl NodeError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NodeError {}

impl From<CallError> for NodeError {
    fn from(e: CallError) -> Self {
        Self(e.to_json().to_string())
    }
}

impl From<serde_json::Error> for NodeError {
    fn from(e: serde_json::Error) -> Self {
        Self(format!("invalid JSON: {e}"))
    }
}

impl From<String> for NodeError {
    fn from(s: String) -> Self {
        Self(s)
    }
}

impl From<&str> for NodeError {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}
