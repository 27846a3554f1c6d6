//! The JSON bodies of `POST /v1/runs` and `POST /v1/call`, read field by
//! field so that every refusal names the field: not JSON, not an object,
//! a field missing, of the wrong type, or unknown.

use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use callai_engine::MockScript;
use serde_json::{Map, Value};

/// `POST /v1/runs`.
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

/// `POST /v1/call`.
#[derive(Debug, Clone, PartialEq)]
pub struct CallBody {
    /// The ctx.callAI request, as wire JSON text (checked by the engine).
    pub request: String,
    /// What the call goes to when the request names no provider, or the
    /// one it names.
    pub provider: Option<String>,
    /// A mock script for this call alone.
    pub script: Option<MockScript>,
    /// The node id the call's events carry.
    pub node_id: Option<String>,
    /// Return the call's events in the answer.
    pub events: bool,
}

/// The body's bytes, or the error that says why there are none (over the
/// size limit: `413`).
pub fn bytes(body: Result<Bytes, BytesRejection>, limit_key: &str) -> Result<Bytes, ApiError> {
    body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("the body is over {limit_key}"),
            )
            .with_details(serde_json::json!({"limit": limit_key}))
        } else {
            ApiError::invalid("body", e.body_text())
        }
    })
}

fn object(bytes: &[u8]) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::invalid("body", "must be a JSON object")),
        Err(e) => Err(ApiError::invalid("body", format!("not JSON: {e}"))),
    }
}

/// Refuses any key of `map` not in `known`.
fn only(map: &Map<String, Value>, known: &[&str]) -> Result<(), ApiError> {
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(ApiError::invalid(
            k,
            format!("unknown field (known: {})", known.join(", ")),
        )),
        None => Ok(()),
    }
}

fn string(map: &mut Map<String, Value>, key: &str) -> Result<Option<String>, ApiError> {
    match map.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::invalid(key, "must be a string")),
    }
}

fn flag(map: &mut Map<String, Value>, key: &str, default: bool) -> Result<bool, ApiError> {
    match map.remove(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(b),
        Some(_) => Err(ApiError::invalid(key, "must be true or false")),
    }
}

fn script(map: &mut Map<String, Value>) -> Result<Option<(MockScript, String)>, ApiError> {
    match map.remove("script") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => {
            let text = v.to_string();
            MockScript::from_json(&text)
                .map(|s| Some((s, text)))
                .map_err(|e| ApiError::invalid("script", e))
        }
    }
}

/// Whether `id` may name a run: 1 to 128 of `A-Z a-z 0-9 . _ : -`.
pub fn valid_run_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
}

impl RunRequest {
    /// Reads a `POST /v1/runs` body.
    pub fn parse(bytes: &[u8]) -> Result<Self, ApiError> {
        let mut map = object(bytes)?;
        only(
            &map,
            &[
                "pack", "input", "runId", "durable", "wait", "script", "events",
            ],
        )?;
        let pack = string(&mut map, "pack")?
            .ok_or_else(|| ApiError::invalid("pack", "missing: name the pack to run"))?;
        let input = match map.remove("input") {
            Some(v) => v.to_string(),
            None => {
                return Err(ApiError::invalid(
                    "input",
                    "missing: the node's input, any JSON value",
                ));
            }
        };
        let run_id = string(&mut map, "runId")?;
        if let Some(id) = &run_id
            && !valid_run_id(id)
        {
            return Err(ApiError::invalid(
                "runId",
                "use 1 to 128 letters, digits, '.', '_', ':', '-'",
            ));
        }
        Ok(Self {
            pack,
            input,
            run_id,
            durable: flag(&mut map, "durable", false)?,
            wait: flag(&mut map, "wait", true)?,
            script: script(&mut map)?,
            events: flag(&mut map, "events", false)?,
        })
    }
}

impl CallBody {
    /// Reads a `POST /v1/call` body.
    pub fn parse(bytes: &[u8]) -> Result<Self, ApiError> {
        let mut map = object(bytes)?;
        only(&map, &["request", "script", "nodeId", "events"])?;
        let request = match map.remove("request") {
            Some(r @ Value::Object(_)) => r,
            Some(_) => return Err(ApiError::invalid("request", "must be a JSON object")),
            None => {
                return Err(ApiError::invalid(
                    "request",
                    "missing: the ctx.callAI request, in wire JSON",
                ));
            }
        };
        let provider = request
            .get("provider")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let node_id = string(&mut map, "nodeId")?;
        if let Some(id) = &node_id
            && (id.is_empty() || id.len() > 256)
        {
            return Err(ApiError::invalid("nodeId", "must be 1 to 256 characters"));
        }
        Ok(Self {
            request: request.to_string(),
            provider,
            script: script(&mut map)?.map(|(s, _)| s),
            node_id,
            events: flag(&mut map, "events", false)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_err(body: &str) -> (String, String) {
        let e = RunRequest::parse(body.as_bytes()).unwrap_err();
        let field = e.details.unwrap()["field"].as_str().unwrap().to_owned();
        (field, e.message)
    }

    #[test]
    fn a_run_request_reads_its_fields() {
        let r = RunRequest::parse(br#"{"pack": "p", "input": "hi", "wait": false}"#).unwrap();
        assert_eq!((r.pack.as_str(), r.input.as_str()), ("p", "\"hi\""));
        assert!(!r.wait && !r.durable && !r.events && r.run_id.is_none());
        let r =
            RunRequest::parse(br#"{"pack": "p", "input": {"a": [1]}, "runId": "r-1"}"#).unwrap();
        assert_eq!(r.input, r#"{"a":[1]}"#);
        assert!(r.wait);
    }

    #[test]
    fn every_refusal_names_its_field() {
        for (body, field) in [
            ("nope", "body"),
            ("[1]", "body"),
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
            assert_eq!(run_err(body).0, field, "{body}");
        }
        let e = CallBody::parse(br#"{"script": []}"#).unwrap_err();
        assert_eq!(e.details.unwrap()["field"], "request");
        let e = CallBody::parse(br#"{"request": "hi"}"#).unwrap_err();
        assert_eq!(e.details.unwrap()["field"], "request");
    }

    #[test]
    fn a_call_body_keeps_the_request_as_sent() {
        let c = CallBody::parse(
            br#"{"request": {"messages": [], "retry": {"maxAttempts": 2.5}, "provider": "x"}}"#,
        )
        .unwrap();
        assert!(c.request.contains("2.5"));
        assert_eq!(c.provider.as_deref(), Some("x"));
    }
}
