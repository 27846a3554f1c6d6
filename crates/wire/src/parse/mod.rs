//! Reading a request's wire JSON straight into its types, naming the field
//! that is wrong: one pass over the text, no JSON tree of the request
//! (only its `responseSchema`, which is the caller's own JSON).

mod shape;
mod visit;

use crate::error::CallError;
use crate::request::{CallRequest, RetryField, RetryPolicy};
use crate::unknown::UnknownField;
use serde::de::{DeserializeSeed, IgnoredAny};
use serde_json::Value;

/// A ctx.callAI request as read from its wire JSON, before the host's
/// checks: each field read into its type or refused, naming it.
///
/// It deserializes from any JSON object (a refused field is kept, not a
/// serde error), so a body that carries a request (`POST /v1/call`) reads
/// it in the same pass as the rest; [`ParsedRequest::check`] then says
/// what the host makes of it. A value that is not an object is serde's
/// `invalid type: ..., expected a map`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedRequest {
    /// The well-shaped fields.
    request: CallRequest,
    /// Whether `messages` was sent.
    has_messages: bool,
    /// The refused fields, each with its refusal (empty for a request of
    /// the right shape: nothing is allocated for it).
    refused: Vec<(visit::Field, CallError)>,
    /// `retry`, read whether or not the host honours it.
    retry: Option<Result<RetryPolicy, CallError>>,
    /// The top-level keys that are none of the spec's.
    unknown: Vec<String>,
}

impl ParsedRequest {
    /// The request, or its first refusal: a field of the wrong shape (in
    /// the order the spec lists them), then `retry` (when `retry` says the
    /// host honours it; an ignored `retry` is dropped, malformed or not),
    /// then the ranges. With it, the top-level fields the spec does not
    /// define, each with the field it looks like, in byte order.
    pub fn check(self, retry: RetryField) -> Result<(CallRequest, Vec<UnknownField>), CallError> {
        let Self {
            mut request,
            has_messages,
            refused,
            retry: policy,
            unknown,
        } = self;
        let mut refused = refused;
        if !has_messages {
            let missing = CallError::validation("messages", "is required");
            refused.push((visit::Field::Messages, missing));
        }
        if let Some((_, e)) = refused.into_iter().min_by_key(|(field, _)| *field) {
            return Err(e);
        }
        request.retry = match (retry, policy) {
            (RetryField::Honoured, Some(policy)) => Some(policy?),
            _ => None,
        };
        request.check(retry)?;
        Ok((request, crate::unknown::named(unknown)))
    }

    /// A request a server built in its types (a drop-in endpoint's mapping
    /// of another API's request), with the `retry` it read: checked as one
    /// read from JSON is, its schema's shape too (a schema is an object or
    /// a boolean).
    pub fn typed(mut request: CallRequest, retry: Option<ParsedRetry>) -> Self {
        let mut refused = Vec::new();
        if let Some(schema) = &request.response_schema
            && !(schema.is_object() || schema.is_boolean())
        {
            refused.push((
                visit::Field::ResponseSchema,
                CallError::validation(
                    "responseSchema",
                    format!(
                        "must be a JSON Schema (an object), got {}",
                        shape::Kind::of_value(schema)
                    ),
                ),
            ));
            request.response_schema = None;
        }
        request.retry = None;
        Self {
            request,
            has_messages: true,
            refused,
            retry: retry.map(|r| r.0),
            unknown: Vec::new(),
        }
    }

    /// Reads a request's JSON text (the refusals as
    /// [`CallRequest::from_json`] gives them), to be checked.
    pub fn from_json(text: &str) -> Result<Self, CallError> {
        request(text)
    }

    /// The fields read so far that have their shape (for the host's size
    /// limit, counted before the checks).
    pub fn request(&self) -> &CallRequest {
        &self.request
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

/// Reads `retry` alone (the drop-ins' `callai.retry`): the policy, or its
/// refusal naming `retry.KEY` as a request's does.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedRetry(pub Result<RetryPolicy, CallError>);

impl<'de> serde::Deserialize<'de> for ParsedRetry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        shape::Shape(visit::RetryShape).deserialize(d).map(Self)
    }
}

#[cfg(test)]
mod tests;
