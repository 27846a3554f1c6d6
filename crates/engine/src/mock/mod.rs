//! The built-in mock provider (the conformance mock): a script of replies,
//! one per provider request, consumed in order.
//!
//! ```json
//! [{"content": "{\"scene\": \"...", "finishReason": "length", "outputTokens": 5000},
//!  {"content": "{\"scene\": \"ok\"}", "finishReason": "stop", "outputTokens": 1800, "inputTokens": 120},
//!  {"error": {"status": 503, "message": "overloaded"}}]
//! ```
//!
//! Omitting `outputTokens` means the provider reported no usage. Each
//! reported `outputTokens` is clamped to that request's `maxTokens`. A
//! request past the end of the script fails at once.
//!
//! A caller that brings no script gets [`MockProvider::unscripted`]: every
//! text request answered with [`MockScript::DEFAULT_JSON`]'s reply, every
//! structured one with a small instance its schema accepts.

mod instance;
mod tool_calls;

use instance::instance;
pub use tool_calls::MockToolCall;

use crate::provider::{
    BoxFuture, FailureKind, Provider, ProviderFailure, ProviderReply, ProviderRequest, StopReason,
};
use callai_wire::StructuredOutput;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Mutex;
use std::time::Duration;

/// The model id the mock answers as, unless the request names one.
pub const MOCK_MODEL: &str = "mock-1";

/// `finishReason` of a scripted reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MockFinish {
    /// A clean stop.
    Stop,
    /// Truncated by `maxTokens`.
    Length,
    /// An explicit refusal.
    Refusal,
    /// A content filter stop.
    ContentFilter,
}

/// A scripted reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MockReply {
    /// The reply text (empty when absent: a reply that only calls tools).
    #[serde(default)]
    pub content: String,
    /// The tool calls of the reply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<MockToolCall>,
    /// Defaults to `stop`.
    #[serde(default = "stop")]
    pub finish_reason: MockFinish,
    /// Reported output tokens; absent = no usage reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u32>,
    /// Reported input tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u32>,
}

fn stop() -> MockFinish {
    MockFinish::Stop
}

/// A scripted transport or server failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MockError {
    /// The HTTP status it stands for (429 and 5xx are transient).
    pub status: u16,
    /// The provider's message.
    #[serde(default)]
    pub message: String,
}

/// One entry of the script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ScriptEntry {
    /// `{"error": {...}}`
    Error {
        /// The failure.
        error: MockError,
    },
    /// A reply.
    Reply(MockReply),
}

/// A mock script: one entry per provider request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MockScript(pub Vec<ScriptEntry>);

/// A script that cannot be used, naming the entry and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("mock script: {0}")]
pub struct ScriptError(pub String);

impl MockScript {
    /// The script of text `text` as far as a resumed run `run` has not yet
    /// used it: the replies its committed calls consumed (one per provider
    /// request, as their `provider.usage` events count them) are skipped.
    /// `None` for no text or text that is not a script.
    pub fn resumed(text: Option<&str>, run: &crate::runlog::RecordedRun) -> Option<Self> {
        let mut script = Self::from_json(text?).ok()?;
        let used: usize = run
            .calls
            .iter()
            .flat_map(|c| &c.events)
            .filter(|e| matches!(e, crate::events::Event::ProviderUsage { .. }))
            .count();
        script.0.drain(..used.min(script.0.len()));
        Some(script)
    }

    /// The script of a run or call that brings none (`callai run` of a
    /// component file, `callai serve`'s `/v1/call`): one text reply.
    pub const DEFAULT_JSON: &str = r#"[{"content": "Hello from the built-in mock provider.", "outputTokens": 9, "inputTokens": 12}]"#;

    /// [`MockScript::DEFAULT_JSON`], parsed (once per process: `callai
    /// serve` hands every call without a script a mock of its own).
    pub fn default_reply() -> Self {
        static PARSED: std::sync::LazyLock<MockScript> = std::sync::LazyLock::new(|| {
            MockScript::from_json(MockScript::DEFAULT_JSON).expect("the default script parses")
        });
        PARSED.clone()
    }

    /// Parses a script, naming the entry that is wrong.
    pub fn from_json(text: &str) -> Result<Self, ScriptError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| ScriptError(format!("not valid JSON: {e}")))?;
        let Value::Array(items) = value else {
            return Err(ScriptError("must be a JSON array of replies".into()));
        };
        items
            .into_iter()
            .enumerate()
            .map(|(i, item)| entry(i, item))
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    /// A script of text replies, each with the given output tokens.
    pub fn replies<'a>(replies: impl IntoIterator<Item = (&'a str, u32)>) -> Self {
        Self(
            replies
                .into_iter()
                .map(|(content, tokens)| {
                    ScriptEntry::Reply(MockReply {
                        content: content.into(),
                        tool_calls: Vec::new(),
                        finish_reason: MockFinish::Stop,
                        output_tokens: Some(tokens),
                        input_tokens: None,
                    })
                })
                .collect(),
        )
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the script is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn entry(i: usize, item: Value) -> Result<ScriptEntry, ScriptError> {
    let is_error = item.as_object().is_some_and(|o| o.contains_key("error"));
    let parsed = if is_error {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct ErrorEntry {
            error: MockError,
        }
        serde_json::from_value::<ErrorEntry>(item).map(|e| ScriptEntry::Error { error: e.error })
    } else {
        serde_json::from_value::<MockReply>(item).map(ScriptEntry::Reply)
    };
    let entry = parsed.map_err(|e| ScriptError(format!("entry {i}: {e}")))?;
    if let ScriptEntry::Error { error } = &entry
        && !(100..=599).contains(&error.status)
    {
        return Err(ScriptError(format!(
            "entry {i}: error.status must be an HTTP status 100..599, got {}",
            error.status
        )));
    }
    Ok(entry)
}

/// The unscripted mock's answer to `request`.
fn unscripted_reply(request: &ProviderRequest) -> ScriptEntry {
    let (content, tool_calls) = match (tool_calls::forced(request), &request.structured) {
        (Some(call), _) => (String::new(), vec![call]),
        (None, Some(structured)) => (instance(&structured.schema).to_string(), Vec::new()),
        (None, None) => {
            let mut default = MockScript::default_reply();
            return default.0.swap_remove(0);
        }
    };
    let output = content.len()
        + tool_calls
            .iter()
            .map(|c| c.arguments.to_string().len())
            .sum::<usize>();
    let tokens = |bytes: usize| u32::try_from(bytes.div_ceil(4).max(1)).unwrap_or(u32::MAX);
    let input: usize = request
        .messages
        .iter()
        .map(|m| m.content.len())
        .chain(request.system_prompt.as_ref().map(String::len))
        .sum();
    ScriptEntry::Reply(MockReply {
        output_tokens: Some(tokens(output)),
        input_tokens: Some(tokens(input)),
        content,
        tool_calls,
        finish_reason: MockFinish::Stop,
    })
}

/// One line of `--mock-log`: what the mock received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MockLogEntry {
    /// The request's output budget.
    pub max_tokens: u32,
    /// `native`, `prompt`, or absent for a text call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_output: Option<StructuredOutput>,
    /// How many conversation messages the request carried.
    pub messages: usize,
}

/// What the mock answers from.
#[derive(Debug)]
enum Answers {
    /// A script, one entry per request, served once.
    Scripted(Vec<ScriptEntry>),
    /// No script: the default text reply, or an instance of the schema.
    Unscripted,
}

/// The mock provider. One per run: it serves its script once.
#[derive(Debug)]
pub struct MockProvider {
    answers: Answers,
    native: bool,
    latency: Option<Duration>,
    state: Mutex<Vec<MockLogEntry>>,
}

impl MockProvider {
    /// A mock serving `script`, answering structured calls the `structured`
    /// way: [`StructuredOutput::Native`] (its own JSON-schema mode, the
    /// default of `[mock] native`) or [`StructuredOutput::Prompt`] (the schema
    /// goes in the prompt).
    pub fn new(script: MockScript, structured: StructuredOutput) -> Self {
        Self::answering(Answers::Scripted(script.0), structured)
    }

    /// A mock for a caller that brought no script: it answers every text
    /// request with [`MockScript::DEFAULT_JSON`]'s reply and every
    /// structured one with a small value its schema accepts (see
    /// [`instance`]), reporting its length in bytes / 4 as output tokens.
    pub fn unscripted(structured: StructuredOutput) -> Self {
        Self::answering(Answers::Unscripted, structured)
    }

    fn answering(answers: Answers, structured: StructuredOutput) -> Self {
        Self {
            answers,
            native: structured == StructuredOutput::Native,
            latency: None,
            state: Mutex::new(Vec::new()),
        }
    }

    /// Makes every request wait this long before answering, like a real
    /// provider (benchmarks and concurrency tests).
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = (!latency.is_zero()).then_some(latency);
        self
    }

    /// The requests received so far, in order.
    pub fn log(&self) -> Vec<MockLogEntry> {
        self.state.lock().expect("mock log poisoned").clone()
    }

    /// Takes the next entry, logging the request; `None` past the end.
    fn next(&self, request: &ProviderRequest) -> Result<ScriptEntry, usize> {
        let mut log = self.state.lock().expect("mock log poisoned");
        let entry = match &self.answers {
            Answers::Scripted(script) => script.get(log.len()).cloned().ok_or(log.len())?,
            Answers::Unscripted => unscripted_reply(request),
        };
        log.push(MockLogEntry {
            max_tokens: request.max_tokens,
            structured_output: request.structured.as_ref().map(|s| s.mode),
            messages: request.messages.len(),
        });
        Ok(entry)
    }
}

impl Provider for MockProvider {
    fn default_model(&self) -> &str {
        MOCK_MODEL
    }

    fn supports_native(&self) -> bool {
        self.native
    }

    fn complete<'a>(
        &'a self,
        request: &'a ProviderRequest,
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderFailure>> {
        Box::pin(async move {
            if let Some(latency) = self.latency {
                tokio::time::sleep(latency).await;
            }
            let entry = self.next(request).map_err(|served| {
                ProviderFailure::new(
                    FailureKind::Unanswerable,
                    None,
                    format!(
                        "mock script exhausted: request {} but the script has {} replies",
                        served + 1,
                        served
                    ),
                )
            })?;
            match entry {
                ScriptEntry::Error { error } => {
                    Err(ProviderFailure::from_status(error.status, error.message))
                }
                ScriptEntry::Reply(reply) => Ok(ProviderReply {
                    content: reply.content,
                    stop: match reply.finish_reason {
                        MockFinish::Stop if !reply.tool_calls.is_empty() => StopReason::ToolCall,
                        MockFinish::Stop => StopReason::Stop,
                        MockFinish::Length => StopReason::Length,
                        MockFinish::Refusal => StopReason::Refusal,
                        MockFinish::ContentFilter => StopReason::ContentFilter,
                    },
                    input_tokens: reply.input_tokens,
                    cached_input_tokens: None,
                    cache_write_input_tokens: None,
                    reasoning_tokens: None,
                    output_tokens: reply.output_tokens.map(|t| t.min(request.max_tokens)),
                    tool_calls: tool_calls::scripted(reply.tool_calls),
                    model: Some(request.model.clone().unwrap_or_else(|| MOCK_MODEL.into())),
                    status: None,
                    thinking: Vec::new(),
                }),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use callai_wire::Message;

    fn request(max_tokens: u32) -> ProviderRequest {
        ProviderRequest {
            model: None,
            system_prompt: None,
            messages: vec![Message::user("hi")],
            temperature: None,
            max_tokens,
            stop_sequences: vec![],
            structured: None,
            tools: None,
            token_limit_field: None,
            prompt_cache: None,
            thinking: None,
            embedding: None,
            reasoning_effort: None,
        }
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn parses_the_design_example() {
        let s = MockScript::from_json(
            r#"[{"content": "{\"scene\": \"...", "finishReason": "length", "outputTokens": 5000},
                {"content": "{\"scene\": \"ok\"}", "finishReason": "stop", "outputTokens": 1800, "inputTokens": 120},
                {"error": {"status": 503, "message": "overloaded"}},
                {"content": "no usage"}]"#,
        )
        .unwrap();
        assert_eq!(s.len(), 4);
        assert!(matches!(&s.0[2], ScriptEntry::Error { error } if error.status == 503));
        assert!(
            matches!(&s.0[3], ScriptEntry::Reply(r) if r.output_tokens.is_none() && r.finish_reason == MockFinish::Stop)
        );
    }

    #[test]
    fn malformed_scripts_name_the_entry() {
        for (text, needle) in [
            ("{}", "array"),
            ("[1]", "entry 0"),
            (
                r#"[{"content": "a"}, {"content": "b", "finishReason": "done"}]"#,
                "entry 1",
            ),
            (r#"[{"content": "a", "outputTokens": -1}]"#, "entry 0"),
            (r#"[{"content": "a", "extra": 1}]"#, "extra"),
            (r#"[{"error": {"status": 42}}]"#, "error.status"),
            ("[", "not valid JSON"),
        ] {
            let err = MockScript::from_json(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn serves_in_order_clamps_tokens_and_logs() {
        let mock = MockProvider::new(
            MockScript::from_json(
                r#"[{"content": "a", "finishReason": "length", "outputTokens": 5000},
                    {"error": {"status": 429, "message": "slow down"}}]"#,
            )
            .unwrap(),
            StructuredOutput::Native,
        );
        let first = block_on(mock.complete(&request(2000))).unwrap();
        assert_eq!(first.output_tokens, Some(2000));
        assert_eq!(first.stop, StopReason::Length);
        let second = block_on(mock.complete(&request(4000))).unwrap_err();
        assert_eq!(second.kind, FailureKind::Transient);
        assert_eq!(second.status, Some(429));
        let third = block_on(mock.complete(&request(4000))).unwrap_err();
        assert_eq!(third.kind, FailureKind::Unanswerable);
        assert!(third.message.contains("exhausted"), "{}", third.message);
        let log = mock.log();
        assert_eq!(log.len(), 2, "a request past the end is not served");
        assert_eq!(log[0].max_tokens, 2000);
        assert_eq!(log[1].max_tokens, 4000);
        assert_eq!(
            serde_json::to_value(log[0]).unwrap(),
            serde_json::json!({"maxTokens": 2000, "messages": 1})
        );
    }
}
