//! A call's trace: every provider request it sent, in order, with why it
//! was sent, where it went, what came back, the tokens reported and how
//! long it took; then the call's outcome and its RFC 0248 `attempts`. Built
//! by an observer as the engine makes the call; no prompt or answer text.
//!
//! A kept trace is one allocation for most calls: its names are
//! [`SmolStr`]s (inline up to 23 bytes, as ids, tenants, providers and
//! most models are) and its first request is inline. Ten thousand kept
//! traces of a dozen allocations each, freed long after the calls around
//! them, fragmented the heap enough to make every allocation of the
//! server slower (the performance page, "Call traces and the log line").

use super::text::TracedText;
use crate::ids::rfc3339;
use crate::outcome::TraceError;
use callai_engine::cost::Cost;
use callai_engine::runlog::{TraceCost, TraceUsage};
use callai_engine::wire::Attempts;
use serde::Serialize;
use smallvec::SmallVec;
use smol_str::SmolStr;

/// One call, as `GET /v1/calls/{id}` answers it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallTrace {
    /// Its id: the `x-callai-call-id` header, and a drop-in answer's `id`
    /// (inline, so the store's index keeps a copy without allocating).
    pub id: SmolStr,
    /// The tenant that made it.
    pub tenant: SmolStr,
    /// `call`, `chat_completions`, `messages`, `responses` or `run` (a pack's call).
    pub endpoint: &'static str,
    /// The run it belongs to, for a pack's call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The node that made it.
    pub node_id: SmolStr,
    /// Its prompt (system instruction and messages): the SHA-256, and the
    /// text with `[runlog] keepText`; absent for a call refused before it
    /// started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<TracedText>,
    /// When it started, in milliseconds since the Unix epoch; answered as
    /// `createdAt`, RFC 3339 (UTC), made when it is read.
    #[serde(rename = "createdAt", serialize_with = "as_rfc3339")]
    pub started_ms: u64,
    /// The model name it routed (`[models.NAME]`), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<SmolStr>,
    /// `ok`, or the error code it failed with (`budget_exceeded` for a
    /// refusal of the caller's budget: [`crate::outcome::outcome`]).
    pub outcome: &'static str,
    /// Why it failed: the code, the message, the field or the provider
    /// (boxed: a call that succeeds carries one word for it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Box<TraceError>>,
    /// The RFC 0248 record: of the result, or of what a failed call sent.
    pub attempts: Attempts,
    /// What its requests cost, summed; absent when no price is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// Each request that reached a provider, in order.
    pub requests: SmallVec<[RequestTrace; 1]>,
    /// From its start to its end.
    pub duration_ms: u64,
    /// The response cache's part in it (`[responseCache]`): `miss` (it was
    /// looked up, not found, and the call ran; a `200` answer is kept for
    /// repeats) or `hit` (answered from the cache: no request, no charge).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<&'static str>,
    /// For a hit: the call whose answer it was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_from: Option<SmolStr>,
}

/// A request the response cache answered, as its trace says it.
#[derive(Debug, Clone)]
pub struct CacheHit<'a> {
    /// The trace's own id.
    pub id: &'a str,
    /// The tenant that asked.
    pub tenant: &'a str,
    /// Where it came in (`call`, `chat_completions`, ...).
    pub endpoint: &'static str,
    /// The call whose answer it was given, when the answer names it.
    pub from: Option<&'a str>,
    /// That call's `attempts`, as recorded (RFC 0248 §A.5).
    pub attempts: Attempts,
    /// When it was asked (ms since the Unix epoch).
    pub started_ms: u64,
    /// How long the answer took to find.
    pub duration_ms: u64,
}

/// One provider request of a call.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestTrace {
    /// Its number within the call, from 1.
    pub n: u32,
    /// `first`, `truncation`, `schema_violation`, `transient`, `fallback`
    /// or `provider_fallback`.
    pub reason: &'static str,
    /// The provider it went to.
    pub provider: SmolStr,
    /// The model it asked for.
    pub model: SmolStr,
    /// The token limit it carried.
    pub max_tokens: u32,
    /// The finish reason of its reply, or `error`.
    pub outcome: &'static str,
    /// The provider's HTTP status, when it answered over HTTP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Input tokens, as reported (those read from a prompt cache included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u32>,
    /// Of them, read from the provider's prompt cache, as reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u32>,
    /// Of them, written to the provider's prompt cache, as reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_write_input_tokens: Option<u32>,
    /// Output tokens, as reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u32>,
    /// From sending it to its reply or failure.
    pub latency_ms: u64,
    /// What it cost at its provider's and model's price; absent when
    /// neither has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// Its reply's answer (text and tool calls): the SHA-256, and the text
    /// with `[runlog] keepText`; absent for a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<TracedText>,
}

fn as_rfc3339<S: serde::Serializer>(ms: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339(*ms))
}

impl CallTrace {
    /// The trace of a request the response cache answered: no request
    /// sent, nothing charged, the first call's `attempts`, and which call
    /// that was.
    pub fn cache_hit(hit: CacheHit<'_>) -> Self {
        Self {
            id: hit.id.into(),
            tenant: hit.tenant.into(),
            endpoint: hit.endpoint,
            run_id: None,
            node_id: SmolStr::default(),
            prompt: None,
            started_ms: hit.started_ms,
            route: None,
            outcome: "ok",
            error: None,
            attempts: hit.attempts,
            cost: None,
            requests: SmallVec::new(),
            duration_ms: hit.duration_ms,
            cache: Some("hit"),
            cached_from: hit.from.map(SmolStr::from),
        }
    }

    /// The bytes of text it keeps (none without `[runlog] keepText`): its
    /// prompt's and each answer's.
    pub fn text_bytes(&self) -> u64 {
        let text = |t: &Option<TracedText>| {
            t.as_ref()
                .and_then(|t| t.text.as_ref())
                .map_or(0, |t| t.len() as u64)
        };
        text(&self.prompt) + self.requests.iter().map(|r| text(&r.answer)).sum::<u64>()
    }

    /// What it adds to the sums of the minute it started in: the run log
    /// adds it as the trace is written, and a host with no run log sums its
    /// kept traces by it, so both answer alike.
    pub fn usage(&self) -> TraceUsage {
        TraceUsage {
            requests: self
                .requests
                .iter()
                .map(|r| (r.provider.to_string(), r.reason.to_owned()))
                .collect(),
            cost: self.cost.as_ref().map(|c| TraceCost {
                currency: c.currency.to_string(),
                nanos: c.nanos,
                complete: c.complete,
            }),
        }
    }
}
