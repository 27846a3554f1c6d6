//! The drop-in endpoints' errors, in each API's own shape and with the
//! status codes their SDKs map to typed errors: `validation_error` 400,
//! unauthorised 401, `policy_denied` 403, a budget 429, every `envelope_*`
//! 422, `provider_unavailable` (and a provider's own refusal) 502, the host
//! full or stopping 503 with `Retry-After`.
//!
//! Each answer also says whether a client should send it again
//! (`x-should-retry`, which the OpenAI and Anthropic SDKs obey): not after
//! the host has spent its own retries (422, 502), yes when it was full.

use super::Api;
use crate::error::{ApiCode, ApiError};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use callai_engine::wire::{CallError, ErrorCode};
use serde_json::{Map, Value, json};

/// An error of a drop-in endpoint.
#[derive(Debug, Clone)]
pub struct DropinError {
    /// Whose shape the body takes.
    pub api: Api,
    /// The host's error, with its code and details.
    pub error: ApiError,
    /// The request field it names, in the API's own words (`model`,
    /// `messages[0].content`, `retry.maxAttempts`).
    pub param: Option<String>,
    /// Headers the answer carries besides its own (the caller's budget);
    /// boxed, as most errors have none.
    pub extra: Option<Box<axum::http::HeaderMap>>,
}

impl DropinError {
    /// A refused request naming `param`.
    pub fn invalid(api: Api, param: impl Into<String>, message: impl std::fmt::Display) -> Self {
        let param = param.into();
        Self {
            api,
            error: ApiError::invalid(&param, message),
            param: Some(param),
            extra: None,
        }
    }

    /// The host's own error (admission, limits, auth, a call error).
    pub fn from_api(api: Api, error: ApiError) -> Self {
        let param = error
            .details
            .as_ref()
            .and_then(|d| d.get("field"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        Self {
            api,
            error,
            param,
            extra: None,
        }
    }

    /// A failed call; a field of the ctx.callAI request it names is named
    /// as the API calls it (`responseSchema` is OpenAI's
    /// `response_format.json_schema.schema`).
    pub fn from_call(api: Api, error: &CallError) -> Self {
        let mut e = Self::from_api(api, ApiError::from_call(error));
        e.param = e.param.map(|field| api_param(api, &field));
        e
    }

    /// The status: the host's, except that an exhausted envelope is 422.
    pub fn status(&self) -> StatusCode {
        match self.error.code {
            ApiCode::Call(
                ErrorCode::EnvelopeInvalid
                | ErrorCode::EnvelopeTruncationUnrecoverable
                | ErrorCode::EnvelopeRefusal,
            ) => StatusCode::UNPROCESSABLE_ENTITY,
            _ => self.error.status(),
        }
    }

    /// The API's error `type`.
    fn kind(&self) -> &'static str {
        let status = self.status();
        match (self.api, status.as_u16()) {
            (_, 400 | 404 | 405 | 408 | 409 | 413 | 422) => "invalid_request_error",
            (_, 401) => "authentication_error",
            (_, 403) => "permission_error",
            (_, 429) => "rate_limit_error",
            (Api::Anthropic, 503) => "overloaded_error",
            _ => "api_error",
        }
    }

    /// The body, in the API's shape, with the host's code and details in
    /// the `callai` extension.
    pub fn body(&self) -> Value {
        let code = self.error.code.as_str();
        let mut extension = Map::new();
        extension.insert("code".into(), json!(code));
        if let Some(details) = &self.error.details {
            extension.insert("details".into(), Value::Object(details.clone()));
        }
        match self.api {
            Api::OpenAi => json!({
                "error": {
                    "message": self.error.message,
                    "type": self.kind(),
                    "param": self.param,
                    "code": code,
                },
                "callai": {"error": extension},
            }),
            Api::Anthropic => json!({
                "type": "error",
                "error": {"type": self.kind(), "message": self.error.message},
                "callai": {"error": extension},
            }),
        }
    }
}

impl IntoResponse for DropinError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut response = (status, axum::Json(self.body())).into_response();
        let headers = response.headers_mut();
        if let Some(extra) = &self.extra {
            headers.extend(extra.as_ref().clone());
        }
        let retry = match status.as_u16() {
            503 => "true",
            _ => "false",
        };
        headers.insert("x-should-retry", HeaderValue::from_static(retry));
        if let Some(seconds) = self.error.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        let attempts = self
            .error
            .details
            .as_ref()
            .and_then(|d| d.get("totalAttempts"))
            .and_then(Value::as_u64);
        if let Some(n) = attempts {
            headers.insert("x-callai-attempts-count", HeaderValue::from(n));
        }
        response
    }
}

/// A ctx.callAI request field in the words of `api`'s request.
fn api_param(api: Api, field: &str) -> String {
    let name = match (api, field) {
        (Api::OpenAi, "responseSchema") => "response_format.json_schema.schema",
        (Api::Anthropic, "responseSchema") => "output_config.format.schema",
        (Api::OpenAi, "maxTokens") => "max_completion_tokens",
        (Api::Anthropic, "maxTokens") => "max_tokens",
        (Api::OpenAi, "stopSequences") => "stop",
        (Api::Anthropic, "stopSequences") => "stop_sequences",
        (_, "systemPrompt") => "system",
        (_, "provider" | "model") => "model",
        (_, other) => other,
    };
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_code_gets_the_status_and_type_the_sdks_map() {
        let cases = [
            (ErrorCode::ValidationError, 400, "invalid_request_error"),
            (ErrorCode::PolicyDenied, 403, "permission_error"),
            (ErrorCode::EnvelopeInvalid, 422, "invalid_request_error"),
            (
                ErrorCode::EnvelopeTruncationUnrecoverable,
                422,
                "invalid_request_error",
            ),
            (ErrorCode::ProviderUnavailable, 502, "api_error"),
        ];
        for (code, status, kind) in cases {
            let e = DropinError::from_call(Api::OpenAi, &CallError::new(code, "m"));
            assert_eq!(e.status().as_u16(), status, "{code:?}");
            assert_eq!(e.body()["error"]["type"], kind, "{code:?}");
            assert_eq!(e.body()["error"]["code"], code.as_str());
        }
        let e = DropinError::invalid(Api::Anthropic, "model", "no provider \"x\"");
        let body = e.body();
        assert_eq!(body["type"], "error");
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("model:")
        );
        let schema = CallError::validation("responseSchema", "is refused: too costly");
        let e = DropinError::from_call(Api::OpenAi, &schema);
        assert_eq!(
            e.body()["error"]["param"],
            "response_format.json_schema.schema"
        );
        let full = DropinError::from_api(
            Api::Anthropic,
            ApiError::unavailable(ApiCode::Overloaded, "full", 1),
        );
        assert_eq!(full.body()["error"]["type"], "overloaded_error");
    }
}
