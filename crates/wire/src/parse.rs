//! Reading a request's wire JSON field by field, naming the field that is
//! wrong.

use crate::error::CallError;
use crate::request::{CallRequest, MAX_ATTEMPTS, Message, RetryField, RetryPolicy, Role};
use serde_json::{Map, Value};

/// Parses JSON text. A number too large for a float (`1e400`) is refused
/// naming the key that holds it, not the whole request.
pub(crate) fn json(text: &str) -> Result<Value, CallError> {
    serde_json::from_str(text).map_err(|e| {
        // Only on failure: parse again, tracking where the parser was.
        let mut de = serde_json::Deserializer::from_str(text);
        let out_of_range = e.to_string().starts_with("number out of range");
        let field = match serde_path_to_error::deserialize::<_, Value>(&mut de) {
            Err(tracked) if out_of_range => field_name(tracked.path()),
            _ => None,
        };
        match field {
            Some(field) => CallError::validation(field, format!("is not a usable number ({e})")),
            None => CallError::validation("request", format!("not valid JSON: {e}")),
        }
    })
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

/// A short description of a JSON value for error messages; never more than
/// a few dozen characters of the caller's text.
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

/// The whole number `v` stands for: `3`, `3.0` and `3e0` alike; `None` for
/// a fraction, a non-number, or a value outside `u32`.
fn whole_u32(v: &Value) -> Option<u32> {
    let n = v.as_number()?;
    if let Some(u) = n.as_u64() {
        return u32::try_from(u).ok();
    }
    let f = n.as_f64()?;
    (f.is_finite() && f.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&f))
        .then_some(f as u32)
}

/// An integer in `range`'s sense; `2.5`, `"3"`, `null` and negatives are refused.
fn integer(v: &Value, field: &str, range: &str) -> Result<u32, CallError> {
    whole_u32(v).ok_or_else(|| {
        CallError::validation(
            field,
            format!("must be an integer {range}, got {}", kind(v)),
        )
    })
}

fn opt_string(obj: &Map<String, Value>, key: &str) -> Result<Option<String>, CallError> {
    match obj.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(CallError::validation(
            key,
            format!("must be a string, got {}", kind(v)),
        )),
    }
}

fn opt_number(obj: &Map<String, Value>, key: &str) -> Result<Option<f64>, CallError> {
    match obj.get(key) {
        None => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(v) => Err(CallError::validation(
            key,
            format!("must be a number, got {}", kind(v)),
        )),
    }
}

fn opt_strings(obj: &Map<String, Value>, key: &str) -> Result<Option<Vec<String>>, CallError> {
    let Some(v) = obj.get(key) else {
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

/// A string field of a message object, required.
fn message_text(m: &Map<String, Value>, field: &str, key: &str) -> Result<String, CallError> {
    match m.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(CallError::validation(
            format!("{field}.{key}"),
            format!("must be a string, got {}", kind(other)),
        )),
        None => Err(CallError::validation(
            format!("{field}.{key}"),
            "is required",
        )),
    }
}

fn messages(obj: &Map<String, Value>) -> Result<Vec<Message>, CallError> {
    let v = obj
        .get("messages")
        .ok_or_else(|| CallError::validation("messages", "is required"))?;
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
            let role = match message_text(m, &field, "role")?.as_str() {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                "system" => Role::System,
                _ => {
                    return Err(CallError::validation(
                        format!("{field}.role"),
                        format!(
                            "must be user, assistant or system, got {}",
                            kind(&m["role"])
                        ),
                    ));
                }
            };
            Ok(Message::new(role, message_text(m, &field, "content")?))
        })
        .collect()
}

fn opt_schema(obj: &Map<String, Value>) -> Result<Option<Value>, CallError> {
    match obj.get("responseSchema") {
        None => Ok(None),
        Some(v @ (Value::Object(_) | Value::Bool(_))) => Ok(Some(v.clone())),
        Some(v) => Err(CallError::validation(
            "responseSchema",
            format!("must be a JSON Schema (an object), got {}", kind(v)),
        )),
    }
}

fn retry(obj: &Map<String, Value>) -> Result<Option<RetryPolicy>, CallError> {
    let Some(v) = obj.get("retry") else {
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
    let range = format!("1..{MAX_ATTEMPTS}");
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

/// The request in `value`, field by field (ranges are checked by the caller).
pub(crate) fn request(value: &Value, retry_field: RetryField) -> Result<CallRequest, CallError> {
    let obj = value
        .as_object()
        .ok_or_else(|| CallError::validation("request", "must be a JSON object"))?;
    Ok(CallRequest {
        provider: opt_string(obj, "provider")?,
        model: opt_string(obj, "model")?,
        system_prompt: opt_string(obj, "systemPrompt")?,
        messages: messages(obj)?,
        temperature: opt_number(obj, "temperature")?,
        max_tokens: obj
            .get("maxTokens")
            .map(|v| integer(v, "maxTokens", ">= 1"))
            .transpose()?,
        stop_sequences: opt_strings(obj, "stopSequences")?,
        response_schema: opt_schema(obj)?,
        retry: match retry_field {
            RetryField::Honoured => retry(obj)?,
            RetryField::Ignored => None,
        },
    })
}

#[cfg(test)]
mod tests {
    use crate::{CallRequest, RetryField};
    use serde_json::{Value, json};

    fn refused_field(v: Value) -> String {
        let err = CallRequest::from_value(&v, RetryField::Honoured).expect_err("must be refused");
        assert_eq!(err.code, crate::ErrorCode::ValidationError, "{err}");
        err.field().expect("details.field").to_owned()
    }

    fn with_retry(retry: Value) -> Value {
        json!({"messages": [{"role": "user", "content": "hi"}], "retry": retry})
    }

    #[test]
    fn a_full_request_parses_and_ignores_unknown_top_level_fields() {
        let r = CallRequest::from_value(
            &json!({
                "provider": "mock", "model": "m", "systemPrompt": "be brief",
                "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
                "temperature": 0.5, "maxTokens": 2000, "stopSequences": ["END"],
                "responseSchema": {"type": "object"},
                "retry": {"maxAttempts": 2, "growMaxTokens": false},
                "someFutureField": true
            }), RetryField::Honoured)
        .unwrap();
        assert_eq!(r.messages.len(), 2);
        assert_eq!(r.max_tokens, Some(2000));
        assert_eq!(r.retry.unwrap().max_attempts, Some(2));
        assert!(r.is_structured());
    }

    #[test]
    fn malformed_max_attempts_is_refused_naming_the_key() {
        for bad in [
            json!(0),
            json!(17),
            json!(2.5),
            json!("3"),
            json!(null),
            json!(-1),
            json!(16.5),
            json!(1e10),
        ] {
            assert_eq!(
                refused_field(with_retry(json!({ "maxAttempts": bad }))),
                "retry.maxAttempts",
                "maxAttempts {bad}"
            );
        }
    }

    #[test]
    fn whole_numbers_written_as_decimals_are_integers() {
        for text in ["1.0", "3e0", "16.0", "1.6e1", "2.0E0"] {
            let request = format!(
                r#"{{"messages": [{{"role": "user", "content": "hi"}}], "maxTokens": 100.0,
                    "retry": {{"maxAttempts": {text}}}}}"#
            );
            let r = CallRequest::from_json(&request, RetryField::Honoured)
                .unwrap_or_else(|e| panic!("{text}: {e}"));
            let expected: f64 = text.parse().unwrap();
            assert_eq!(
                r.retry.unwrap().max_attempts,
                Some(expected as u32),
                "{text}"
            );
            assert_eq!(r.max_tokens, Some(100));
        }
    }

    #[test]
    fn a_number_too_large_for_a_float_names_its_key() {
        for (text, field) in [
            (
                r#"{"messages": [{"role": "user", "content": "hi"}], "retry": {"maxAttempts": 1e400}}"#,
                "retry.maxAttempts",
            ),
            (
                r#"{"messages": [{"role": "user", "content": "hi"}], "maxTokens": -1e999}"#,
                "maxTokens",
            ),
            (
                r#"{"messages": [{"role": "user", "content": "hi"}], "temperature": 1e400}"#,
                "temperature",
            ),
        ] {
            let err = CallRequest::from_json(text, RetryField::Honoured).unwrap_err();
            assert_eq!(err.field(), Some(field), "{err}");
        }
        let err = CallRequest::from_json(r#"{"messages": ["#, RetryField::Honoured).unwrap_err();
        assert_eq!(err.field(), Some("request"));
        assert!(err.message.contains("not valid JSON"), "{err}");
    }

    #[test]
    fn malformed_grow_max_tokens_and_retry_are_refused() {
        for bad in [json!(null), json!("false"), json!(0)] {
            assert_eq!(
                refused_field(with_retry(json!({ "growMaxTokens": bad }))),
                "retry.growMaxTokens"
            );
        }
        for bad in [json!(3), json!(null), json!([1]), json!("x")] {
            assert_eq!(refused_field(with_retry(bad)), "retry");
        }
        assert_eq!(
            refused_field(with_retry(json!({"maxAttempt": 1}))),
            "retry.maxAttempt"
        );
    }

    #[test]
    fn the_retry_field_is_ignored_when_not_honoured() {
        let v = with_retry(json!({"maxAttempts": 2.5}));
        assert_eq!(
            CallRequest::from_value(&v, RetryField::Ignored)
                .unwrap()
                .retry,
            None
        );
    }

    #[test]
    fn other_fields_are_refused_by_name() {
        for (v, field) in [
            (json!({}), "messages"),
            (json!({"messages": []}), "messages"),
            (json!({"messages": "hi"}), "messages"),
            (json!({"messages": [3]}), "messages[0]"),
            (json!({"messages": [{"content": "x"}]}), "messages[0].role"),
            (
                json!({"messages": [{"role": "robot", "content": "x"}]}),
                "messages[0].role",
            ),
            (
                json!({"messages": [{"role": "user"}]}),
                "messages[0].content",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "temperature": 3}),
                "temperature",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}),
                "temperature",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "maxTokens": 0}),
                "maxTokens",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "maxTokens": 1.5}),
                "maxTokens",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "stopSequences": ["a", 1]}),
                "stopSequences[1]",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "responseSchema": "object"}),
                "responseSchema",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "provider": 1}),
                "provider",
            ),
            (json!([1]), "request"),
        ] {
            assert_eq!(refused_field(v.clone()), field, "{v}");
        }
    }
}
