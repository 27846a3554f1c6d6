//! The ctx.callAI request: its wire JSON, and the checks that refuse a
//! malformed one with `validation_error` naming the field.

use crate::error::CallError;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The most provider requests RFC 0248 §B lets a caller ask for.
pub const MAX_ATTEMPTS_LIMIT: u32 = 16;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The end user (or the pack speaking for them).
    User,
    /// The model.
    Assistant,
    /// A system instruction inside the conversation.
    System,
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The text.
    pub content: String,
}

impl Message {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
        }
    }
}

/// RFC 0248 §B: the caller's narrowing of the host's retries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryPolicy {
    /// 1..16: the most provider requests this call may make.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Default true; false keeps a truncation retry at the request's maxTokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grow_max_tokens: Option<bool>,
}

/// A validated ctx.callAI request (wire shape: camelCase JSON).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallRequest {
    /// Provider id; the host default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Model id; the provider's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// System instruction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// The conversation, at least one message.
    pub messages: Vec<Message>,
    /// 0..2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Output budget, >= 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    /// A JSON Schema: the call becomes a structured call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<Value>,
    /// RFC 0248 §B.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryPolicy>,
}

impl CallRequest {
    /// Parses and validates the wire JSON of a request.
    ///
    /// `honour_retry` is the host's `callAccounting.retryPolicy` flag: when it
    /// is false the `retry` field is ignored, even when malformed, as an older
    /// host ignores an unknown field. Unknown top-level fields are ignored for
    /// the same reason.
    pub fn from_json(text: &str, honour_retry: bool) -> Result<Self, CallError> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| CallError::validation("request", format!("not valid JSON: {e}")))?;
        Self::from_value(&value, honour_retry)
    }

    /// As [`CallRequest::from_json`], from a parsed value.
    pub fn from_value(value: &Value, honour_retry: bool) -> Result<Self, CallError> {
        let obj = value
            .as_object()
            .ok_or_else(|| CallError::validation("request", "must be a JSON object"))?;
        let request = Self {
            provider: opt_string(obj, "provider")?,
            model: opt_string(obj, "model")?,
            system_prompt: opt_string(obj, "systemPrompt")?,
            messages: messages(obj)?,
            temperature: opt_number(obj, "temperature")?,
            max_tokens: opt_u32(obj, "maxTokens")?,
            stop_sequences: opt_strings(obj, "stopSequences")?,
            response_schema: opt_schema(obj)?,
            retry: if honour_retry { retry(obj)? } else { None },
        };
        request.validate(honour_retry)?;
        Ok(request)
    }

    /// Range checks shared by the JSON and the typed entry. With
    /// `honour_retry` false the `retry` field is dropped unchecked.
    pub fn validate(&self, honour_retry: bool) -> Result<(), CallError> {
        if self.messages.is_empty() {
            return Err(CallError::validation(
                "messages",
                "must hold at least one message",
            ));
        }
        if let Some(t) = self.temperature
            && !(t.is_finite() && (0.0..=2.0).contains(&t))
        {
            return Err(CallError::validation(
                "temperature",
                format!("must be a number 0..2, got {t}"),
            ));
        }
        if self.max_tokens == Some(0) {
            return Err(CallError::validation(
                "maxTokens",
                "must be an integer >= 1, got 0",
            ));
        }
        if let Some(schema) = &self.response_schema {
            crate::engine::schema::check_schema(schema)?;
        }
        if honour_retry
            && let Some(RetryPolicy {
                max_attempts: Some(n),
                ..
            }) = self.retry
            && !(1..=MAX_ATTEMPTS_LIMIT).contains(&n)
        {
            return Err(CallError::validation(
                "retry.maxAttempts",
                format!("must be an integer 1..{MAX_ATTEMPTS_LIMIT}, got {n}"),
            ));
        }
        Ok(())
    }

    /// Whether this is a structured call.
    pub fn is_structured(&self) -> bool {
        self.response_schema.is_some()
    }
}

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

fn opt_string(obj: &Map<String, Value>, key: &str) -> Result<Option<String>, CallError> {
    match present(obj, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(CallError::validation(
            key,
            format!("must be a string, got {}", kind(v)),
        )),
    }
}

fn opt_number(obj: &Map<String, Value>, key: &str) -> Result<Option<f64>, CallError> {
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

fn opt_u32(obj: &Map<String, Value>, key: &str) -> Result<Option<u32>, CallError> {
    present(obj, key)
        .map(|v| integer(v, key, ">= 1"))
        .transpose()
}

fn opt_strings(obj: &Map<String, Value>, key: &str) -> Result<Option<Vec<String>>, CallError> {
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

fn messages(obj: &Map<String, Value>) -> Result<Vec<Message>, CallError> {
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

fn opt_schema(obj: &Map<String, Value>) -> Result<Option<Value>, CallError> {
    match present(obj, "responseSchema") {
        None => Ok(None),
        Some(v @ (Value::Object(_) | Value::Bool(_))) => Ok(Some(v.clone())),
        Some(v) => Err(CallError::validation(
            "responseSchema",
            format!("must be a JSON Schema (an object), got {}", kind(v)),
        )),
    }
}

fn retry(obj: &Map<String, Value>) -> Result<Option<RetryPolicy>, CallError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<CallRequest, CallError> {
        CallRequest::from_value(&v, true)
    }

    fn refused_field(v: Value) -> String {
        let err = parse(v).expect_err("must be refused");
        assert_eq!(err.code, crate::ErrorCode::ValidationError, "{err}");
        err.field().expect("details.field").to_owned()
    }

    fn with_retry(retry: Value) -> Value {
        json!({"messages": [{"role": "user", "content": "hi"}], "retry": retry})
    }

    #[test]
    fn a_full_request_parses() {
        let r = parse(json!({
            "provider": "mock", "model": "m", "systemPrompt": "be brief",
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
            "temperature": 0.5, "maxTokens": 2000, "stopSequences": ["END"],
            "responseSchema": {"type": "object"},
            "retry": {"maxAttempts": 2, "growMaxTokens": false},
            "someFutureField": true
        }))
        .unwrap();
        assert_eq!(r.messages.len(), 2);
        assert_eq!(r.max_tokens, Some(2000));
        assert_eq!(
            r.retry,
            Some(RetryPolicy {
                max_attempts: Some(2),
                grow_max_tokens: Some(false)
            })
        );
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
        ] {
            assert_eq!(
                refused_field(with_retry(json!({ "maxAttempts": bad }))),
                "retry.maxAttempts",
                "maxAttempts {bad}"
            );
        }
    }

    #[test]
    fn malformed_grow_max_tokens_is_refused_naming_the_key() {
        for bad in [json!(null), json!("false"), json!(0)] {
            assert_eq!(
                refused_field(with_retry(json!({ "growMaxTokens": bad }))),
                "retry.growMaxTokens"
            );
        }
    }

    #[test]
    fn a_non_object_retry_is_refused() {
        for bad in [json!(3), json!(null), json!([1]), json!("x")] {
            assert_eq!(refused_field(with_retry(bad)), "retry");
        }
        assert_eq!(
            refused_field(with_retry(json!({"maxAttempt": 1}))),
            "retry.maxAttempt"
        );
    }

    #[test]
    fn limits_of_max_attempts_are_accepted() {
        for ok in [1, 16] {
            let r = parse(with_retry(json!({ "maxAttempts": ok }))).unwrap();
            assert_eq!(r.retry.unwrap().max_attempts, Some(ok));
        }
        let r = parse(with_retry(json!({}))).unwrap();
        assert_eq!(r.retry, Some(RetryPolicy::default()));
    }

    #[test]
    fn retry_is_ignored_even_when_malformed_without_the_flag() {
        let r = CallRequest::from_value(&with_retry(json!({"maxAttempts": 2.5})), false).unwrap();
        assert_eq!(r.retry, None);
        let typed = CallRequest {
            messages: vec![Message::user("hi")],
            retry: Some(RetryPolicy {
                max_attempts: Some(0),
                grow_max_tokens: None,
            }),
            ..Default::default()
        };
        assert!(typed.validate(false).is_ok());
        assert_eq!(
            typed.validate(true).unwrap_err().field(),
            Some("retry.maxAttempts")
        );
    }

    #[test]
    fn other_malformed_fields_are_named() {
        let m = json!([{"role": "user", "content": "hi"}]);
        assert_eq!(refused_field(json!({})), "messages");
        assert_eq!(refused_field(json!({"messages": []})), "messages");
        assert_eq!(refused_field(json!({"messages": "hi"})), "messages");
        assert_eq!(
            refused_field(json!({"messages": [{"role": "bot", "content": "x"}]})),
            "messages[0].role"
        );
        assert_eq!(
            refused_field(json!({"messages": [{"role": "user"}]})),
            "messages[0].content"
        );
        assert_eq!(
            refused_field(json!({"messages": m, "maxTokens": 0})),
            "maxTokens"
        );
        assert_eq!(
            refused_field(json!({"messages": m, "maxTokens": 1.5})),
            "maxTokens"
        );
        assert_eq!(
            refused_field(json!({"messages": m, "temperature": 3})),
            "temperature"
        );
        assert_eq!(
            refused_field(json!({"messages": m, "provider": 1})),
            "provider"
        );
        assert_eq!(
            refused_field(json!({"messages": m, "stopSequences": ["a", 2]})),
            "stopSequences[1]"
        );
        assert_eq!(
            refused_field(json!({"messages": m, "responseSchema": "object"})),
            "responseSchema"
        );
        assert_eq!(
            refused_field(json!({"messages": m, "responseSchema": {"type": 12}})),
            "responseSchema"
        );
        assert_eq!(refused_field(json!([1, 2])), "request");
        let err = CallRequest::from_json("{not json", true).unwrap_err();
        assert_eq!(err.field(), Some("request"));
    }
}
