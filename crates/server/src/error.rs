//! The API's errors: `{"error": {"code", "message", "details"?}}` with the
//! status that goes with the code.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use callai_engine::wire::{CallError, ErrorCode};
use serde_json::{Value, json};

/// An error the API answers with.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable code: `validation_error`, `unauthorized`, `not_found`, ...
    pub code: String,
    /// A sentence for a person.
    pub message: String,
    /// More, when there is more.
    pub details: Option<Value>,
    /// `Retry-After`, in seconds, for a 503.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error with `status` and `code`.
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            code: code.into(),
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    /// 400 `validation_error` naming `field`, in `details.field` and at the
    /// start of the message (as a refused ctx.callAI request does).
    pub fn invalid(field: &str, message: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "validation_error",
            format!("{field}: {message}"),
        )
        .with_details(json!({"field": field}))
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 409 `conflict`.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 500 `internal`: a fault of this host, never of the request.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// 503: the host is full or shutting down; try again after `seconds`.
    pub fn unavailable(code: &str, message: impl Into<String>, seconds: u64) -> Self {
        let mut e = Self::new(StatusCode::SERVICE_UNAVAILABLE, code, message);
        e.retry_after = Some(seconds);
        e
    }

    /// With `details`.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// A failed ctx.callAI call, as `/v1/call` answers it: `validation_error`
    /// 400, `policy_denied` 403, every other code 502.
    pub fn from_call(error: &CallError) -> Self {
        let status = match error.code {
            ErrorCode::ValidationError => StatusCode::BAD_REQUEST,
            ErrorCode::PolicyDenied => StatusCode::FORBIDDEN,
            _ => StatusCode::BAD_GATEWAY,
        };
        let mut e = Self::new(status, error.code.as_str(), error.message.clone());
        e.details = error.details.clone().map(Value::Object);
        e
    }

    /// The body.
    pub fn body(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(details) = &self.details {
            error["details"] = details.clone();
        }
        json!({"error": error})
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_errors_get_the_documented_statuses() {
        let cases = [
            (ErrorCode::ValidationError, 400),
            (ErrorCode::PolicyDenied, 403),
            (ErrorCode::ProviderUnavailable, 502),
        ];
        for (code, status) in cases {
            let e = ApiError::from_call(&CallError::new(code, "m"));
            assert_eq!(e.status.as_u16(), status, "{code:?}");
            assert_eq!(e.body()["error"]["code"], code.as_str());
        }
        let e = ApiError::from_call(&CallError::validation("retry.maxAttempts", "bad"));
        assert_eq!(e.body()["error"]["details"]["field"], "retry.maxAttempts");
    }
}
