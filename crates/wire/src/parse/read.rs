//! A request's wire JSON read into a [`ParsedRequest`], in one pass, its
//! refusals naming the field that is wrong: what `CallRequest::from_json`
//! and `ParsedRequest::from_json` do.

use super::parsed::ParsedRequest;
use crate::error::CallError;
use crate::request::{CallRequest, RetryField};
use crate::unknown::UnknownField;
use serde::de::IgnoredAny;
use serde_json::Value;

impl CallRequest {
    /// Parses and checks the wire JSON of a request; a refusal is a
    /// `validation_error` whose `details.field` names the key.
    ///
    /// `retry` says whether the host honours the `retry` field (its
    /// `callAccounting.retryPolicy` flag). Unknown top-level fields are ignored
    /// for the same reason. Whole numbers written as decimals (`3.0`, `3e0`)
    /// are integers, as they are to JSON Schema and JavaScript.
    ///
    /// What this checks is the shape; a host checks the `responseSchema`
    /// itself (it alone compiles schemas).
    pub fn from_json(text: &str, retry: RetryField) -> Result<Self, CallError> {
        Self::from_json_naming_unknown(text, retry).map(|(request, _)| request)
    }

    /// [`CallRequest::from_json`], with the top-level fields the spec does
    /// not define (which it ignores), each with the field it looks like.
    pub fn from_json_naming_unknown(
        text: &str,
        retry: RetryField,
    ) -> Result<(Self, Vec<UnknownField>), CallError> {
        request(text)?.check(retry)
    }

    /// As [`CallRequest::from_json`], from a parsed value.
    pub fn from_value(value: &Value, retry: RetryField) -> Result<Self, CallError> {
        let (request, _) = request_value(value)?.check(retry)?;
        Ok(request)
    }
}

impl ParsedRequest {
    /// Reads a request's JSON text (the refusals as
    /// [`CallRequest::from_json`] gives them), to be checked.
    pub fn from_json(text: &str) -> Result<Self, CallError> {
        request(text)
    }
}

/// Parses a request's JSON text. Not JSON is refused naming `request`; a
/// number too large for a float (`1e400`) naming the key that holds it; a
/// value other than an object as `request: must be a JSON object`.
pub(crate) fn request(text: &str) -> Result<ParsedRequest, CallError> {
    serde_json::from_str(text).map_err(|e| refusal(text, &e))
}

/// As [`request`], from a parsed value.
pub(crate) fn request_value(value: &Value) -> Result<ParsedRequest, CallError> {
    use serde::Deserialize;
    ParsedRequest::deserialize(value)
        .map_err(|_| CallError::validation("request", "must be a JSON object"))
}

/// What a request that did not read is refused with. The reader's only
/// data error is a value that is not an object; the rest is syntax.
fn refusal(text: &str, e: &serde_json::Error) -> CallError {
    if e.is_data() {
        return match serde_json::from_str::<IgnoredAny>(text) {
            Ok(_) => CallError::validation("request", "must be a JSON object"),
            Err(syntax) => CallError::validation("request", format!("not valid JSON: {syntax}")),
        };
    }
    if e.to_string().starts_with("number out of range") {
        // Only on failure: read again, tracking where the reader was.
        let mut de = serde_json::Deserializer::from_str(text);
        let tracked = serde_path_to_error::deserialize::<_, Value>(&mut de);
        if let Some(field) = tracked.err().and_then(|t| field_name(t.path())) {
            return CallError::validation(field, format!("is not a usable number ({e})"));
        }
    }
    CallError::validation("request", format!("not valid JSON: {e}"))
}

/// `retry.maxAttempts`, `messages[0].content`; `None` at the top level.
fn field_name(path: &serde_path_to_error::Path) -> Option<String> {
    let mut name = String::new();
    for segment in path.iter() {
        match segment {
            serde_path_to_error::Segment::Seq { index } => name.push_str(&format!("[{index}]")),
            serde_path_to_error::Segment::Map { key } => {
                if !name.is_empty() {
                    name.push('.');
                }
                name.push_str(key);
            }
            _ => {}
        }
    }
    (!name.is_empty()).then_some(name)
}
