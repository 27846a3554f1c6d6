//! How a call ended, in one word and one record, the same wherever it is
//! read: the trace, the viewer's filter, `callai_calls_total` and the log
//! line. A refusal of the caller's budget is `budget_exceeded` (as the
//! client is answered), not the `policy_denied` a pack sees.

use callai_engine::wire::{CallError, ErrorCode};
use serde::Serialize;
use smol_str::SmolStr;

/// The word for a call that failed with `error`: its code, or, for a
/// refusal of the caller's budget, `budget_exceeded` (`budget_unavailable`
/// when the budget could not be checked).
pub fn outcome(error: &CallError) -> &'static str {
    let reason = error
        .details
        .as_ref()
        .and_then(|d| d.get("reason"))
        .and_then(serde_json::Value::as_str);
    match (error.code, reason) {
        (ErrorCode::PolicyDenied, Some("budget_exceeded")) => "budget_exceeded",
        (ErrorCode::PolicyDenied, Some("budget_unavailable")) => "budget_unavailable",
        (code, _) => code.as_str(),
    }
}

/// A failed call's error, as its trace keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceError {
    /// Its [`outcome`].
    pub code: &'static str,
    /// The sentence the caller was answered with.
    pub message: String,
    /// The request's field it names, for a refusal of the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The provider it names, or, for a failure of a provider, the one
    /// the call's last request went to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<SmolStr>,
}

impl TraceError {
    /// `error`'s record; `last` is the provider of the call's last request.
    pub fn of(error: &CallError, last: Option<&str>) -> Self {
        let named = error
            .details
            .as_ref()
            .and_then(|d| d.get("provider"))
            .and_then(serde_json::Value::as_str);
        let by_provider = matches!(
            error.code,
            ErrorCode::ProviderUnavailable
                | ErrorCode::ProviderRejected
                | ErrorCode::EnvelopeInvalid
                | ErrorCode::EnvelopeTruncationUnrecoverable
                | ErrorCode::EnvelopeRefusal
        );
        Self {
            code: outcome(error),
            message: error.message.clone(),
            field: error.field().map(str::to_owned),
            provider: named.or(last.filter(|_| by_provider)).map(SmolStr::from),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use callai_engine::budget::budget_exceeded;

    #[test]
    fn a_budget_refusal_is_budget_exceeded_every_other_error_its_code() {
        let refused = budget_exceeded("cost", 1, 2, Some("USD"));
        assert_eq!(refused.code, ErrorCode::PolicyDenied, "as a pack sees it");
        assert_eq!(outcome(&refused), "budget_exceeded");
        let denied = CallError::new(ErrorCode::PolicyDenied, "no").with_detail("provider", "x");
        assert_eq!(outcome(&denied), "policy_denied");
        let record = TraceError::of(&denied, Some("y"));
        assert_eq!(record.provider.as_deref(), Some("x"), "the one it names");
        let down = CallError::new(ErrorCode::ProviderUnavailable, "HTTP 503: busy");
        let record = TraceError::of(&down, Some("p"));
        assert_eq!(
            record,
            TraceError {
                code: "provider_unavailable",
                message: "HTTP 503: busy".into(),
                field: None,
                provider: Some("p".into()),
            }
        );
        let invalid = CallError::validation("messages[0].content", "is empty");
        let record = TraceError::of(&invalid, Some("p"));
        assert_eq!(record.field.as_deref(), Some("messages[0].content"));
        assert_eq!(
            record.provider, None,
            "the request's fault, not a provider's"
        );
    }
}
