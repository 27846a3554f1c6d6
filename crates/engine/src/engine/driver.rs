//! The loop that drives a [`CallMachine`]: it owns the provider, the clock,
//! the sleeper, the random source and the event sink, all injected, so
//! tests run on paused time and never wait real seconds.

use super::classify::{Verdict, classify};
use super::machine::{Attempt, CallMachine, Context, Outcome, Step};
use super::schema::CompiledSchema;
use super::tools::CompiledTools;
use crate::breaker::{Answer, Breakers};
use crate::budget::{
    Budget, Charges, QuotaHeld, Quotas, ReserveError, Spend, Tally, quota_exceeded, request_bound,
    request_spend,
};
use crate::cost::{Cost, TargetPrices, Usage};
use crate::events::EventSink;
use crate::observe::{CallWatch, RequestStart};
use crate::provider::{
    BoxFuture, DeltaSink, DeltaTarget, FailureKind, Provider, ProviderFailure, ProviderReply,
    ProviderRequest,
};
use callai_wire::{CallError, CallResult};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Where the engine reads the time: tokio's clock by default, so that a
/// test on paused time sees paused time.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> Instant;
}

/// How the engine waits between requests: tokio's timer by default.
pub trait Sleeper: Send + Sync {
    /// A future that completes after `duration`.
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()>;
}

/// Where backoff jitter comes from: draws in `[0, 1)`.
pub trait Jitter: Send + Sync {
    /// The next draw.
    fn draw(&self) -> f64;
}

/// tokio's clock and timer.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioTime;

impl Clock for TokioTime {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

impl Sleeper for TokioTime {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

impl Jitter for super::backoff::SplitMix {
    fn draw(&self) -> f64 {
        self.next_f64()
    }
}

/// The engine's clock, sleeper and random source.
#[derive(Clone)]
pub(crate) struct Effects {
    pub clock: Arc<dyn Clock>,
    pub sleeper: Arc<dyn Sleeper>,
    pub jitter: Arc<dyn Jitter>,
}

impl Default for Effects {
    fn default() -> Self {
        Self {
            clock: Arc::new(TokioTime),
            sleeper: Arc::new(TokioTime),
            jitter: Arc::new(super::backoff::SplitMix::from_entropy()),
        }
    }
}

impl fmt::Debug for Effects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Effects").finish_non_exhaustive()
    }
}

/// Above this much work (rule applications times reply bytes), a reply is
/// checked on tokio's blocking pool, not on an async worker that other runs
/// share.
const INLINE_WORK: u64 = 1 << 20;

/// The turns for long schema checks: one per core.
fn check_turns() -> &'static Arc<tokio::sync::Semaphore> {
    static TURNS: std::sync::OnceLock<Arc<tokio::sync::Semaphore>> = std::sync::OnceLock::new();
    TURNS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
        Arc::new(tokio::sync::Semaphore::new(cores))
    })
}

/// Classifies `reply`: inline when it is cheap, on the blocking pool when
/// its size and its schema make it long.
async fn judge(
    reply: ProviderReply,
    schema: Option<CompiledSchema>,
    tools: Option<CompiledTools>,
    max_bytes: u64,
) -> (ProviderReply, Verdict) {
    let bytes = super::classify::reply_bytes(&reply) as usize;
    let heavy = schema
        .as_ref()
        .is_some_and(|s| s.work_for(bytes) > INLINE_WORK)
        || tools
            .as_ref()
            .is_some_and(|t| t.work_for(bytes) > INLINE_WORK);
    if !heavy {
        let verdict = classify(&reply, schema.as_ref(), tools.as_ref(), max_bytes);
        return (reply, verdict);
    }
    // A turn first: at most one long check per core runs at once, process
    // wide. A call that stops waiting (its run's wall time ended) leaves its
    // check to finish on the blocking thread, still holding the turn, so
    // stopped checks cannot pile up threads either.
    let turn = check_turns()
        .clone()
        .acquire_owned()
        .await
        .expect("the check semaphore is never closed");
    let task = tokio::task::spawn_blocking(move || {
        let verdict = classify(&reply, schema.as_ref(), tools.as_ref(), max_bytes);
        drop(turn);
        (reply, verdict)
    });
    match task.await {
        Ok(judged) => judged,
        // A panic while classifying is a host bug: surface it, do not hide it.
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// How [`drive`] runs a call, beyond the call itself.
#[derive(Clone, Copy)]
pub(crate) struct DriveOptions<'a> {
    /// The run's deadline: a wait that would pass it ends the call.
    pub deadline: Option<Instant>,
    /// The largest reply text.
    pub max_response_bytes: u64,
    /// Where a streamed text call's text goes as it arrives.
    pub deltas: Option<&'a DeltaSink>,
    /// What the call's attempts spent, kept for its budget.
    pub tally: Option<Charging<'a>>,
    /// The length of the call's schema and tools text (0 for neither).
    pub schema_bytes: u64,
    /// The largest hidden input per attempt of the call's targets.
    pub overhead: u64,
    /// The prices of the call's targets: each request that reached its
    /// provider is priced here once, for the budget and the watch.
    pub prices: &'a TargetPrices,
    /// The host's circuit breakers, told how each request ended.
    pub breakers: &'a Breakers,
    /// The providers' quotas, each request held to its own's.
    pub quotas: Option<&'a Quotas>,
}

/// How a budgeted call's attempts are charged as they go.
#[derive(Clone, Copy)]
pub(crate) struct Charging<'a> {
    /// The running tally.
    pub tally: &'a Tally,
    /// Told when an attempt reports more than its worst case.
    pub budget: &'a dyn Budget,
    /// What each target's attempts cost, for a budget in money.
    pub charges: &'a Charges,
}

impl Charging<'_> {
    /// A request to `target` goes out with `max_tokens` and `input_bound`:
    /// its worst case, now counted.
    fn sent(&self, target: usize, max_tokens: u32, input_bound: u64) -> Spend {
        let worst = self.charges.worst(target, max_tokens, input_bound);
        self.tally.sent(&worst);
        worst
    }

    /// `attempt`, sent at `worst`, was billed `usage` and cost `cost`: what
    /// it reported replaces its worst case; what it reported past it is
    /// charged and told to the budget.
    fn reported(
        &self,
        provider: &str,
        attempt: &Attempt,
        usage: Usage,
        worst: &Spend,
        input_bound: u64,
        cost: Option<&Cost>,
    ) {
        let max_tokens = attempt.request.max_tokens;
        let real = self.charges.spent(usage, max_tokens, input_bound, cost);
        let over = self.tally.reported(worst, &real);
        if over != Spend::default() {
            self.budget.overrun(provider, over);
        }
    }
}

/// Tells `provider`'s breaker for `model` how a request ended: answered
/// (a reply, or a refusal of the request itself: the provider is up), or
/// unavailable (a refused connection, a timeout, 408, 429, 5xx, a reply cut
/// off). A provider that could not answer at all (the mock's script ran
/// out) says nothing of its health.
fn health(breakers: &Breakers, provider: &str, model: &str, outcome: &Outcome, now: Instant) {
    let said;
    let answer = match outcome {
        Outcome::Reply(..) => Answer::Answered,
        Outcome::Failed(f) => match f.kind {
            FailureKind::Transient | FailureKind::Unreached | FailureKind::Interrupted => {
                said = f.to_string();
                Answer::Unavailable(&said)
            }
            FailureKind::Rejected | FailureKind::NativeUnsupported | FailureKind::TooLarge => {
                Answer::Answered
            }
            // Held back by this host, or unanswerable: nothing said of
            // the provider's health.
            FailureKind::Unanswerable | FailureKind::Throttled => return,
        },
    };
    breakers.record(provider, model, answer, now.into_std());
}

/// What `failure` of `attempt` to `provider` (its input bounded by
/// `bound`) cost, charged to the call's budget when it has one
/// (`charge`: it and the request's worst case, counted as it was sent).
/// Never sent, it is no attempt: nothing. Refused with an error status,
/// it is billed nothing (no provider bills a 503 or a 400). Sent and cut
/// or unanswered, it stays at its worst case.
fn failed(
    failure: &ProviderFailure,
    attempt: &Attempt,
    provider: &str,
    prices: &TargetPrices,
    charge: Option<(Charging<'_>, &Spend)>,
    bound: u64,
) -> Option<Cost> {
    let sent = failure.kind != FailureKind::Unreached && failure.was_sent();
    let billed = Usage::billed_for_failure(failure);
    let max_tokens = attempt.request.max_tokens;
    let cost = sent
        .then(|| {
            prices.cost(
                attempt.target,
                billed.unwrap_or_default(),
                bound,
                max_tokens,
            )
        })
        .flatten();
    if let Some((c, worst)) = charge {
        match billed {
            _ if !sent => c.tally.unsent(worst),
            Some(usage) => c.reported(provider, attempt, usage, worst, bound, cost.as_ref()),
            None => {}
        }
    }
    cost
}

/// Sends `request`: streamed to `deltas` when the call is a text call whose
/// caller streams. A failure after some text went out is `Interrupted`:
/// the caller has that text, so the request is not sent again.
async fn send(
    provider: &dyn Provider,
    request: &ProviderRequest,
    deltas: Option<&DeltaSink>,
    text_call: bool,
) -> Result<ProviderReply, ProviderFailure> {
    if request.embedding.is_some() {
        return provider.embed(request).await;
    }
    let Some(deltas) = deltas.filter(|_| text_call) else {
        return provider.complete(request).await;
    };
    let forward = Forwarded {
        to: deltas.clone(),
        any: std::sync::atomic::AtomicBool::new(false),
    };
    let forward = Arc::new(forward);
    let sink = DeltaSink::with_target(Arc::clone(&forward));
    match provider.complete_streaming(request, &sink).await {
        Err(mut f) if forward.any.load(std::sync::atomic::Ordering::Relaxed) && f.was_sent() => {
            f.kind = FailureKind::Interrupted;
            f.message = format!("{} (after part of the reply was streamed)", f.message);
            Err(f)
        }
        other => other,
    }
}

/// A sink that passes text on and remembers whether any went: a failure
/// after some did is not retried (the caller has that text).
struct Forwarded {
    to: DeltaSink,
    any: std::sync::atomic::AtomicBool,
}

impl DeltaTarget for Forwarded {
    fn push(&self, text: &str) {
        self.any.store(true, std::sync::atomic::Ordering::Relaxed);
        self.to.send(text);
    }

    fn ready(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.to.ready())
    }
}

/// Runs one call to its end: sends what the machine asks for to the
/// provider of the target it names (`providers` is parallel to the
/// machine's targets), classifies each reply, waits when told to, and
/// passes every event to `sink` as it happens, and each request to `watch`.
pub(crate) async fn drive(
    mut machine: CallMachine<'_>,
    providers: &[(&str, &dyn Provider)],
    effects: &Effects,
    sink: &dyn EventSink,
    options: DriveOptions<'_>,
    mut watch: Option<&mut dyn CallWatch>,
) -> Result<CallResult, CallError> {
    let mut step = machine.start();
    loop {
        step = match step {
            Step::Send(attempt) => {
                let (name, provider) = providers[attempt.target];
                let outcome = exchange(
                    &machine,
                    &attempt,
                    (name, provider),
                    &options,
                    watch.as_deref_mut().map(|w| w as &mut dyn CallWatch),
                )
                .await;
                let model = attempt.request.model.as_deref().unwrap_or_default();
                health(options.breakers, name, model, &outcome, effects.clock.now());
                let remaining = || {
                    options
                        .deadline
                        .map(|d| d.saturating_duration_since(effects.clock.now()))
                };
                let cx = Context {
                    jitter: effects.jitter.draw(),
                    remaining: &remaining,
                };
                machine.on_outcome(outcome, cx)
            }
            Step::Wait(duration) => {
                effects.sleeper.sleep(duration).await;
                machine.resume()
            }
            Step::Done(result) => {
                machine.drain_events().for_each(|e| sink.emit(e));
                return result;
            }
        };
        machine.drain_events().for_each(|e| sink.emit(e));
    }
}

/// Sends `attempt` to `provider` (named `name`) and says what came of it:
/// the request held back when its provider's quota has no room for it, its
/// reply judged, or its failure; what it spent charged to its call's budget
/// and to its provider's quota, and told to `watch`.
async fn exchange(
    machine: &CallMachine<'_>,
    attempt: &Attempt,
    (name, provider): (&str, &dyn Provider),
    options: &DriveOptions<'_>,
    watch: Option<&mut dyn CallWatch>,
) -> Outcome {
    let DriveOptions {
        max_response_bytes,
        deltas,
        tally,
        schema_bytes,
        overhead,
        prices,
        quotas,
        ..
    } = *options;
    // What this request's input may cost at most.
    let bound = request_bound(&attempt.request, schema_bytes) + overhead;
    let max_tokens = attempt.request.max_tokens;
    // Its room in its provider's quota, before anything is sent; at the
    // chain's end it may wait for room.
    let worst_request = request_spend(Usage::default(), max_tokens, bound, None);
    let quota = match quotas.and_then(|q| q.get(name)) {
        None => None,
        Some(q) => match QuotaHeld::take(q, worst_request, !machine.has_next_target()).await {
            Ok(held) => Some(held),
            Err(ReserveError::Refused(r)) => {
                return Outcome::Failed(ProviderFailure::throttled(quota_exceeded(name, &r)));
            }
            Err(ReserveError::Failed(e)) => return Outcome::Failed(ProviderFailure::throttled(e)),
        },
    };
    let seen = RequestStart {
        input_bound: bound,
        provider: name,
        number: attempt.number,
        reason: attempt.reason,
        max_tokens,
        model: attempt.request.model.as_deref().unwrap_or_default(),
        structured: attempt.request.structured.as_ref().map(|s| s.mode),
    };
    let mut watch = watch;
    if let Some(w) = watch.as_deref_mut() {
        w.request_started(&seen);
    }
    // A call with tools is judged whole before any of it goes out: a retry
    // could replace it.
    let text_call = machine.schema().is_none() && machine.tools().is_none();
    let worst = tally.map(|c| c.sent(attempt.target, max_tokens, bound));
    match send(provider, &attempt.request, deltas, text_call).await {
        Ok(reply) => {
            let usage = Usage::from(&reply);
            if let Some(q) = quota {
                q.settle(request_spend(usage, max_tokens, bound, None));
            }
            let cost = prices.cost(attempt.target, usage, bound, max_tokens);
            if let (Some(c), Some(worst)) = (tally, &worst) {
                c.reported(name, attempt, usage, worst, bound, cost.as_ref());
            }
            if let Some(w) = watch {
                w.request_finished(&seen, Ok(&reply), cost.as_ref());
            }
            let schema = machine.schema().cloned();
            let tools = machine.tools().cloned();
            let (reply, verdict) = judge(reply, schema, tools, max_response_bytes).await;
            Outcome::Reply(reply, verdict)
        }
        Err(failure) => {
            if let Some(q) = quota {
                q.settle(quota_spent(&failure, worst_request));
            }
            let charge = tally.zip(worst.as_ref());
            let cost = failed(&failure, attempt, name, prices, charge, bound);
            if let Some(w) = watch {
                w.request_finished(&seen, Err(&failure), cost.as_ref());
            }
            Outcome::Failed(failure)
        }
    }
}

/// What a failed request spent of its provider's quota: nothing when it
/// never reached the provider; what the provider billed for it (a refusal
/// with an error status: the request, no tokens); else, cut off or
/// unanswered, its worst case `worst`.
fn quota_spent(failure: &ProviderFailure, worst: Spend) -> Spend {
    if !failure.was_sent() {
        return Spend::default();
    }
    match Usage::billed_for_failure(failure) {
        Some(usage) => Spend {
            output_tokens: usage.output.map_or(worst.output_tokens, u64::from),
            input_tokens: usage.input.map_or(worst.input_tokens, u64::from),
            ..worst
        },
        None => worst,
    }
}
