//! The ctx.callAI request and its RFC 0248 §B retry policy.

use crate::error::CallError;
use crate::image::Image;
use crate::tools::{Tool, ToolCall, ToolChoice};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The most provider requests RFC 0248 §B lets one call ask for (`1..=16`).
pub const MAX_ATTEMPTS: u32 = 16;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The end user (or the pack speaking for them).
    User,
    /// The model.
    Assistant,
    /// A system instruction inside the conversation.
    System,
    /// A tool's result, answering one of the assistant's tool calls.
    Tool,
}

impl Role {
    /// `user`, `assistant`, `system` or `tool`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::System => "system",
            Self::Tool => "tool",
        }
    }
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The text (an assistant's text beside its tool calls may be empty).
    #[serde(default)]
    pub content: String,
    /// An assistant's tool calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// A tool result's call id: which of the assistant's calls it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// A user's images, after its text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
}

impl Message {
    /// A message from `role`.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            images: Vec::new(),
        }
    }

    /// A user's message with `images` after its text.
    pub fn user_with_images(content: impl Into<String>, images: Vec<Image>) -> Self {
        Self {
            images,
            ..Self::new(Role::User, content)
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }

    /// An assistant's turn that calls tools (its text may be empty).
    pub fn tool_calls(content: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        Self {
            tool_calls: calls,
            ..Self::new(Role::Assistant, content)
        }
    }

    /// A tool's result, answering the call `call_id`.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            tool_call_id: Some(call_id.into()),
            ..Self::new(Role::Tool, content)
        }
    }
}

/// RFC 0248 §B: the caller's narrowing of the host's retries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryPolicy {
    /// `1..=16`: the most provider requests this call may make.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Default true; false keeps a truncation retry at the request's maxTokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grow_max_tokens: Option<bool>,
}

impl RetryPolicy {
    /// Host retries off: one request, no budget growth.
    pub const OFF: Self = Self {
        max_attempts: Some(1),
        grow_max_tokens: Some(false),
    };

    /// Refuses a `maxAttempts` outside `1..=16` (§B.5), naming the key.
    pub fn check(&self) -> Result<(), CallError> {
        match self.max_attempts {
            Some(n) if !(1..=MAX_ATTEMPTS).contains(&n) => Err(CallError::validation(
                "retry.maxAttempts",
                format!("must be an integer 1..{MAX_ATTEMPTS}, got {n}"),
            )),
            _ => Ok(()),
        }
    }
}

/// A ctx.callAI request (wire shape: camelCase JSON).
///
/// Serialising a request gives its canonical JSON: fields in a fixed order,
/// object keys sorted, absent fields left out. Two requests that differ only
/// in key order serialise the same.
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
    /// `0..=2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Output budget, `>= 1`.
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
    /// The tools the model may call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    /// Whether and which tool the model must call (`auto` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// `false`: at most one tool call per answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// The field a drop-in's client sent its token limit in, for the
    /// provider to keep where its config leaves the field to the model
    /// (`maxTokensField = "auto"`). Not part of the request's JSON.
    #[serde(skip)]
    pub token_limit_field: Option<TokenLimitField>,
    /// The prompt caching a drop-in's client asked for (`cache_control`),
    /// for a provider that takes it. Not part of the request's JSON.
    #[serde(skip)]
    pub prompt_cache: Option<std::sync::Arc<crate::prompt_cache::PromptCache>>,
    /// The extended thinking a drop-in's client asked for (`thinking`) and
    /// its conversation's thinking blocks, for a provider that takes them.
    /// Not part of the request's JSON.
    #[serde(skip)]
    pub thinking: Option<std::sync::Arc<crate::thinking::Thinking>>,
    /// An embedding call's input (`POST /v1/embeddings`): the provider is
    /// asked for its vectors instead of a completion. Not part of the
    /// request's JSON.
    #[serde(skip)]
    pub embedding: Option<std::sync::Arc<crate::embedding::Embedding>>,
    /// How much a reasoning model reasons (`low`, `medium`, `high`, …: the
    /// Responses API's `reasoning.effort`, Chat Completions'
    /// `reasoning_effort`), for a target whose model takes it. Not part of
    /// the request's JSON.
    #[serde(skip)]
    pub reasoning_effort: Option<String>,
}

/// The field a client sent its token limit in (OpenAI's two spellings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenLimitField {
    /// `max_tokens`.
    MaxTokens,
    /// `max_completion_tokens`.
    MaxCompletionTokens,
}

/// Whether a host reads a request's `retry` (RFC 0248 §B): its
/// `callAccounting.retryPolicy` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryField {
    /// `retry` is read, and a malformed one refused (§B.5).
    Honoured,
    /// `retry` is ignored, even when malformed, as an older host ignores an
    /// unknown field.
    Ignored,
}

impl RetryField {
    /// The handling a host advertising `retryPolicy: flag` gives `retry`.
    pub fn advertised(flag: bool) -> Self {
        if flag { Self::Honoured } else { Self::Ignored }
    }
}

impl CallRequest {
    /// The range checks of a request that is already typed (the host's
    /// typed entry): messages, temperature, maxTokens and, when honoured,
    /// `retry`. With [`RetryField::Ignored`] the policy is left unchecked.
    pub fn check(&self, retry: RetryField) -> Result<(), CallError> {
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
        if retry == RetryField::Honoured
            && let Some(policy) = &self.retry
        {
            policy.check()?;
        }
        for (i, m) in self.messages.iter().enumerate() {
            check_message(i, m)?;
        }
        crate::tools::check(self.tools.as_deref(), self.tool_choice.as_ref())
    }

    /// Whether the request offers tools.
    pub fn offers_tools(&self) -> bool {
        self.tools.as_ref().is_some_and(|t| !t.is_empty())
    }

    /// Whether this is a structured call.
    pub fn is_structured(&self) -> bool {
        self.response_schema.is_some()
    }

    /// The canonical JSON value of the request (sorted keys).
    pub fn canonical(&self) -> Value {
        serde_json::to_value(self).expect("a CallRequest always serialises")
    }
}

/// A tool call belongs to an assistant, a call id to a tool's result.
fn check_message(i: usize, m: &Message) -> Result<(), CallError> {
    let field = |key: &str| format!("messages[{i}].{key}");
    if !m.images.is_empty() && m.role != Role::User {
        return Err(CallError::validation(
            field("images"),
            format!(
                "only a user's message carries images, not a {}'s",
                m.role.as_str()
            ),
        ));
    }
    for (j, image) in m.images.iter().enumerate() {
        image.check(&field(&format!("images[{j}]")))?;
    }
    if !m.tool_calls.is_empty() && m.role != Role::Assistant {
        return Err(CallError::validation(
            field("toolCalls"),
            format!(
                "only an assistant's message calls tools, not a {}'s",
                m.role.as_str()
            ),
        ));
    }
    match (m.role, &m.tool_call_id) {
        (Role::Tool, None) => Err(CallError::validation(
            field("toolCallId"),
            "is required on a tool's result: it names the call it answers",
        )),
        (Role::Tool, Some(_)) | (_, None) => Ok(()),
        (role, Some(_)) => Err(CallError::validation(
            field("toolCallId"),
            format!(
                "belongs on a tool's result, not a {}'s message",
                role.as_str()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_change_the_canonical_form() {
        let a = CallRequest::from_json(
            r#"{"messages": [{"role": "user", "content": "x"}],
                "responseSchema": {"type": "object", "required": ["a"]}}"#,
            RetryField::Honoured,
        )
        .unwrap();
        let b = CallRequest::from_json(
            r#"{"responseSchema": {"required": ["a"], "type": "object"},
                "messages": [{"content": "x", "role": "user"}]}"#,
            RetryField::Honoured,
        )
        .unwrap();
        assert_eq!(a, b);
        let text = serde_json::to_string(&a).unwrap();
        assert_eq!(text, serde_json::to_string(&b).unwrap());
        // Object keys come out sorted (serde_json without preserve_order).
        assert!(
            text.contains(r#"{"required":["a"],"type":"object"}"#),
            "{text}"
        );
        assert_eq!(
            a.canonical()["messages"][0],
            json!({"role": "user", "content": "x"})
        );
    }

    #[test]
    fn the_policy_off_is_one_request_without_growth() {
        assert_eq!(
            serde_json::to_value(RetryPolicy::OFF).unwrap(),
            json!({"maxAttempts": 1, "growMaxTokens": false})
        );
        assert!(RetryPolicy::OFF.check().is_ok());
        let over = RetryPolicy {
            max_attempts: Some(17),
            ..RetryPolicy::default()
        };
        assert_eq!(over.check().unwrap_err().field(), Some("retry.maxAttempts"));
    }
}
