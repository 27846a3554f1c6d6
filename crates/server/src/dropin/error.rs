//! The drop-in endpoints' errors, in each API's own shape and with the
//! status codes their SDKs map to typed errors: `validation_error` 400,
//! unauthorised 401, `policy_denied` 403, a budget 429, every `envelope_*`
//! 422, `provider_unavailable` (and a provider's own refusal) 502, a
//! provider's quota 429, the host
//! full or stopping 503 with `Retry-After`.
//!
//! Every handler and middleware answers an [`ApiError`] the one way; the
//! layer [`Reshape`] on each drop-in's routes turns it into its API's
//! shape, so nothing upstream matches a path to choose one. Each answer
//! also says whether a client should send it again (`x-should-retry`,
//! which the OpenAI and Anthropic SDKs obey): not after the host has spent
//! its own retries (422, 502), nor for a budget spent; yes when it was
//! full, or a rate limit resets within the minute.

use super::api::Api;
use crate::error::{ApiCode, ApiError};
use crate::layers::around::{Around, Before};
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use callai_engine::wire::ErrorCode;
use serde::Serialize;
use serde_json::{Map, Value};

/// The layer of a drop-in's routes: an [`ApiError`] answer, re-answered
/// in its API's shape; any other answer as it is.
#[derive(Debug, Clone, Copy)]
pub struct Reshape(pub Api);

impl Around for Reshape {
    type Carry = Api;

    fn before(&self, _: &mut Request) -> Before<Api> {
        Before::Go(self.0)
    }

    fn after(api: Api, response: Response) -> Response {
        let mut response = reshape(api, response);
        if api == Api::Anthropic {
            crate::headers::anthropic_rate_limits(response.headers_mut());
        }
        response
    }
}

/// `response` in `api`'s shape when it is an [`ApiError`]'s.
fn reshape(api: Api, response: Response) -> Response {
    if response.extensions().get::<ApiError>().is_none() {
        return response;
    }
    let (mut parts, _) = response.into_parts();
    let error = parts
        .extensions
        .remove::<ApiError>()
        .expect("checked above");
    let status = status(&error);
    parts.status = status;
    let headers = &mut parts.headers;
    headers.remove(header::CONTENT_LENGTH);
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let retry = if status == StatusCode::SERVICE_UNAVAILABLE || resets_soon(&error) {
        "true"
    } else {
        "false"
    };
    headers.insert("x-should-retry", HeaderValue::from_static(retry));
    let attempts = error
        .details
        .as_ref()
        .and_then(|d| d.get("totalAttempts"))
        .and_then(Value::as_u64);
    if let Some(n) = attempts {
        headers.insert("x-callai-attempts-count", HeaderValue::from(n));
    }
    let body = Body::from(body(api, &error));
    // Kept for the log line, which says the error's code.
    parts.extensions.insert(error);
    Response::from_parts(parts, body)
}

/// Whether `error` is a refusal of a limit whose window resets within a
/// minute (a rate limit) and that the call fits once it does: a client's
/// own retry, after `retry-after-ms`, then gets in. A budget that resets
/// later, or a call larger than the whole limit, is not sent again.
fn resets_soon(error: &ApiError) -> bool {
    let amount = |key: &str| error.details.as_ref()?.get(key)?.as_f64();
    error.is_rate_limit()
        && error.retry_after.is_some_and(|s| s <= 60)
        && matches!((amount("needed"), amount("limit")), (Some(n), Some(l)) if n <= l)
}

/// The status of `error` on a drop-in: the host's, except that an
/// exhausted envelope is 422.
pub fn status(error: &ApiError) -> StatusCode {
    match error.code {
        ApiCode::Call(
            ErrorCode::EnvelopeInvalid
            | ErrorCode::EnvelopeTruncationUnrecoverable
            | ErrorCode::EnvelopeRefusal,
        ) => StatusCode::UNPROCESSABLE_ENTITY,
        _ => error.status(),
    }
}

/// The API's error `type` for `status`.
fn kind(api: Api, status: StatusCode) -> &'static str {
    match (api, status.as_u16()) {
        (_, 400 | 404 | 405 | 408 | 409 | 413 | 415 | 422) => "invalid_request_error",
        (_, 401) => "authentication_error",
        (_, 403) => "permission_error",
        (_, 429) => "rate_limit_error",
        (Api::Anthropic, 503) => "overloaded_error",
        _ => "api_error",
    }
}

/// `"callai": {"error": {"code", "details"?}}`.
#[derive(Serialize)]
struct Extension<'a> {
    error: ExtensionError<'a>,
}

#[derive(Serialize)]
struct ExtensionError<'a> {
    code: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<&'a Map<String, Value>>,
}

/// OpenAI's `{"error": {"code", "message", "param", "type"}}`, with the
/// extension (keys in byte order, as the answers have always had them).
#[derive(Serialize)]
struct OpenAiBody<'a> {
    callai: Extension<'a>,
    error: OpenAiError<'a>,
}

#[derive(Serialize)]
struct OpenAiError<'a> {
    code: &'static str,
    message: &'a str,
    param: Option<String>,
    #[serde(rename = "type")]
    kind: &'static str,
}

/// Anthropic's `{"type": "error", "error": {"type", "message"}}`.
#[derive(Serialize)]
struct AnthropicBody<'a> {
    callai: Extension<'a>,
    error: AnthropicError<'a>,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct AnthropicError<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
}

/// The body of `error` in `api`'s shape, with the host's code and details
/// in the `callai` extension; the field it names (`details.field`) is the
/// `param`, in the API's own words.
pub fn body(api: Api, error: &ApiError) -> Vec<u8> {
    let code = error.code.as_str();
    let callai = Extension {
        error: ExtensionError {
            code,
            details: error.details.as_ref(),
        },
    };
    let kind = kind(api, status(error));
    let written = match api {
        Api::OpenAi | Api::Responses | Api::Embeddings => {
            let param = error
                .details
                .as_ref()
                .and_then(|d| d.get("field"))
                .and_then(Value::as_str)
                .map(|field| api_param(api, field).to_owned());
            serde_json::to_vec(&OpenAiBody {
                callai,
                error: OpenAiError {
                    code,
                    message: &error.message,
                    param,
                    kind,
                },
            })
        }
        Api::Anthropic => serde_json::to_vec(&AnthropicBody {
            callai,
            error: AnthropicError {
                message: &error.message,
                kind,
            },
            kind: "error",
        }),
    };
    written.expect("an error body always serialises")
}

/// A ctx.callAI request field in the words of `api`'s request
/// (`responseSchema` is OpenAI's `response_format.json_schema.schema`);
/// any other field (the API's own, named by its mapping) as it is.
fn api_param(api: Api, field: &str) -> &str {
    match (api, field) {
        (Api::OpenAi, "responseSchema") => "response_format.json_schema.schema",
        (Api::Anthropic, "responseSchema") => "output_config.format.schema",
        (Api::OpenAi, "maxTokens") => "max_completion_tokens",
        (Api::Anthropic, "maxTokens") => "max_tokens",
        (Api::OpenAi, "stopSequences") => "stop",
        (Api::Responses, "responseSchema") => "text.format.schema",
        (Api::Responses, "maxTokens") => "max_output_tokens",
        (Api::Responses, "systemPrompt") => "instructions",
        (Api::Responses, "messages") => "input",
        (Api::Responses, "reasoningEffort") => "reasoning.effort",
        (Api::OpenAi, "reasoningEffort") => "reasoning_effort",
        (Api::Anthropic, "stopSequences") => "stop_sequences",
        (_, "systemPrompt") => "system",
        (_, "provider" | "model") => "model",
        (_, other) => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use callai_engine::wire::CallError;

    fn json(api: Api, e: &ApiError) -> Value {
        serde_json::from_slice(&body(api, e)).unwrap()
    }

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
        for (code, want, kind) in cases {
            let e = ApiError::from_call(&CallError::new(code, "m"));
            assert_eq!(status(&e).as_u16(), want, "{code:?}");
            let body = json(Api::OpenAi, &e);
            assert_eq!(body["error"]["type"], kind, "{code:?}");
            assert_eq!(body["error"]["code"], code.as_str());
        }
        let e = ApiError::invalid("model", "no provider \"x\"");
        let body = json(Api::Anthropic, &e);
        assert_eq!(body["type"], "error");
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("model:")
        );
        let schema = CallError::validation("responseSchema", "is refused: too costly");
        let e = ApiError::from_call(&schema);
        assert_eq!(
            json(Api::OpenAi, &e)["error"]["param"],
            "response_format.json_schema.schema"
        );
        let full = ApiError::unavailable(ApiCode::Overloaded, "full", 1);
        assert_eq!(
            json(Api::Anthropic, &full)["error"]["type"],
            "overloaded_error"
        );
    }
}
