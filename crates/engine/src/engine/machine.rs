//! The retry engine as a state machine. It takes what the provider answered
//! (classified) and says what to do next: send this request, wait this
//! long, or finish with this result or error. No I/O, no clock, no
//! randomness: the driver feeds it those (`driver.rs`), so every rule here
//! is tested without a provider or real time.

use super::attempts::Ledger;
use super::backoff::{Backoff, Wait};
use super::classify::Verdict;
use super::prompts::{self, Extra};
use super::reason::RequestReason;
use super::schema::CompiledSchema;
use super::tools::CompiledTools;
use crate::config::HostConfig;
use crate::events::Event;
use crate::provider::{FailureKind, ProviderFailure, ProviderReply, ProviderRequest};
use callai_wire::{CallError, CallRequest, CallResult, ErrorCode, RetryPolicy, StructuredOutput};
pub(crate) use noted::Events;
use noted::Noted;
use std::time::Duration;

/// One request to send.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Attempt {
    /// What to send.
    pub request: ProviderRequest,
    /// Why it is sent (first, a schema violation, a truncation, ...).
    pub reason: RequestReason,
    /// Its number within the call (1..=16).
    pub number: u32,
    /// The index of the target it goes to, in the call's chain.
    pub target: usize,
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// Send this request, and feed back what came of it.
    Send(Attempt),
    /// Wait this long, then [`CallMachine::resume`].
    Wait(Duration),
    /// The call is over.
    Done(Result<CallResult, CallError>),
}

/// What came of one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// A reply, and what it means for the call.
    Reply(ProviderReply, Verdict),
    /// No reply.
    Failed(ProviderFailure),
}

/// What the driver knows that the machine does not: a random draw in
/// `[0, 1)` for backoff jitter, and the run's wall time left (read only
/// when a wait is decided: most calls never need the clock).
#[derive(Clone, Copy)]
pub(crate) struct Context<'c> {
    pub jitter: f64,
    pub remaining: &'c dyn Fn() -> Option<Duration>,
}

/// Why the call cannot go on (yet): the error it fails with if it stops
/// here, and the request that would go on, if any.
struct Failure {
    code: ErrorCode,
    reason: &'static str,
    message: String,
    next: Option<RequestReason>,
    retry_after: Option<Duration>,
}

impl Failure {
    fn terminal(code: ErrorCode, reason: &'static str, message: String) -> Self {
        Self {
            code,
            reason,
            message,
            next: None,
            retry_after: None,
        }
    }
}

/// One place a call's requests may go: a provider by name, the model asked
/// of it, and whether it takes native structured output. A call has one,
/// or a route's chain of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target<'a> {
    /// The provider's name.
    pub provider: &'a str,
    /// The model asked for.
    pub model: String,
    /// Whether it takes a schema natively.
    pub native: bool,
}

/// One call's state.
pub(crate) struct CallMachine<'a> {
    config: &'a HostConfig,
    request: &'a CallRequest,
    node_id: &'a str,
    /// Where the call may go, in the order it tries them.
    targets: &'a [Target<'a>],
    /// The target the next request goes to.
    at: usize,
    /// Whether a target rejected native structured output: the rest of the
    /// call puts the schema in the prompt.
    native_rejected: bool,
    /// The current target's provider and model.
    provider: &'a str,
    model: String,
    schema: Option<CompiledSchema>,
    tools: Option<CompiledTools>,
    /// The host ceiling narrowed by the caller's `retry.maxAttempts`.
    cap: u32,
    grow: bool,
    budget: u32,
    mode: Option<StructuredOutput>,
    ledger: Ledger,
    /// The next request's extra text, and why it is sent.
    extra: Extra,
    reason: RequestReason,
    transient_in_a_row: u32,
    /// Tries of this call that never reached the provider (connect failures).
    unreached: u32,
    /// Events that announce the next request; emitted once it is sent.
    announce: Noted,
    events: Noted,
}

/// What a [`CallMachine`] is made from: one call and where it goes.
pub(crate) struct CallSpec<'a> {
    /// The host's config (its ceiling, budgets, flags).
    pub config: &'a HostConfig,
    /// The node that made the call.
    pub node_id: &'a str,
    /// The request, checked.
    pub request: &'a CallRequest,
    /// Its `responseSchema`, compiled; `None` for a text call.
    pub schema: Option<CompiledSchema>,
    /// Its tools, compiled; `None` when it offers none.
    pub tools: Option<CompiledTools>,
    /// Where it goes: one target, or a route's chain (never empty).
    pub targets: &'a [Target<'a>],
    /// Whether its events are made (not when the sink keeps none).
    pub events: Events,
}

impl<'a> CallMachine<'a> {
    /// The machine of one call. The request's `retry` is read only when the
    /// host advertises `retryPolicy` (§B), and then only narrows (§B.3).
    pub(crate) fn new(spec: CallSpec<'a>) -> Self {
        let CallSpec {
            config,
            node_id,
            request,
            schema,
            tools,
            targets,
            events,
        } = spec;
        let first = &targets[0];
        let retry = &config.retry;
        let policy = match config.call_accounting.retry_policy {
            true => request.retry.unwrap_or_default(),
            false => RetryPolicy::default(),
        };
        Self {
            config,
            request,
            node_id,
            targets,
            at: 0,
            native_rejected: false,
            provider: first.provider,
            model: first.model.clone(),
            cap: policy.max_attempts.map_or(retry.max_retry_attempts, |n| {
                n.min(retry.max_retry_attempts)
            }),
            grow: policy.grow_max_tokens.unwrap_or(true),
            // The caller's budget (or the host default standing in), never
            // above the provider ceiling.
            budget: request
                .max_tokens
                .unwrap_or(retry.default_max_tokens)
                .min(retry.provider_max_tokens),
            // Only a call with a `responseSchema` has a structured-output
            // mode (RFC 0248 §A's type: `structuredOutput` "only when
            // `responseSchema` was supplied"); a caller's own forced tool
            // call is a tool call, not the host's way of asking for JSON
            // (accounting.md, "Which calls say structuredOutput").
            mode: schema
                .as_ref()
                .map(|_| StructuredOutput::native_if(first.native)),
            schema,
            tools,
            ledger: Ledger::new(),
            extra: Extra::Nothing,
            reason: RequestReason::First,
            transient_in_a_row: 0,
            unreached: 0,
            announce: Noted::new(events),
            events: Noted::new(events),
        }
    }

    /// The compiled schema of a structured call, to classify replies with.
    pub(crate) fn schema(&self) -> Option<&CompiledSchema> {
        self.schema.as_ref()
    }

    /// The compiled tools of a call that offers them.
    pub(crate) fn tools(&self) -> Option<&CompiledTools> {
        self.tools.as_ref()
    }

    /// The events produced since the last call, in order.
    pub(crate) fn drain_events(&mut self) -> std::vec::Drain<'_, Event> {
        self.events.drain()
    }

    /// The first request.
    pub(crate) fn start(&mut self) -> Step {
        self.send()
    }

    /// After a [`Step::Wait`]: the request that was waiting.
    pub(crate) fn resume(&mut self) -> Step {
        self.send()
    }

    fn send(&mut self) -> Step {
        Step::Send(Attempt {
            request: prompts::build(
                self.request,
                &self.model,
                self.budget,
                self.mode
                    .zip(self.schema.as_ref().map(CompiledSchema::schema)),
                self.tools.as_ref().map(CompiledTools::request),
                &self.extra,
            ),
            reason: self.reason,
            number: self.ledger.count() + 1,
            target: self.at,
        })
    }

    /// Takes what came of the request last sent, and decides.
    pub(crate) fn on_outcome(&mut self, outcome: Outcome, cx: Context<'_>) -> Step {
        let failure = match outcome {
            Outcome::Failed(f) if f.kind == FailureKind::Unreached => return self.unreached(f, cx),
            Outcome::Failed(f) if f.kind == FailureKind::Throttled => return self.throttled(f),
            Outcome::Failed(f) if !f.was_sent() => {
                // The request never reached a provider: not an attempt, and
                // the retry that would have announced it is not announced.
                self.announce.clear();
                let failure = Failure::terminal(
                    ErrorCode::ProviderUnavailable,
                    "x-host-callai-unanswerable",
                    f.to_string(),
                );
                return Step::Done(Err(self.give_up(failure)));
            }
            Outcome::Failed(f) => {
                self.sent(None, None);
                // A transient failure re-sends the request that failed, its
                // corrective text or fallback included; after any other the
                // next request starts from the caller's own.
                if f.kind != FailureKind::Transient {
                    self.extra = Extra::Nothing;
                }
                self.failed(f)
            }
            Outcome::Reply(reply, verdict) => {
                self.sent(reply.input_tokens, reply.output_tokens);
                self.transient_in_a_row = 0;
                match self.judge(verdict, reply) {
                    Ok(result) => return Step::Done(Ok(result)),
                    Err(failure) => failure,
                }
            }
        };
        let Some(next) = failure.next.filter(|_| self.ledger.count() < self.cap) else {
            return Step::Done(Err(self.give_up(failure)));
        };
        if next == RequestReason::Transient && self.fall_over() {
            // The next target of the chain, at once: it is another provider.
            self.announce_retry(RequestReason::ProviderFallback, failure.message);
            return self.send();
        }
        if next == RequestReason::Transient {
            self.transient_in_a_row += 1;
            let backoff = Backoff::from(&self.config.retry);
            match backoff.wait(
                self.transient_in_a_row,
                failure.retry_after,
                cx.jitter,
                (cx.remaining)(),
            ) {
                Wait::GiveUp(why) => {
                    let failure = Failure {
                        message: format!("{}; {why}", failure.message),
                        next: None,
                        ..failure
                    };
                    return Step::Done(Err(self.give_up(failure)));
                }
                Wait::For(wait) => {
                    self.announce_retry(next, failure.message);
                    if !wait.is_zero() {
                        return Step::Wait(wait);
                    }
                    return self.send();
                }
            }
        }
        self.announce_retry(next, failure.message);
        self.send()
    }

    /// A request that could not reach its target (a refused connection):
    /// not an attempt. The next target of a chain takes it at once; else
    /// the same request goes again after the transient backoff, with its
    /// announcements still pending, until the connect failures reach the
    /// call's cap.
    fn unreached(&mut self, f: ProviderFailure, cx: Context<'_>) -> Step {
        if self.fall_over() {
            // The retry announced for the request that never left is now a
            // request to the next target: announced as that, one reason for
            // it in every record (the call's first request has none).
            if self.ledger.count() > 0 {
                self.announce.clear();
                self.announce_retry(RequestReason::ProviderFallback, f.to_string());
            }
            return self.send();
        }
        self.unreached += 1;
        let message = f.to_string();
        let backoff = Backoff::from(&self.config.retry);
        let wait = (self.unreached < self.cap).then(|| {
            backoff.wait(
                self.unreached - 1,
                f.retry_after,
                cx.jitter,
                (cx.remaining)(),
            )
        });
        let why = match wait {
            Some(Wait::For(wait)) if wait.is_zero() => return self.send(),
            Some(Wait::For(wait)) => return Step::Wait(wait),
            Some(Wait::GiveUp(why)) => format!("{message}; {why}"),
            None => format!(
                "{message}; the provider could not be reached in {} tries",
                self.unreached
            ),
        };
        self.announce.clear();
        let failure = Failure::terminal(
            ErrorCode::ProviderUnavailable,
            "x-host-callai-unreached",
            why,
        );
        Step::Done(Err(self.give_up(failure)))
    }

    /// A failed request: transient failures go on after a wait; a rejected
    /// native mode goes on in prompt mode; anything else ends the call.
    fn failed(&mut self, f: ProviderFailure) -> Failure {
        let message = f.to_string();
        match f.kind {
            FailureKind::Transient => Failure {
                code: ErrorCode::ProviderUnavailable,
                reason: RequestReason::Transient.as_str(),
                message,
                next: Some(RequestReason::Transient),
                retry_after: f.retry_after,
            },
            FailureKind::NativeUnsupported if self.mode == Some(StructuredOutput::Native) => {
                // The model rejected native structured output: the next
                // attempt embeds the schema in the prompt.
                self.mode = Some(StructuredOutput::Prompt);
                self.native_rejected = true;
                Failure {
                    code: ErrorCode::ProviderRejected,
                    reason: RequestReason::NativeRejected.as_str(),
                    message,
                    next: Some(RequestReason::NativeRejected),
                    retry_after: None,
                }
            }
            FailureKind::TooLarge => {
                Failure::terminal(ErrorCode::LimitExceeded, "x-host-callai-limit", message)
            }
            FailureKind::Interrupted => Failure::terminal(
                ErrorCode::ProviderUnavailable,
                "x-host-callai-interrupted",
                message,
            ),
            _ => Failure::terminal(
                ErrorCode::ProviderRejected,
                "x-host-callai-rejected",
                message,
            ),
        }
    }

    /// Sets the next request's reason and what announces it once sent.
    fn announce_retry(&mut self, next: RequestReason, previous_error: String) {
        self.reason = next;
        let attempt = self.ledger.count() + 1;
        self.announce.push_with(|| Event::RetryAttempted {
            node_id: self.node_id.into(),
            attempt,
            reason: next.as_str().into(),
            previous_error: Some(previous_error),
        });
        if next == RequestReason::Fallback {
            self.announce.push_with(|| Event::NlToFormatEngaged {
                node_id: self.node_id.into(),
                original_envelope_type: "json-schema".into(),
                fallback_calls: 1,
            });
        }
    }

    /// Records one request that reached the provider, with the events that
    /// announced it.
    fn sent(&mut self, input_tokens: Option<u32>, output_tokens: Option<u32>) {
        self.events.append(&mut self.announce);
        self.ledger.record(output_tokens);
        let attempt = self.ledger.count();
        self.events.push_with(|| Event::ProviderUsage {
            provider: self.provider.into(),
            model: self.model.clone(),
            input_tokens,
            output_tokens,
            node_id: Some(self.node_id.into()),
            attempt,
            reason: self.reason.as_str().into(),
        });
    }

    /// The error the call fails with; `envelope.retry.exhausted` carries the
    /// number of requests actually sent (none: no event).
    fn give_up(&mut self, failure: Failure) -> CallError {
        let total = self.ledger.count();
        let mut error = CallError::new(failure.code, failure.message.clone());
        if total > 0 {
            let (reason, message) = (failure.reason, failure.message);
            self.events.push_with(|| Event::RetryExhausted {
                node_id: self.node_id.into(),
                total_attempts: total,
                final_reason: reason.into(),
                final_error: Some(message),
            });
            error = error.with_detail("totalAttempts", total);
            if self.config.call_accounting.attempts {
                // What a result's attempts would have said, so that a pack
                // can budget a failed call too (a host extension, §A.6).
                let spent = self.ledger.attempts(None);
                if let Some(tokens) = spent.output_tokens {
                    error = error.with_detail("outputTokens", tokens);
                }
                error = error.with_detail("usageComplete", spent.usage_complete);
            }
        }
        error
    }
}

impl From<&crate::config::RetryConfig> for Backoff {
    fn from(r: &crate::config::RetryConfig) -> Self {
        Self {
            base: Duration::from_millis(r.backoff_base_ms),
            max: Duration::from_millis(r.backoff_max_ms),
            max_retry_after: Duration::from_millis(r.max_retry_after_ms),
        }
    }
}

mod chain;
#[cfg(test)]
mod chain_tests;
mod judge;
mod noted;
#[cfg(test)]
mod tests;
