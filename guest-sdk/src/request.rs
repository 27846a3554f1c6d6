//! Building a ctx.callAI request.

use crate::bindings::openwop::callai::types as wit;
use serde_json::{Map, Value, json};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The user (or the pack speaking for them).
    User,
    /// The model.
    Assistant,
    /// A system instruction inside the conversation.
    System,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::System => "system",
        }
    }
}

/// RFC 0248 §B: narrow what the host does for this call. Only honoured when
/// [`crate::call_accounting`] says `retry_policy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retry {
    max_attempts: Option<u32>,
    grow_max_tokens: Option<bool>,
}

impl Retry {
    /// The host's own behaviour (no narrowing).
    pub fn new() -> Self {
        Self::default()
    }

    /// At most `n` provider requests for this call (1..16; 1 turns host
    /// retries off). A value above the host's ceiling is clamped by the host.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }

    /// The cap set, if any.
    pub fn get_max_attempts(&self) -> Option<u32> {
        self.max_attempts
    }

    /// `false`: a truncation retry keeps the request's `max_tokens`.
    pub fn grow_max_tokens(mut self, grow: bool) -> Self {
        self.grow_max_tokens = Some(grow);
        self
    }

    /// Host retries off: one request, no budget growth.
    pub fn off() -> Self {
        Self::new().max_attempts(1).grow_max_tokens(false)
    }
}

/// A ctx.callAI request, built step by step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request {
    provider: Option<String>,
    model: Option<String>,
    system: Option<String>,
    messages: Vec<(Role, String)>,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
    stop: Vec<String>,
    schema: Option<Value>,
    retry: Option<Retry>,
}

impl Request {
    /// An empty request; add at least one message.
    pub fn new() -> Self {
        Self::default()
    }

    /// The provider id (`mock`, `openai`, ...); the host default otherwise.
    pub fn provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = Some(provider.into());
        self
    }

    /// The model id; the provider's default otherwise.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The system instruction.
    pub fn system(mut self, prompt: impl Into<String>) -> Self {
        self.system = Some(prompt.into());
        self
    }

    /// Appends a message.
    pub fn message(mut self, role: Role, content: impl Into<String>) -> Self {
        self.messages.push((role, content.into()));
        self
    }

    /// Appends a user message.
    pub fn user(self, content: impl Into<String>) -> Self {
        self.message(Role::User, content)
    }

    /// Appends an assistant message.
    pub fn assistant(self, content: impl Into<String>) -> Self {
        self.message(Role::Assistant, content)
    }

    /// Sampling temperature, 0..2.
    pub fn temperature(mut self, t: f64) -> Self {
        self.temperature = Some(t);
        self
    }

    /// The output budget.
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = Some(n);
        self
    }

    /// Adds a stop sequence.
    pub fn stop(mut self, sequence: impl Into<String>) -> Self {
        self.stop.push(sequence.into());
        self
    }

    /// A JSON Schema: the call becomes structured and the result carries `data`.
    pub fn schema(mut self, schema: Value) -> Self {
        self.schema = Some(schema);
        self
    }

    /// RFC 0248 §B retry policy.
    pub fn retry(mut self, retry: Retry) -> Self {
        self.retry = Some(retry);
        self
    }

    /// The output budget set, if any.
    pub fn get_max_tokens(&self) -> Option<u32> {
        self.max_tokens
    }

    /// The retry policy set, if any.
    pub fn get_retry(&self) -> Option<Retry> {
        self.retry
    }

    /// Whether a schema is set.
    pub fn is_structured(&self) -> bool {
        self.schema.is_some()
    }

    /// The spec's wire JSON (camelCase), as `call_json` takes it.
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                o.insert(k.into(), v);
            }
        };
        put("provider", self.provider.clone().map(Value::from));
        put("model", self.model.clone().map(Value::from));
        put("systemPrompt", self.system.clone().map(Value::from));
        let messages = self
            .messages
            .iter()
            .map(|(r, c)| json!({"role": r.as_str(), "content": c}))
            .collect();
        put("messages", Some(Value::Array(messages)));
        put("temperature", self.temperature.map(Value::from));
        put("maxTokens", self.max_tokens.map(Value::from));
        put(
            "stopSequences",
            (!self.stop.is_empty()).then(|| Value::from(self.stop.clone())),
        );
        put("responseSchema", self.schema.clone());
        put(
            "retry",
            self.retry.map(|r| {
                let mut m = Map::new();
                if let Some(n) = r.max_attempts {
                    m.insert("maxAttempts".into(), n.into());
                }
                if let Some(g) = r.grow_max_tokens {
                    m.insert("growMaxTokens".into(), g.into());
                }
                Value::Object(m)
            }),
        );
        Value::Object(o)
    }

    pub(crate) fn to_wit(&self) -> wit::CallRequest {
        wit::CallRequest {
            provider: self.provider.clone(),
            model: self.model.clone(),
            system_prompt: self.system.clone(),
            messages: self
                .messages
                .iter()
                .map(|(role, content)| wit::Message {
                    role: match role {
                        Role::User => wit::Role::User,
                        Role::Assistant => wit::Role::Assistant,
                        Role::System => wit::Role::System,
                    },
                    content: content.clone(),
                })
                .collect(),
            temperature: self.temperature,
            max_tokens: self.max_tokens,
            stop_sequences: (!self.stop.is_empty()).then(|| self.stop.clone()),
            response_schema: self.schema.as_ref().map(Value::to_string),
            retry: self.retry.map(|r| wit::RetryPolicy {
                max_attempts: r.max_attempts,
                grow_max_tokens: r.grow_max_tokens,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_json_leaves_out_what_was_not_set() {
        let r = Request::new().user("hi");
        assert_eq!(
            r.to_json(),
            json!({"messages": [{"role": "user", "content": "hi"}]})
        );
    }

    #[test]
    fn wire_json_carries_every_field() {
        let r = Request::new()
            .provider("mock")
            .model("m")
            .system("s")
            .user("u")
            .assistant("a")
            .temperature(0.5)
            .max_tokens(10)
            .stop("END")
            .schema(json!({"type": "object"}))
            .retry(Retry::off());
        assert_eq!(
            r.to_json(),
            json!({"provider": "mock", "model": "m", "systemPrompt": "s",
                   "messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}],
                   "temperature": 0.5, "maxTokens": 10, "stopSequences": ["END"],
                   "responseSchema": {"type": "object"},
                   "retry": {"maxAttempts": 1, "growMaxTokens": false}})
        );
        let w = r.to_wit();
        assert_eq!(w.retry.unwrap().max_attempts, Some(1));
        assert_eq!(w.response_schema.as_deref(), Some(r#"{"type":"object"}"#));
    }
}
