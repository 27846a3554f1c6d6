//! The JSON bodies of `POST /v1/runs` and `POST /v1/call`: typed with serde
//! (`deny_unknown_fields`), read by the [`ApiJson`] extractor, and every
//! refusal names its field in `details.field`: not JSON, not an object, a
//! field missing, of the wrong type, or unknown. Each becomes what the
//! gateway takes: a [`RunRequest`], a [`Planned`] call.

use crate::error::{ApiCode, ApiError};
use crate::listen::BodyTimedOut;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use callai_engine::wire::ParsedRequest;
use callai_engine::{Host, MockScript};
use callai_gateway::call::{Planned, Route};
use callai_gateway::ids::{fresh_id, valid_run_id};
use callai_gateway::runs::RunRequest;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

/// A JSON body of type `T`, refused with `validation_error` naming the
/// field when it does not fit, or `413` over `[server] maxBodyBytes`.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = bytes(
            Bytes::from_request(request, state).await,
            "server.maxBodyBytes",
        )?;
        parse(&bytes).map(Self)
    }
}

/// The body's bytes, or the error that says why there are none (over the
/// size limit `limit_key`: `413`).
pub fn bytes(body: Result<Bytes, BytesRejection>, limit_key: &str) -> Result<Bytes, ApiError> {
    body.map_err(|e| {
        if let Some(timeout) = crate::listen::is_body_timeout(&e) {
            match timeout {
                // The client tries another host, or this one again later.
                BodyTimedOut::Shutdown => {
                    ApiError::unavailable(ApiCode::ShuttingDown, timeout.to_string(), 1)
                }
                BodyTimedOut::Deadline(_) => ApiError::over_limit(
                    ApiCode::RequestTimeout,
                    "server.bodyTimeoutMs",
                    timeout.to_string(),
                ),
            }
        } else if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            let message = format!("the body is over {limit_key}");
            ApiError::over_limit(ApiCode::PayloadTooLarge, limit_key, message)
        } else {
            ApiError::invalid("body", e.body_text())
        }
    })
}

/// How a refusal names the field it is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// The top-level field (`script`), as the callai bodies name them.
    TopLevel,
    /// The whole path (`callai.retry`, `messages[0].content`), as the
    /// OpenAI API's `param` does.
    FullPath,
}

/// `bytes` as a `T`, every refusal naming its top-level field: the path
/// serde was at, or, for a field missing or unknown, the field itself.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    parse_naming(bytes, Naming::TopLevel)
}

/// [`parse`], naming the field as `naming` says.
pub fn parse_naming<T: DeserializeOwned>(bytes: &[u8], naming: Naming) -> Result<T, ApiError> {
    // serde reads a struct from an array too (field by position): only an
    // object is a body here.
    if bytes.trim_ascii_start().first() != Some(&b'{') {
        return Err(match serde_json::from_slice::<Value>(bytes) {
            Ok(_) => ApiError::invalid("body", "must be a JSON object"),
            Err(e) => ApiError::invalid("body", format!("not JSON: {e}")),
        });
    }
    // The body as a whole, in one pass; only a refused one is read again,
    // tracking where the reader was, to name the field.
    match serde_json::from_slice(bytes) {
        Ok(value) => Ok(value),
        Err(e) if e.is_syntax() || e.is_eof() => {
            Err(ApiError::invalid("body", format!("not JSON: {e}")))
        }
        Err(_) => Err(refusal::<T>(bytes, naming)),
    }
}

/// Why `bytes`, which did not read as a `T`, was refused: the path serde
/// was at, or, for a field missing or unknown, the field itself.
fn refusal<T: DeserializeOwned>(bytes: &[u8], naming: Naming) -> ApiError {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let Err(e) = serde_path_to_error::deserialize::<_, T>(&mut de) else {
        return ApiError::invalid("body", "must be a JSON object");
    };
    let inner = e.inner();
    if inner.is_syntax() || inner.is_eof() {
        return ApiError::invalid("body", format!("not JSON: {inner}"));
    }
    let text = inner.to_string();
    let message = text.split(" at line").next().unwrap_or(&text);
    let path = e.path().to_string();
    let named = message.starts_with("missing field") || message.starts_with("unknown field");
    match (path.as_str(), quoted(message)) {
        (".", Some(field)) if named => ApiError::invalid(field, message),
        (".", _) => ApiError::invalid("body", "must be a JSON object"),
        // serde's path ends at an unknown field, and before a missing one.
        (path, Some(field))
            if naming == Naming::FullPath && message.starts_with("missing field") =>
        {
            ApiError::invalid(&format!("{path}.{field}"), message)
        }
        (path, _) if naming == Naming::FullPath => ApiError::invalid(path, message),
        (path, _) => ApiError::invalid(path.split(['.', '[']).next().unwrap_or(path), message),
    }
}

/// The first `` `name` `` in serde's message.
fn quoted(message: &str) -> Option<&str> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    Some(&message[start..start + len])
}

/// Deserializes a field that is present, `null` included, as `Some`.
pub(crate) fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// `POST /v1/runs`, as sent. The input is the node's, any JSON: kept as
/// a tree to be written back in its compact form.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RunBody {
    pack: String,
    #[serde(default, deserialize_with = "present")]
    input: Option<Value>,
    run_id: Option<String>,
    durable: Option<bool>,
    wait: Option<bool>,
    script: Option<Box<RawValue>>,
    events: Option<bool>,
}

/// `POST /v1/call`, as sent: the request read into its types in the same
/// pass (its fields' refusals are the engine's to tell).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CallBodyJson {
    request: ParsedRequest,
    script: Option<Box<RawValue>>,
    node_id: Option<String>,
    events: Option<bool>,
}

/// A mock script sent as JSON, and its text.
pub fn script(
    field: &str,
    raw: Option<Box<RawValue>>,
) -> Result<Option<(MockScript, String)>, ApiError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let text = String::from(Box::<str>::from(raw));
    MockScript::from_json(&text)
        .map(|s| Some((s, text)))
        .map_err(|e| ApiError::invalid(field, e))
}

impl RunBody {
    /// The run it asks for, checked.
    pub fn checked(self) -> Result<RunRequest, ApiError> {
        let body = self;
        let input = body.input.ok_or_else(|| {
            ApiError::invalid("input", "missing: the node's input, any JSON value")
        })?;
        if let Some(id) = &body.run_id
            && !valid_run_id(id)
        {
            return Err(ApiError::invalid(
                "runId",
                "use 1 to 128 letters, digits, '.', '_', ':', '-'",
            ));
        }
        Ok(RunRequest {
            pack: body.pack,
            input: input.to_string(),
            run_id: body.run_id,
            durable: body.durable.unwrap_or(false),
            wait: body.wait.unwrap_or(true),
            script: script("script", body.script)?,
            events: body.events.unwrap_or(false),
            trace_parent: None,
        })
    }
}

impl CallBodyJson {
    /// The call it asks for, to go through `host` (whose model names and
    /// default provider say where it goes).
    pub fn planned(self, host: &Host) -> Result<Planned, ApiError> {
        let script = script("script", self.script)?.map(|(s, _)| (s, "script"));
        Ok(Planned {
            id: fresh_id("call_"),
            endpoint: "call",
            route: Route::of_request(host, self.request.request()),
            request: self.request,
            script,
            node_id: self.node_id.map(|id| (id, "nodeId")),
            events: self.events.unwrap_or(false),
            trace_parent: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use callai_engine::wire::RetryField;

    fn run(body: &str) -> Result<RunRequest, ApiError> {
        parse::<RunBody>(body.as_bytes()).and_then(RunBody::checked)
    }

    fn call(body: &str) -> Result<Planned, ApiError> {
        let host = Host::builder(callai_engine::HostConfig::default())
            .build()
            .unwrap();
        parse::<CallBodyJson>(body.as_bytes()).and_then(|b| b.planned(&host))
    }

    fn field(e: ApiError) -> String {
        e.details.unwrap()["field"].as_str().unwrap().to_owned()
    }

    #[test]
    fn a_run_request_reads_its_fields() {
        let r = run(r#"{"pack": "p", "input": "hi", "wait": false}"#).unwrap();
        assert_eq!((r.pack.as_str(), r.input.as_str()), ("p", "\"hi\""));
        assert!(!r.wait && !r.durable && !r.events && r.run_id.is_none());
        let r = run(r#"{"pack": "p", "input": {"a": [1]}, "runId": "r-1"}"#).unwrap();
        assert_eq!(r.input, r#"{"a":[1]}"#);
        assert!(r.wait);
        assert_eq!(
            run(r#"{"pack": "p", "input": null}"#).unwrap().input,
            "null"
        );
    }

    #[test]
    fn every_refusal_names_its_field() {
        for (body, want) in [
            ("nope", "body"),
            ("[1]", "body"),
            (r#"{"pack": "p", "input": 1} x"#, "body"),
            (r#"{"input": 1}"#, "pack"),
            (r#"{"pack": "p"}"#, "input"),
            (r#"{"pack": 3, "input": 1}"#, "pack"),
            (r#"{"pack": "p", "input": 1, "wait": "yes"}"#, "wait"),
            (r#"{"pack": "p", "input": 1, "runId": "a/b"}"#, "runId"),
            (
                r#"{"pack": "p", "input": 1, "script": [{"x": 1}]}"#,
                "script",
            ),
            (r#"{"pack": "p", "input": 1, "colour": "red"}"#, "colour"),
        ] {
            let e = run(body).unwrap_err();
            assert!(e.message.starts_with(want), "{body}: {}", e.message);
            assert_eq!(field(e), want, "{body}");
        }
        assert_eq!(field(call(r#"{"script": []}"#).unwrap_err()), "request");
        assert_eq!(field(call(r#"{"request": "hi"}"#).unwrap_err()), "request");
    }

    #[test]
    fn a_call_body_reads_the_request_leaving_its_refusals_to_the_engine() {
        let c = call(
            r#"{"request": {"messages": [], "retry": {"maxAttempts": 2.5}, "provider": "x"}}"#,
        )
        .unwrap();
        assert_eq!(
            c.route,
            Route::Provider {
                provider: "x".into(),
                model: None
            }
        );
        let refused = c.request.check(RetryField::Honoured).unwrap_err();
        assert_eq!(refused.field(), Some("retry.maxAttempts"));
        // Not JSON anywhere in the body is the body's refusal.
        let e = call(r#"{"request": {"messages": [1e400]}}"#).unwrap_err();
        assert!(
            e.message.starts_with("body: not JSON: number out of range"),
            "{}",
            e.message
        );
    }
}
