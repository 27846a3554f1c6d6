//! Reading the request's wire JSON field by field, naming the field that is
//! wrong.

use super::{MAX_ATTEMPTS_LIMIT, Message, RetryPolicy, Role};
use crate::error::CallError;
use serde_json::{Map, Value};

/// A short description of a JSON value's type for error messages.
fn kind(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) if s.len() <= 40 => format!("the string {s:?}"),
        Value::String(_) => "a string".into(),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// A present key whose value is null is malformed: an absent key is how a
/// caller leaves a field out.
fn present<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key)
}

pub(super) fn opt_string(obj: &Map<String, Value>, key: &str) -> Result<Option<String>, CallError> {
    match present(obj, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(CallError::validation(
            key,
            format!("must be a string, got {}", kind(v)),
        )),
    }
}

pub(super) fn opt_number(obj: &Map<String, Value>, key: &str) -> Result<Option<f64>, CallError> {
    match present(obj, key) {
        None => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(v) => Err(CallError::validation(
            key,
            format!("must be a number, got {}", kind(v)),
        )),
    }
}

/// An integer that fits `u32`; `2.5`, `"3"`, `null` and negatives are refused.
fn integer(v: &Value, field: &str, range: &str) -> Result<u32, CallError> {
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| {
            CallError::validation(
                field,
                format!("must be an integer {range}, got {}", kind(v)),
            )
        })
}

pub(super) fn opt_u32(obj: &Map<String, Value>, key: &str) -> Result<Option<u32>, CallError> {
    present(obj, key)
        .map(|v| integer(v, key, ">= 1"))
        .transpose()
}

pub(super) fn opt_strings(
    obj: &Map<String, Value>,
    key: &str,
) -> Result<Option<Vec<String>>, CallError> {
    let Some(v) = present(obj, key) else {
        return Ok(None);
    };
    let items = v.as_array().ok_or_else(|| {
        CallError::validation(key, format!("must be an array of strings, got {}", kind(v)))
    })?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(s) => Ok(s.clone()),
            other => Err(CallError::validation(
                format!("{key}[{i}]"),
                format!("must be a string, got {}", kind(other)),
            )),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

pub(super) fn messages(obj: &Map<String, Value>) -> Result<Vec<Message>, CallError> {
    let v =
        present(obj, "messages").ok_or_else(|| CallError::validation("messages", "is required"))?;
    let items = v.as_array().ok_or_else(|| {
        CallError::validation("messages", format!("must be an array, got {}", kind(v)))
    })?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let field = format!("messages[{i}]");
            let m = item.as_object().ok_or_else(|| {
                CallError::validation(&field, format!("must be an object, got {}", kind(item)))
            })?;
            let role = match m.get("role") {
                Some(Value::String(r)) if r == "user" => Role::User,
                Some(Value::String(r)) if r == "assistant" => Role::Assistant,
                Some(Value::String(r)) if r == "system" => Role::System,
                Some(other) => {
                    return Err(CallError::validation(
                        format!("{field}.role"),
                        format!("must be user, assistant or system, got {}", kind(other)),
                    ));
                }
                None => {
                    return Err(CallError::validation(
                        format!("{field}.role"),
                        "is required",
                    ));
                }
            };
            let content = match m.get("content") {
                Some(Value::String(c)) => c.clone(),
                Some(other) => {
                    return Err(CallError::validation(
                        format!("{field}.content"),
                        format!("must be a string, got {}", kind(other)),
                    ));
                }
                None => {
                    return Err(CallError::validation(
                        format!("{field}.content"),
                        "is required",
                    ));
                }
            };
            Ok(Message { role, content })
        })
        .collect()
}

pub(super) fn opt_schema(obj: &Map<String, Value>) -> Result<Option<Value>, CallError> {
    match present(obj, "responseSchema") {
        None => Ok(None),
        Some(v @ (Value::Object(_) | Value::Bool(_))) => Ok(Some(v.clone())),
        Some(v) => Err(CallError::validation(
            "responseSchema",
            format!("must be a JSON Schema (an object), got {}", kind(v)),
        )),
    }
}

pub(super) fn retry(obj: &Map<String, Value>) -> Result<Option<RetryPolicy>, CallError> {
    let Some(v) = present(obj, "retry") else {
        return Ok(None);
    };
    let r = v.as_object().ok_or_else(|| {
        CallError::validation("retry", format!("must be an object, got {}", kind(v)))
    })?;
    // The policy only narrows: a key this host does not know could be a
    // misspelt narrowing, so it is refused rather than silently widened.
    if let Some(unknown) = r
        .keys()
        .find(|k| *k != "maxAttempts" && *k != "growMaxTokens")
    {
        return Err(CallError::validation(
            format!("retry.{unknown}"),
            "is not a retry policy key (maxAttempts, growMaxTokens)",
        ));
    }
    let range = format!("1..{MAX_ATTEMPTS_LIMIT}");
    let max_attempts = r
        .get("maxAttempts")
        .map(|v| integer(v, "retry.maxAttempts", &range))
        .transpose()?;
    let grow_max_tokens = match r.get("growMaxTokens") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(v) => {
            return Err(CallError::validation(
                "retry.growMaxTokens",
                format!("must be a boolean, got {}", kind(v)),
            ));
        }
    };
    Ok(Some(RetryPolicy {
        max_attempts,
        grow_max_tokens,
    }))
}
