//! Watching calls as they happen: the hook that traces and metrics hang on.
//!
//! A [`CallObserver`] is handed to a run (or to one [`crate::Host::call_with`])
//! and is told when each call starts; it answers with a [`CallWatch`] that
//! sees every provider request of that call, before it is sent and when
//! it comes back, then the call's result. Calls served from a run log send
//! no request and are not observed.

use crate::cost::Cost;
use crate::engine::RequestReason;
use crate::provider::{ProviderFailure, ProviderReply};
use callai_wire::{CallError, CallRequest, CallResult, StructuredOutput};
use std::fmt;

/// What is known of a call when it starts, before any request.
#[derive(Debug, Clone, Copy)]
pub struct CallStart<'a> {
    /// The node that made it.
    pub node_id: &'a str,
    /// The model name the request routed (`[models.NAME]`), when it named
    /// one; its requests may then go to several providers.
    pub route: Option<&'a str>,
    /// The provider its first request goes to, as configured.
    pub provider: &'a str,
    /// The model asked for (the provider's default when the request named none).
    pub model: &'a str,
    /// The output budget of the first request.
    pub max_tokens: u32,
    /// `Some` for a structured call: how the first request asks for JSON.
    pub structured: Option<StructuredOutput>,
    /// The call as its caller made it (its messages, schema and tools).
    pub request: &'a CallRequest,
}

/// One provider request, as it is about to be sent.
#[derive(Debug, Clone, Copy)]
pub struct RequestStart<'a> {
    /// The provider it goes to (a route's chain may change it).
    pub provider: &'a str,
    /// Its number within the call (1..=16).
    pub number: u32,
    /// Why it is sent.
    pub reason: RequestReason,
    /// The `max_tokens` it carries.
    pub max_tokens: u32,
    /// The most input tokens it may cost (its text, schema and the
    /// overheads a provider adds): what prices it when no usage comes back.
    pub input_bound: u64,
    /// The model it asks for.
    pub model: &'a str,
    /// How it asks for JSON, when the call is structured.
    pub structured: Option<StructuredOutput>,
}

/// What came of one request: a reply, or a failure (which may never have
/// reached the provider: see [`ProviderFailure::was_sent`]).
pub type RequestEnd<'a> = Result<&'a ProviderReply, &'a ProviderFailure>;

/// Told of each call a run makes. Implementations should be cheap: they are
/// called inline by the engine.
pub trait CallObserver: Send + Sync {
    /// A call starts; the returned watch sees its requests and its end.
    fn call_started(&self, call: &CallStart<'_>) -> Box<dyn CallWatch>;

    /// A call was refused before any request could be sent: a malformed
    /// request, an unknown provider, one the policy denies.
    fn call_refused(&self, node_id: &str, error: &CallError) {
        let _ = (node_id, error);
    }
}

/// Sees one call: every provider request, then the call's end.
pub trait CallWatch: Send {
    /// A request is about to be sent.
    fn request_started(&mut self, request: &RequestStart<'_>);
    /// The request came back (or failed), costing `cost` at the host's
    /// prices ([`crate::HostBuilder::prices`]): priced once by the engine,
    /// at its own provider's and model's price, a count it did not report
    /// at its worst case (the cost then incomplete). `None` when the host
    /// has no price for it, or it never reached the provider.
    fn request_finished(
        &mut self,
        request: &RequestStart<'_>,
        end: RequestEnd<'_>,
        cost: Option<&Cost>,
    );
    /// The call is over: what the caller receives.
    fn call_finished(self: Box<Self>, result: Result<&CallResult, &CallError>);
}

impl fmt::Debug for dyn CallObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CallObserver")
    }
}

/// A shared observer, as runs and calls carry it.
pub type SharedObserver = std::sync::Arc<dyn CallObserver>;

/// Observers one after the other: each sees every call.
#[derive(Clone, Default)]
pub struct Observers(Vec<SharedObserver>);

impl fmt::Debug for Observers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Observers({})", self.0.len())
    }
}

impl Observers {
    /// None yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one, builder style.
    pub fn with(mut self, observer: SharedObserver) -> Self {
        self.0.push(observer);
        self
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl CallObserver for Observers {
    fn call_started(&self, call: &CallStart<'_>) -> Box<dyn CallWatch> {
        Box::new(Watches(
            self.0.iter().map(|o| o.call_started(call)).collect(),
        ))
    }

    fn call_refused(&self, node_id: &str, error: &CallError) {
        self.0.iter().for_each(|o| o.call_refused(node_id, error));
    }
}

struct Watches(Vec<Box<dyn CallWatch>>);

impl CallWatch for Watches {
    fn request_started(&mut self, request: &RequestStart<'_>) {
        self.0.iter_mut().for_each(|w| w.request_started(request));
    }
    fn request_finished(
        &mut self,
        request: &RequestStart<'_>,
        end: RequestEnd<'_>,
        cost: Option<&Cost>,
    ) {
        self.0
            .iter_mut()
            .for_each(|w| w.request_finished(request, end, cost));
    }
    fn call_finished(self: Box<Self>, result: Result<&CallResult, &CallError>) {
        self.0.into_iter().for_each(|w| w.call_finished(result));
    }
}
