//! Building a ctx.callAI request.

use callai_wire::{
    CallRequest, Image, MAX_ATTEMPTS, Message, RetryPolicy, Role, Tool, ToolCall, ToolChoice,
};
use serde_json::Value;
use std::fmt;

/// RFC 0248 §B: narrow what the host does for one call. Only honoured when
/// [`crate::call_accounting`] says `retry_policy`. Checked when built: a
/// `max_attempts` outside `1..=16` is refused here, not by the host.
///
/// ```
/// use callai_sdk::Retry;
///
/// let retry = Retry::new().max_attempts(2)?.grow_max_tokens(false);
/// assert_eq!(retry.attempt_cap(), Some(2));
/// assert!(Retry::new().max_attempts(17).is_err());
/// # Ok::<(), callai_sdk::RetryError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retry(RetryPolicy);

/// A `max_attempts` outside `1..=16`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryError {
    /// The value given.
    pub max_attempts: u32,
}

impl fmt::Display for RetryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "retry.maxAttempts must be 1..{MAX_ATTEMPTS}, got {}",
            self.max_attempts
        )
    }
}

impl std::error::Error for RetryError {}

impl Retry {
    /// The host's own behaviour (no narrowing).
    pub fn new() -> Self {
        Self::default()
    }

    /// Host retries off: one request, no budget growth.
    pub fn off() -> Self {
        Self(RetryPolicy::OFF)
    }

    /// At most `n` provider requests for this call (`1..=16`; 1 turns host
    /// retries off). A value above the host's ceiling is clamped by the host.
    pub fn max_attempts(mut self, n: u32) -> Result<Self, RetryError> {
        if !(1..=MAX_ATTEMPTS).contains(&n) {
            return Err(RetryError { max_attempts: n });
        }
        self.0.max_attempts = Some(n);
        Ok(self)
    }

    /// `false`: a truncation retry keeps the request's `max_tokens`.
    pub fn grow_max_tokens(mut self, grow: bool) -> Self {
        self.0.grow_max_tokens = Some(grow);
        self
    }

    /// The cap set, if any.
    pub fn attempt_cap(&self) -> Option<u32> {
        self.0.max_attempts
    }

    /// Whether truncation retries may grow the budget (`None`: the host's default, yes).
    pub fn grows_max_tokens(&self) -> Option<bool> {
        self.0.grow_max_tokens
    }
}

/// A ctx.callAI request, built step by step.
///
/// ```
/// use callai_sdk::{Request, Retry};
/// use serde_json::json;
///
/// let request = Request::new()
///     .system("You write short scenes.")
///     .user("A lighthouse at dusk.")
///     .max_tokens(2000)
///     .schema(json!({"type": "object", "required": ["scene"]}))
///     .retry(Retry::off());
/// assert_eq!(request.to_json()["retry"], json!({"maxAttempts": 1, "growMaxTokens": false}));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request(CallRequest);

impl Request {
    /// An empty request; add at least one message.
    pub fn new() -> Self {
        Self::default()
    }

    /// The provider (`mock`, `openai`, a name the host configured); the
    /// host default otherwise.
    pub fn provider(mut self, provider: impl Into<String>) -> Self {
        self.0.provider = Some(provider.into());
        self
    }

    /// The model id; the provider's default otherwise.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.0.model = Some(model.into());
        self
    }

    /// The system instruction.
    pub fn system(mut self, prompt: impl Into<String>) -> Self {
        self.0.system_prompt = Some(prompt.into());
        self
    }

    /// Appends a message.
    pub fn message(mut self, role: Role, content: impl Into<String>) -> Self {
        self.0.messages.push(Message::new(role, content));
        self
    }

    /// Appends a user message.
    pub fn user(self, content: impl Into<String>) -> Self {
        self.message(Role::User, content)
    }

    /// Appends a user message with `images` after its text (each an
    /// `https://` URL or a `data:image/…;base64,…` URL): for a model that
    /// sees, on a provider whose section does not say `vision = false`.
    pub fn user_with_images(mut self, content: impl Into<String>, images: Vec<Image>) -> Self {
        self.0
            .messages
            .push(Message::user_with_images(content, images));
        self
    }

    /// Appends an assistant message.
    pub fn assistant(self, content: impl Into<String>) -> Self {
        self.message(Role::Assistant, content)
    }

    /// Sampling temperature, 0..2.
    pub fn temperature(mut self, t: f64) -> Self {
        self.0.temperature = Some(t);
        self
    }

    /// The output budget.
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.0.max_tokens = Some(n);
        self
    }

    /// Adds a stop sequence.
    pub fn stop(mut self, sequence: impl Into<String>) -> Self {
        self.0
            .stop_sequences
            .get_or_insert_with(Vec::new)
            .push(sequence.into());
        self
    }

    /// A JSON Schema: the call becomes structured and the result carries `data`.
    pub fn schema(mut self, schema: Value) -> Self {
        self.0.response_schema = Some(schema);
        self
    }

    /// RFC 0248 §B retry policy.
    pub fn retry(mut self, retry: Retry) -> Self {
        self.0.retry = Some(retry.0);
        self
    }

    /// Offers the model a tool (see [`Tool::new`]); its calls come back
    /// validated against the tool's `parameters` ([`Response::tool_calls`]).
    ///
    /// [`Response::tool_calls`]: crate::Response::tool_calls
    pub fn tool(mut self, tool: Tool) -> Self {
        self.0.tools.get_or_insert_with(Vec::new).push(tool);
        self
    }

    /// Whether and which tool the model must call (`auto` otherwise). A
    /// forced call is structured output: `attempts.structuredOutput` is
    /// `native`.
    pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
        self.0.tool_choice = Some(choice);
        self
    }

    /// `false`: at most one tool call per answer.
    pub fn parallel_tool_calls(mut self, allowed: bool) -> Self {
        self.0.parallel_tool_calls = Some(allowed);
        self
    }

    /// Appends the assistant's turn that called `calls` (with its text, if
    /// any): what a tool loop sends back before the tools' results.
    pub fn tool_calls(mut self, content: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        self.0.messages.push(Message::tool_calls(content, calls));
        self
    }

    /// Appends a tool's result, answering the call `call_id`.
    pub fn tool_result(mut self, call_id: impl Into<String>, content: impl Into<String>) -> Self {
        self.0.messages.push(Message::tool_result(call_id, content));
        self
    }

    /// Whether the request carries what only the JSON entry carries (tools,
    /// tool calls, tool results, images): `callai:pack@0.1.0`'s typed
    /// record predates them.
    pub(crate) fn needs_json(&self) -> bool {
        self.0.tools.is_some()
            || self.0.tool_choice.is_some()
            || self.0.parallel_tool_calls.is_some()
            || self
                .0
                .messages
                .iter()
                .any(|m| !m.tool_calls.is_empty() || m.role == Role::Tool || !m.images.is_empty())
    }

    /// The output budget set, if any.
    pub fn requested_max_tokens(&self) -> Option<u32> {
        self.0.max_tokens
    }

    /// The retry policy set, if any.
    pub fn requested_retry(&self) -> Option<Retry> {
        self.0.retry.map(Retry)
    }

    /// Whether a schema is set.
    pub fn is_structured(&self) -> bool {
        self.0.is_structured()
    }

    /// The request as its wire type.
    pub fn as_wire(&self) -> &CallRequest {
        &self.0
    }

    /// The spec's wire JSON (camelCase), as [`crate::call_json`] takes it.
    pub fn to_json(&self) -> Value {
        self.0.canonical()
    }
}

impl From<CallRequest> for Request {
    fn from(request: CallRequest) -> Self {
        Self(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    }

    #[test]
    fn images_go_in_a_user_message_and_through_the_json_entry() {
        let plain = Request::new().user("hi");
        assert!(!plain.needs_json());
        let url = "data:image/png;base64,iVBORw0KGgo=";
        let r = Request::new().user_with_images("what is it?", vec![Image::new(url)]);
        assert!(r.needs_json(), "the typed record has no images");
        assert_eq!(
            r.to_json(),
            json!({"messages": [{"role": "user", "content": "what is it?",
                                 "images": [{"url": url}]}]})
        );
    }

    #[test]
    fn a_retry_out_of_range_is_refused_when_built() {
        for n in [0, 17, 1000] {
            let e = Retry::new().max_attempts(n).unwrap_err();
            assert_eq!(e.max_attempts, n);
            assert!(e.to_string().contains("1..16"), "{e}");
        }
        assert_eq!(
            Retry::new().max_attempts(16).unwrap().attempt_cap(),
            Some(16)
        );
    }
}
