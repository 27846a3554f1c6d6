//! What the retry engine asks of a model provider: one request in, one reply
//! or one failure out. The mock and the HTTP adapters implement [`Provider`];
//! [`Providers`] holds them by the name a request's `provider` names.

use callai_wire::{
    Message, PromptCache, StructuredOutput, Thinking, ThinkingBlock, TokenLimitField, Tool,
    ToolCall, ToolChoice,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// A boxed future, as [`Provider::complete`] returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How a structured attempt asks for JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct StructuredRequest {
    /// Native or prompt. In prompt mode the engine has already written the
    /// schema into the system prompt; the provider must not use its native
    /// mechanism.
    pub mode: StructuredOutput,
    /// The caller's JSON Schema (shared, never copied per attempt).
    pub schema: Arc<Value>,
}

/// The tools an attempt offers the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolsRequest {
    /// The tools, shared by every attempt of the call.
    pub tools: Arc<[Tool]>,
    /// Whether and which tool the model must call.
    pub choice: ToolChoice,
    /// `Some(false)`: at most one call per answer.
    pub parallel: Option<bool>,
}

/// One provider request, as the engine built it for one attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderRequest {
    /// The model; the provider's default when absent.
    pub model: Option<String>,
    /// The system instruction (in prompt mode it carries the schema).
    pub system_prompt: Option<String>,
    /// The conversation, with any corrective instruction appended.
    pub messages: Vec<Message>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// This attempt's output budget.
    pub max_tokens: u32,
    /// Stop sequences.
    pub stop_sequences: Vec<String>,
    /// Present for structured calls.
    pub structured: Option<StructuredRequest>,
    /// Present when the call offers tools.
    pub tools: Option<ToolsRequest>,
    /// The field a drop-in's client sent its token limit in.
    pub token_limit_field: Option<TokenLimitField>,
    /// The client's prompt-caching breakpoints, for a provider that takes
    /// them ([`Provider::takes_prompt_cache`]); none in a fallback attempt,
    /// whose prompt is the host's own.
    pub prompt_cache: Option<Arc<PromptCache>>,
    /// The client's extended thinking and its conversation's thinking
    /// blocks, for a provider that takes them ([`Provider::takes_thinking`]).
    pub thinking: Option<Arc<Thinking>>,
    /// An embedding call's input: the provider is asked for vectors
    /// ([`Provider::embed`]) instead of a completion.
    pub embedding: Option<Arc<callai_wire::Embedding>>,
    /// How much a reasoning model reasons, for a model that takes it
    /// ([`Provider::takes_reasoning`]).
    pub reasoning_effort: Option<String>,
}

/// Why the provider stopped generating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// A natural stop.
    Stop,
    /// The output budget ran out (`length`, `max_tokens`).
    Length,
    /// An explicit refusal.
    Refusal,
    /// A safety filter.
    ContentFilter,
    /// A tool call.
    ToolCall,
    /// Anything else.
    Other,
}

impl StopReason {
    /// The provider-neutral spelling used in events.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::Refusal => "refusal",
            Self::ContentFilter => "content-filter",
            Self::ToolCall => "tool-call",
            Self::Other => "other",
        }
    }
}

/// A reply that reached the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderReply {
    /// The text (for a native structured reply, the JSON text).
    pub content: String,
    /// The tool calls of the answer, in order (arguments as JSON text).
    pub tool_calls: Vec<ToolCall>,
    /// Why generation stopped.
    pub stop: StopReason,
    /// Reported input tokens; `None` when the provider reported no usage.
    /// Tokens read from the provider's prompt cache are included.
    pub input_tokens: Option<u32>,
    /// Of `input_tokens`, those read from the provider's prompt cache
    /// (priced lower); `None` when it said nothing of a cache.
    pub cached_input_tokens: Option<u32>,
    /// Of `input_tokens`, those written to the provider's prompt cache
    /// (Anthropic's `cache_creation_input_tokens`, priced higher); `None`
    /// when it said nothing of a cache.
    pub cache_write_input_tokens: Option<u32>,
    /// Reported output tokens; `None` when the provider reported no usage.
    pub output_tokens: Option<u32>,
    /// Of `output_tokens`, those a reasoning model spent reasoning
    /// (OpenAI's `reasoning_tokens`); `None` when it said nothing of them.
    pub reasoning_tokens: Option<u32>,
    /// The model that answered.
    pub model: Option<String>,
    /// The HTTP status it came with, when it came over HTTP.
    pub status: Option<u16>,
    /// The reply's thinking blocks, in order (an Anthropic-kind provider's,
    /// when the call asked for thinking); their tokens are in
    /// `output_tokens`.
    pub thinking: Vec<ThinkingBlock>,
}

impl ProviderReply {
    /// Why generation stopped, as the result and the trace say it: a reply
    /// that calls tools stopped to call them, whatever word its provider
    /// used (the Messages API's `tool_use` is read as a stop).
    pub fn stop_said(&self) -> StopReason {
        if self.tool_calls.is_empty() {
            self.stop
        } else {
            StopReason::ToolCall
        }
    }
}

/// What kind of failure a request met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Timeout, connection error, 429, 5xx: worth another request.
    Transient,
    /// A 4xx other than 429: the request itself is wrong; not retried.
    Rejected,
    /// The provider rejected native structured output: prompt mode may work.
    NativeUnsupported,
    /// The provider cannot answer at all (e.g. the mock script ran out); the
    /// request produced nothing and is not retried.
    Unanswerable,
    /// The response was larger than the host reads; not retried.
    TooLarge,
    /// The reply was cut off after part of its text had reached the caller
    /// (a streamed text call): an attempt, and not retried, since the
    /// caller already has that text.
    Interrupted,
    /// The request never reached the provider: the connection could not be
    /// made (refused, DNS, TLS) before any byte of it was written. Not an
    /// attempt; retried under the same backoff as a transient failure, at
    /// most the call's attempt cap times.
    Unreached,
    /// This host held the request back: its provider's quota
    /// (`[providers.NAME.limits]`, shared by every host on one run log)
    /// has no room for it now. Not an attempt; the next target of a chain
    /// takes it at once, else the call ends with the quota's refusal
    /// ([`ProviderFailure::refusal`]).
    Throttled,
}

/// A request that did not produce a reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderFailure {
    /// How the engine should treat it.
    pub kind: FailureKind,
    /// The HTTP status, when there was one.
    pub status: Option<u16>,
    /// A sentence for a person (never containing a secret).
    pub message: String,
    /// The provider's `retry-after`, honoured before the next request.
    pub retry_after: Option<Duration>,
    /// For a [`FailureKind::Throttled`] request: the error the call ends
    /// with when no other target takes it (the quota, what is left, when
    /// it resets).
    pub refusal: Option<Box<callai_wire::CallError>>,
}

impl ProviderFailure {
    /// A failure of the given kind.
    pub fn new(kind: FailureKind, status: Option<u16>, message: impl Into<String>) -> Self {
        Self {
            kind,
            status,
            message: message.into(),
            retry_after: None,
            refusal: None,
        }
    }

    /// A request held back under its provider's quota, which refused it
    /// with `refusal`.
    pub fn throttled(refusal: callai_wire::CallError) -> Self {
        let mut f = Self::new(FailureKind::Throttled, None, refusal.message.clone());
        f.refusal = Some(Box::new(refusal));
        f
    }

    /// Classifies an HTTP status: 408, 429 and 5xx are transient.
    pub fn from_status(status: u16, message: impl Into<String>) -> Self {
        let kind = if status == 408 || status == 429 || status >= 500 {
            FailureKind::Transient
        } else {
            FailureKind::Rejected
        };
        Self::new(kind, Some(status), message)
    }

    /// With the HTTP status of the answer it came of, when it names none.
    pub fn at(mut self, status: u16) -> Self {
        self.status = self.status.or(Some(status));
        self
    }

    /// Whether this failure reached the provider (and so is an attempt).
    pub fn was_sent(&self) -> bool {
        !matches!(
            self.kind,
            FailureKind::Unanswerable | FailureKind::Unreached | FailureKind::Throttled
        )
    }
}

impl fmt::Display for ProviderFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Some(status) => write!(f, "HTTP {status}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// The connections a provider holds open to its server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Connections {
    /// HTTP/1.1 connections, idle or carrying a request.
    pub http1: usize,
    /// HTTP/2 connections.
    pub http2: usize,
    /// Requests in flight on the HTTP/2 ones, a stream each.
    pub streams: usize,
}

/// A model provider. Implement it to plug in your own model client, and
/// register it in [`Providers`] under the name requests use.
pub trait Provider: Send + Sync {
    /// The model used when a request names none.
    fn default_model(&self) -> &str;
    /// Whether native structured output may be used.
    fn supports_native(&self) -> bool;
    /// Input tokens the provider adds to each request beyond what it is
    /// sent (a hidden system prompt, as Anthropic's for tool use): reserved
    /// for each attempt of a budgeted call.
    fn input_overhead_tokens(&self) -> u64 {
        0
    }
    /// Whether a message's images may be sent to it (a text-only model's
    /// provider says no, and a call with images skips it or is refused).
    fn takes_images(&self) -> bool {
        true
    }
    /// Whether it takes a client's prompt-caching breakpoints
    /// (`cache_control`): a call that carries them skips a provider that
    /// does not, or is refused naming the field.
    fn takes_prompt_cache(&self) -> bool {
        false
    }
    /// Whether it takes extended thinking (`thinking`, and thinking blocks
    /// passed back): a call that asks the model to think skips a provider
    /// that does not, or is refused naming the field.
    fn takes_thinking(&self) -> bool {
        false
    }
    /// Whether its `model` takes a reasoning effort (OpenAI's reasoning
    /// families, `reasoning_effort`).
    fn takes_reasoning(&self, _model: &str) -> bool {
        false
    }

    /// Whether it serves embeddings ([`Provider::embed`]).
    fn takes_embeddings(&self) -> bool {
        false
    }

    /// The connections it holds open to its server now (`/metrics` shows
    /// them); `None` for a provider that holds none.
    fn connections(&self) -> Option<Connections> {
        None
    }

    /// Sends one embedding request: the reply's `content` is the provider's
    /// `data` array as JSON, its input tokens as reported, no output. By
    /// default, refused: the provider serves no embeddings.
    fn embed<'a>(
        &'a self,
        _request: &'a ProviderRequest,
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderFailure>> {
        Box::pin(async {
            Err(ProviderFailure::new(
                FailureKind::Unanswerable,
                None,
                "this provider serves no embeddings",
            ))
        })
    }

    /// Sends one request.
    fn complete<'a>(
        &'a self,
        request: &'a ProviderRequest,
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderFailure>>;

    /// Sends one request of a text call whose caller streams, handing the
    /// reply's text to `deltas` as it arrives (waiting on
    /// [`DeltaSink::ready`] between pieces, so that a reader that falls
    /// behind slows the provider down rather than piling text up), and
    /// returns the whole reply (its usage and stop reason) at the end. By
    /// default the reply is fetched with [`Provider::complete`] and handed
    /// over as one delta.
    fn complete_streaming<'a>(
        &'a self,
        request: &'a ProviderRequest,
        deltas: &'a DeltaSink,
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderFailure>> {
        Box::pin(async move {
            let reply = self.complete(request).await?;
            deltas.send(&reply.content);
            Ok(reply)
        })
    }
}

/// Where a [`DeltaSink`] hands streamed text.
pub trait DeltaTarget: Send + Sync {
    /// Takes a piece of text.
    fn push(&self, text: &str);

    /// Completes once the target has room for more (its reader caught up);
    /// at once for a target that never falls behind.
    fn ready(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }
}

impl<T: DeltaTarget + ?Sized> DeltaTarget for Arc<T> {
    fn push(&self, text: &str) {
        (**self).push(text);
    }

    fn ready(&self) -> BoxFuture<'_, ()> {
        (**self).ready()
    }
}

/// A target that hands each piece to a function, never behind.
struct FnTarget<F>(F);

impl<F: Fn(&str) + Send + Sync> DeltaTarget for FnTarget<F> {
    fn push(&self, text: &str) {
        (self.0)(text);
    }
}

/// Where a streamed text call's text goes as the provider sends it.
#[derive(Clone)]
pub struct DeltaSink(Arc<dyn DeltaTarget>);

impl DeltaSink {
    /// A sink that hands each piece of text to `f`.
    pub fn new(f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        Self(Arc::new(FnTarget(f)))
    }

    /// A sink over `target`, which may ask for a pause ([`DeltaTarget::ready`]).
    pub fn with_target(target: impl DeltaTarget + 'static) -> Self {
        Self(Arc::new(target))
    }

    /// Hands `text` over (nothing for empty text).
    pub fn send(&self, text: &str) {
        if !text.is_empty() {
            self.0.push(text);
        }
    }

    /// Completes once the reader has room for more.
    pub async fn ready(&self) {
        self.0.ready().await;
    }
}

impl fmt::Debug for DeltaSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DeltaSink")
    }
}

/// The providers a host may call, by name. Cloned with each host a call
/// gets (a run's mock added), so the table is shared and copied only when
/// one is added.
#[derive(Clone, Default)]
pub struct Providers {
    map: Arc<BTreeMap<String, Arc<dyn Provider>>>,
}

impl fmt::Debug for Providers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.map.keys()).finish()
    }
}

impl Providers {
    /// No providers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the provider requests reach as `name`.
    pub fn insert(&mut self, name: impl Into<String>, provider: Arc<dyn Provider>) -> &mut Self {
        Arc::make_mut(&mut self.map).insert(name.into(), provider);
        self
    }

    /// Adds a provider, builder style.
    pub fn with(mut self, name: impl Into<String>, provider: Arc<dyn Provider>) -> Self {
        self.insert(name, provider);
        self
    }

    /// Adds (or replaces) every provider of `other`, under its name there.
    pub fn extend(&mut self, other: Providers) {
        let other = Arc::unwrap_or_clone(other.map);
        Arc::make_mut(&mut self.map).extend(other);
    }

    /// The provider called `name`, with the name as it is stored.
    pub fn get(&self, name: &str) -> Option<(&str, &Arc<dyn Provider>)> {
        self.map.get_key_value(name).map(|(k, p)| (k.as_str(), p))
    }

    /// The names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified() {
        for s in [408, 429, 500, 502, 503, 599] {
            assert_eq!(
                ProviderFailure::from_status(s, "x").kind,
                FailureKind::Transient,
                "{s}"
            );
        }
        for s in [400, 401, 403, 404, 422] {
            assert_eq!(
                ProviderFailure::from_status(s, "x").kind,
                FailureKind::Rejected,
                "{s}"
            );
        }
        assert_eq!(
            ProviderFailure::from_status(503, "down").to_string(),
            "HTTP 503: down"
        );
    }
}
