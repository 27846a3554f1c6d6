//! The API's errors: one enum of codes, each with the status it answers
//! with, and the body `{"error": {"code", "message", "details"?}}`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use callai_engine::wire::{CallError, ErrorCode};
use serde::Serialize;
use serde_json::{Map, Value};

/// The header OpenAI's and Anthropic's clients read a wait from before
/// `Retry-After`.
const RETRY_AFTER_MS: axum::http::HeaderName =
    axum::http::HeaderName::from_static("retry-after-ms");

/// What went wrong, as the `code` of an error body says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiCode {
    /// A failed ctx.callAI call, with its own code (`validation_error`,
    /// `policy_denied`, `envelope_*`, `provider_unavailable`, ...).
    Call(ErrorCode),
    /// The body is over its size limit.
    PayloadTooLarge,
    /// A run or call went past a `[limits]` bound.
    LimitExceeded,
    /// The request body did not arrive within `[server] bodyTimeoutMs`.
    RequestTimeout,
    /// No such route, pack or run.
    NotFound,
    /// The route does not take this method.
    MethodNotAllowed,
    /// A run id already in use.
    Conflict,
    /// No bearer token, or not this server's.
    Unauthorized,
    /// The caller's token does not reach this: another tenant's named by a
    /// tenant, a shared pack changed by one, `/metrics` without the admin's
    /// or the metrics token.
    Forbidden,
    /// Every run slot and queue place is taken.
    Overloaded,
    /// The server is shutting down.
    ShuttingDown,
    /// The server holds as many uploaded packs as it keeps.
    TooManyPacks,
    /// The call's worst case does not fit what is left of the caller's
    /// budget: refused before any request.
    BudgetExceeded,
    /// The provider's quota (`[providers.NAME.limits]`) had no room for
    /// the call's request, and no other target took it.
    ProviderQuotaExceeded,
    /// The caller's budget could not be checked (its database failed):
    /// refused before any request, try again.
    BudgetUnavailable,
    /// An `Idempotency-Key` sent again with another body.
    IdempotencyMismatch,
    /// A body a server without tokens takes only as `application/json`.
    UnsupportedMediaType,
    /// A fault of this host, never of the request.
    Internal,
}

impl ApiCode {
    /// The code as the body spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Call(code) => code.as_str(),
            Self::PayloadTooLarge => "payload_too_large",
            Self::LimitExceeded => "limit_exceeded",
            Self::RequestTimeout => "request_timeout",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::Conflict => "conflict",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::Overloaded => "overloaded",
            Self::ShuttingDown => "shutting_down",
            Self::TooManyPacks => "too_many_packs",
            Self::BudgetExceeded => "budget_exceeded",
            Self::ProviderQuotaExceeded => "provider_quota_exceeded",
            Self::BudgetUnavailable => "budget_unavailable",
            Self::IdempotencyMismatch => "idempotency_mismatch",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::Internal => "internal",
        }
    }

    /// The status it answers with. A failed call: `validation_error` 400,
    /// `policy_denied` 403, every other code 502.
    pub fn status(self) -> StatusCode {
        match self {
            Self::Call(ErrorCode::ValidationError) => StatusCode::BAD_REQUEST,
            Self::Call(ErrorCode::PolicyDenied) => StatusCode::FORBIDDEN,
            Self::Call(_) => StatusCode::BAD_GATEWAY,
            Self::PayloadTooLarge | Self::LimitExceeded => StatusCode::PAYLOAD_TOO_LARGE,
            Self::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict => StatusCode::CONFLICT,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::Overloaded | Self::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            Self::TooManyPacks => StatusCode::INSUFFICIENT_STORAGE,
            Self::BudgetExceeded | Self::ProviderQuotaExceeded => StatusCode::TOO_MANY_REQUESTS,
            Self::BudgetUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::IdempotencyMismatch => StatusCode::UNPROCESSABLE_ENTITY,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl Serialize for ApiCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// An error the API answers with.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// What went wrong; the status follows from it.
    pub code: ApiCode,
    /// A sentence for a person.
    pub message: String,
    /// More, when there is more (`field`, `limit`, `totalAttempts`, ...).
    pub details: Option<Map<String, Value>>,
    /// `Retry-After`, in seconds, for a 503.
    pub retry_after: Option<u64>,
}

/// The body: `{"error": {"code", "details"?, "message"}}` (keys in byte
/// order, as the answers have always had them), and what a failed call's
/// answer adds (`events`).
#[derive(Debug, Serialize)]
pub struct ErrorBody<'a, E: Serialize = ()> {
    error: Inner<'a>,
    /// The call's events, when its caller asked for them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<E>,
}

#[derive(Debug, Serialize)]
struct Inner<'a> {
    code: ApiCode,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<&'a Map<String, Value>>,
    message: &'a str,
}

impl ApiError {
    /// An error of `code`.
    pub fn new(code: ApiCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    /// 400 `validation_error` naming `field`, in `details.field` and at the
    /// start of the message (as a refused ctx.callAI request does).
    pub fn invalid(field: &str, message: impl std::fmt::Display) -> Self {
        Self::new(
            ApiCode::Call(ErrorCode::ValidationError),
            format!("{field}: {message}"),
        )
        .with_detail("field", field)
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ApiCode::NotFound, message)
    }

    /// 409 `conflict`.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ApiCode::Conflict, message)
    }

    /// 500 `internal`: a fault of this host, never of the request.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ApiCode::Internal, message)
    }

    /// 503: the host is full or shutting down; try again after `seconds`.
    pub fn unavailable(code: ApiCode, message: impl Into<String>, seconds: u64) -> Self {
        let mut e = Self::new(code, message);
        e.retry_after = Some(seconds);
        e
    }

    /// 413 for a body or a run over `key` (`server.maxBodyBytes`,
    /// `limits.maxCallsPerRun`, ...), naming it in `details.limit`.
    pub fn over_limit(code: ApiCode, key: &str, message: impl Into<String>) -> Self {
        Self::new(code, message).with_detail("limit", key)
    }

    /// With `details.key` = `value`.
    pub fn with_detail(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.details
            .get_or_insert_with(Map::new)
            .insert(key.into(), value.into());
        self
    }

    /// A failed ctx.callAI call, as `/v1/call` answers it. A refusal of
    /// the caller's budget (`policy_denied` with `details.reason`, as a
    /// pack sees it) is `budget_exceeded` (429), or `budget_unavailable`
    /// (503) when the budget could not be checked; a `limit_exceeded`
    /// naming a field of the request is 413.
    pub fn from_call(error: &CallError) -> Self {
        let reason = error
            .details
            .as_ref()
            .and_then(|d| d.get("reason"))
            .and_then(Value::as_str);
        let names_a_field = error.field().is_some();
        let code = match (error.code, reason) {
            (ErrorCode::PolicyDenied, Some("budget_exceeded")) => ApiCode::BudgetExceeded,
            (ErrorCode::PolicyDenied, Some("budget_unavailable")) => ApiCode::BudgetUnavailable,
            (ErrorCode::ProviderUnavailable, Some("provider_quota")) => {
                ApiCode::ProviderQuotaExceeded
            }
            // A part of the request over its bound (an image over
            // `maxImageBytes`) is the client's to change: 413, not a
            // provider's fault. A reply over its bound names no field.
            (ErrorCode::LimitExceeded, _) if names_a_field => ApiCode::LimitExceeded,
            (code, _) => ApiCode::Call(code),
        };
        let mut e = Self::new(code, error.message.clone());
        e.details = error.details.clone();
        e.retry_after = match code {
            ApiCode::BudgetUnavailable => Some(1),
            // Until the window resets: the budget is whole again then.
            ApiCode::BudgetExceeded | ApiCode::ProviderQuotaExceeded => {
                e.resets_in_ms().map(|ms| ms.div_ceil(1000).max(1))
            }
            _ => None,
        };
        e
    }

    /// Its headers (`Retry-After`; `retry-after-ms` too for a refusal of
    /// the caller's limits, which OpenAI's and Anthropic's clients read
    /// first), on an answer built around its body.
    pub fn add_headers(&self, headers: &mut axum::http::HeaderMap) {
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.is_rate_limit()
            && let Some(ms) = self.resets_in_ms()
        {
            headers.insert(RETRY_AFTER_MS, HeaderValue::from(ms.max(1)));
        }
    }

    /// Whether it is a limit's refusal, a caller's or a provider's quota:
    /// 429, with when to come back.
    pub fn is_rate_limit(&self) -> bool {
        matches!(
            self.code,
            ApiCode::BudgetExceeded | ApiCode::ProviderQuotaExceeded
        )
    }

    /// How long until the window of a refusing limit resets (its
    /// `details.resetsAt`).
    fn resets_in_ms(&self) -> Option<u64> {
        let at = self.details.as_ref()?.get("resetsAt")?.as_str()?;
        let at = at.parse::<jiff::Timestamp>().ok()?;
        let ms = at.duration_since(jiff::Timestamp::now()).as_millis();
        Some(u64::try_from(ms).unwrap_or(0))
    }

    /// The status it answers with.
    pub fn status(&self) -> StatusCode {
        self.code.status()
    }

    /// The body, with `events` when given.
    pub fn body<E: Serialize>(&self, events: Option<E>) -> ErrorBody<'_, E> {
        ErrorBody {
            error: Inner {
                code: self.code,
                details: self.details.as_ref(),
                message: &self.message,
            },
            events,
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = self.status().as_u16();
        write!(f, "{status} {}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for ApiError {}

/// The answer: the body in this API's shape, and the error itself in the
/// answer's extensions, for a layer that answers in another API's shape
/// (the drop-ins') to read.
impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = axum::Json(self.body::<()>(None));
        let mut response = (self.status(), body).into_response();
        self.add_headers(response.headers_mut());
        response.extensions_mut().insert(self);
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn call_errors_get_the_documented_statuses() {
        let cases = [
            (ErrorCode::ValidationError, 400),
            (ErrorCode::PolicyDenied, 403),
            (ErrorCode::ProviderUnavailable, 502),
            (ErrorCode::EnvelopeInvalid, 502),
        ];
        for (code, status) in cases {
            let e = ApiError::from_call(&CallError::new(code, "m"));
            assert_eq!(e.status().as_u16(), status, "{code:?}");
            assert_eq!(body(&e)["error"]["code"], code.as_str());
        }
        let e = ApiError::from_call(&CallError::validation("retry.maxAttempts", "bad"));
        assert_eq!(body(&e)["error"]["details"]["field"], "retry.maxAttempts");
        let e = ApiError::from_call(&callai_engine::budget::budget_exceeded(
            "requests", 1, 3, None,
        ));
        assert_eq!(e.status().as_u16(), 429);
        assert_eq!(body(&e)["error"]["code"], "budget_exceeded");
        assert_eq!(body(&e)["error"]["details"]["budget"], "requests");
        assert_eq!(e.retry_after, None, "a lifetime budget does not reset");
        // A windowed refusal: Retry-After to the reset.
        let refusal = callai_engine::budget::Refusal {
            key: "requests",
            left: 1,
            needed: 3,
            room: callai_engine::budget::Limits {
                requests: Some(1),
                ..Default::default()
            },
            resets_at_ms: Some(callai_engine::events::now_ms() + 90_500),
            limit: 10,
            per: callai_engine::budget::Window::Hour,
        };
        let fits = callai_engine::budget::Fits {
            attempts: Some(1),
            max_tokens: Some(300),
        };
        let e = ApiError::from_call(&refusal.into_error(fits, None));
        let after = e.retry_after.unwrap();
        assert!((89..=91).contains(&after), "{after}");
        let details = &body(&e)["error"]["details"];
        assert_eq!(details["fitsMaxAttempts"], 1);
        assert_eq!(details["fitsMaxTokens"], 300);
        assert!(
            details["resetsAt"].as_str().unwrap().ends_with('Z'),
            "{details}"
        );
    }

    fn body(e: &ApiError) -> Value {
        serde_json::to_value(e.body::<()>(None)).unwrap()
    }

    #[test]
    fn the_body_has_details_only_when_there_are_some() {
        let e = ApiError::not_found("no run \"x\"");
        assert_eq!(
            body(&e),
            json!({"error": {"code": "not_found", "message": "no run \"x\""}})
        );
        assert_eq!(e.to_string(), "404 not_found: no run \"x\"");
    }
}
