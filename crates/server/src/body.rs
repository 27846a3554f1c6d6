//! The JSON bodies of `POST /v1/runs` and `POST /v1/call`: typed with serde
//! (`deny_unknown_fields`), read by the [`ApiJson`] extractor, and every
//! refusal names its field in `details.field`: not JSON, not an object, a
//! field missing, of the wrong type, or unknown.

use crate::error::{ApiCode, ApiError};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use callai_engine::MockScript;
use callai_engine::wire::ParsedRequest;
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
            ApiError::over_limit(
                ApiCode::RequestTimeout,
                "server.bodyTimeoutMs",
                timeout.to_string(),
            )
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

/// `POST /v1/run`, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRequest {
    /// The pack's name.
    pub pack: String,
    /// The node's input, as JSON text.
    pub input: String,
    /// The run id to use; one is made up when absent.
    pub run_id: Option<String>,
    /// Record call by call under a lease, for another host to take over.
    pub durable: bool,
    /// Answer when the run ends (the default), or at once with `202`.
    pub wait: bool,
    /// A mock script for this run alone, and its JSON text.
    pub script: Option<(MockScript, String)>,
    /// Return the run's events in the answer.
    pub events: bool,
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

/// `POST /v1/call` (or a drop-in's call), checked.
#[derive(Debug, Clone)]
pub struct CallBody {
    /// The call's id (`x-callai-call-id`, its trace's).
    pub id: String,
    /// Where it came in: `call`, `chat_completions` or `messages`.
    pub endpoint: &'static str,
    /// The ctx.callAI request, read but not yet checked (the engine does).
    pub request: ParsedRequest,
    /// The provider the request names, if it names one.
    pub provider: Option<String>,
    /// A mock script for this call alone.
    pub script: Option<MockScript>,
    /// The node id the call's events carry.
    pub node_id: Option<String>,
    /// Return the call's events in the answer.
    pub events: bool,
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

/// Whether `id` may name a node: 1 to 256 characters, none of them a
/// control character (a NUL is refused by PostgreSQL's text, and no id
/// needs one).
pub fn valid_node_id(id: &str) -> bool {
    (1..=256).contains(&id.chars().count()) && !id.chars().any(char::is_control)
}

/// What a refused node id is told.
pub const NODE_ID_RULE: &str = "must be 1 to 256 characters, none of them a control character";

/// Whether `id` may name a run: 1 to 128 of `A-Z a-z 0-9 . _ : -`.
pub fn valid_run_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
}

impl TryFrom<RunBody> for RunRequest {
    type Error = ApiError;

    fn try_from(body: RunBody) -> Result<Self, ApiError> {
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
        Ok(Self {
            pack: body.pack,
            input: input.to_string(),
            run_id: body.run_id,
            durable: body.durable.unwrap_or(false),
            wait: body.wait.unwrap_or(true),
            script: script("script", body.script)?,
            events: body.events.unwrap_or(false),
        })
    }
}

impl TryFrom<CallBodyJson> for CallBody {
    type Error = ApiError;

    fn try_from(body: CallBodyJson) -> Result<Self, ApiError> {
        if let Some(id) = &body.node_id
            && !valid_node_id(id)
        {
            return Err(ApiError::invalid("nodeId", NODE_ID_RULE));
        }
        Ok(Self {
            id: crate::calls::fresh_id("call_"),
            endpoint: "call",
            provider: body.request.request().provider.clone(),
            request: body.request,
            script: script("script", body.script)?.map(|(s, _)| s),
            node_id: body.node_id,
            events: body.events.unwrap_or(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use callai_engine::wire::RetryField;

    fn run(body: &str) -> Result<RunRequest, ApiError> {
        parse::<RunBody>(body.as_bytes()).and_then(RunRequest::try_from)
    }

    fn call(body: &str) -> Result<CallBody, ApiError> {
        parse::<CallBodyJson>(body.as_bytes()).and_then(CallBody::try_from)
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
        assert_eq!(
            field(call(r#"{"request": {}, "nodeId": ""}"#).unwrap_err()),
            "nodeId"
        );
    }

    #[test]
    fn a_call_body_reads_the_request_leaving_its_refusals_to_the_engine() {
        let c = call(
            r#"{"request": {"messages": [], "retry": {"maxAttempts": 2.5}, "provider": "x"}}"#,
        )
        .unwrap();
        assert_eq!(c.provider.as_deref(), Some("x"));
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
