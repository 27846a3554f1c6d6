//! The run session: everything one run of a node does with ctx.callAI that
//! is not wasm — per-run limits, the journal (live, record, replay), the
//! run's events, and how the run ends. The wasm layer only converts WIT
//! types and hands each call here; a host that runs nodes some other way
//! can drive a session directly.

mod input;
mod journal;
mod limits;

pub use input::CallInput;
pub use journal::{Journal, Recording};
use limits::LogBudget;

use crate::events::{Event, EventLog, EventSink};
use crate::observe::SharedObserver;
use crate::runlog::{RecordedCall, RunLogError, RunStatus};
use crate::{CallOptions, Host};
use callai_wire::{CallAccounting, CallError, CallRequest, CallResult, ParsedRequest};
use journal::Replayed;
use serde_json::Value;

/// Why a run produced no output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// The node returned `Err`.
    #[error("the node failed: {0}")]
    Node(String),
    /// The pack trapped (panic, `unreachable`, out-of-bounds access...).
    #[error("the pack trapped: {0}")]
    Trap(String),
    /// A per-run limit stopped the pack.
    #[error("stopped by {key}: {message}")]
    Limit {
        /// The config key of the limit, e.g. `limits.fuel`.
        key: &'static str,
        /// What the pack did.
        message: String,
    },
    /// Replay met a call other than the recorded one; the run was stopped.
    #[error("replay diverged: {0}")]
    ReplayDiverged(String),
    /// The run log could not record the run; the run was stopped.
    #[error("{0}")]
    RunLog(String),
}

impl RunError {
    /// The error as JSON, as `callai run` prints it.
    pub fn to_json(&self) -> Value {
        let (kind, message) = match self {
            Self::Node(m) => ("node", m.clone()),
            Self::Trap(m) => ("trap", m.clone()),
            Self::Limit { key, message } => {
                return serde_json::json!({"error": {"kind": "limit", "limit": key, "message": message}});
            }
            Self::ReplayDiverged(m) => ("replay_diverged", m.clone()),
            Self::RunLog(m) => ("run_log", m.clone()),
        };
        serde_json::json!({"error": {"kind": kind, "message": message}})
    }
}

/// One run of one node: its calls, events, journal and limits.
#[derive(Debug)]
pub struct RunSession {
    host: Host,
    node_id: String,
    events: EventLog,
    calls: u32,
    journal: Journal,
    /// Why the host stopped the run, when it did; wins over what the guest saw.
    abort: Option<RunError>,
    /// When the run's wall time ends.
    deadline: Option<tokio::time::Instant>,
    log: LogBudget,
    observer: Option<SharedObserver>,
    shared_events: bool,
    deltas: Option<crate::provider::DeltaSink>,
    budget: Option<crate::budget::SharedBudget>,
}

impl RunSession {
    /// A session for one run of `node_id` on `host`, with `journal`.
    pub fn new(host: Host, node_id: impl Into<String>, journal: Journal) -> Self {
        Self {
            host,
            node_id: node_id.into(),
            events: EventLog::new(),
            calls: 0,
            journal,
            abort: None,
            deadline: None,
            log: LogBudget::default(),
            observer: None,
            shared_events: false,
            deltas: None,
            budget: None,
        }
    }

    /// Holds every call served live to `budget`: each reserves its worst
    /// case before it sends anything and is charged what it spent.
    pub fn with_budget(mut self, budget: crate::budget::SharedBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Streams the text of the session's text calls to `deltas` as their
    /// providers send it (a caller that relays it, as `serve`'s drop-in
    /// endpoints do); a call that has streamed some text is not retried.
    pub fn with_deltas(mut self, deltas: crate::provider::DeltaSink) -> Self {
        self.deltas = Some(deltas);
        self
    }

    /// Collects the run's events in `events` (a log the caller keeps a
    /// handle on, to watch the run as it goes) instead of a fresh one. A
    /// log that keeps none ([`EventLog::discarding`]) is taken only by a
    /// live session: one that records or replays its calls keeps their
    /// events in a log of its own, since its record holds them.
    pub fn with_events(mut self, events: EventLog) -> Self {
        if events.keeps() || self.journal.is_live() {
            self.events = events;
            self.shared_events = true;
        }
        self
    }

    /// Tells `observer` of every call served live, and of each provider
    /// request it sends.
    pub fn with_observer(mut self, observer: SharedObserver) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Ends the run's wall time at `deadline`: a provider wait that would
    /// pass it ends the call at once.
    pub fn with_deadline(mut self, deadline: tokio::time::Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The seed and clock the run's sandbox gets.
    pub fn seed(&self) -> crate::runlog::RunSeed {
        self.journal.seed()
    }

    /// The node id the run's events carry.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// The calls the node has made so far.
    pub fn calls(&self) -> u32 {
        self.calls
    }

    /// The host's `callAccounting` flags.
    pub fn call_accounting(&self) -> CallAccounting {
        self.host.config().call_accounting
    }

    /// The run's events so far.
    pub fn events(&self) -> Vec<Event> {
        self.events.snapshot()
    }

    /// One ctx.callAI call: checked against the run's limits, then served
    /// live, recorded, or replayed from the log. `Ok` is what the pack
    /// receives; `Err` stops the run (a limit, a divergence, a run log that
    /// cannot record), and the same error is what the run then reports.
    pub async fn call(
        &mut self,
        input: CallInput,
    ) -> Result<Result<CallResult, CallError>, RunError> {
        let index = self.count_call(&input)?;
        let entry = input.entry();
        let (request, key) = self.check(input);
        if self.journal.serves_from_log(index) {
            return match self.journal.replay_call(&self.node_id, index, entry, &key) {
                Replayed::Served(outcome, events) => {
                    events.into_iter().for_each(|e| self.events.emit(e));
                    self.journal.caught_up(index, self.events.len());
                    Ok(outcome.into_result())
                }
                Replayed::Diverged(reason) => {
                    let error = self.diverged(index, reason);
                    Err(self.stop(error))
                }
            };
        }
        let start = self.events.len();
        let outcome = match request {
            Ok(request) => self.serve_live(&request).await?,
            Err(e) => {
                if let Some(o) = &self.observer {
                    o.call_refused(&self.node_id, &e);
                }
                Err(e)
            }
        };
        if !self.journal.is_live() {
            let call = RecordedCall {
                node_id: self.node_id.clone(),
                index,
                entry,
                request: key,
                outcome: crate::runlog::Outcome::of(&outcome),
                events: self.events.since(start),
            };
            if let Err(e) = self.journal.commit(&call, &self.events).await {
                let error = match e {
                    RunLogError::RunTooLarge { .. } => RunError::Limit {
                        key: "runlog.maxRunBytes",
                        message: e.to_string(),
                    },
                    e => RunError::RunLog(e.to_string()),
                };
                return Err(self.stop(error));
            }
        }
        Ok(outcome)
    }

    /// Serves a checked request live, within the run's wall time: it ends
    /// the call even while a reply is being checked on the blocking pool or
    /// a provider is slow.
    async fn serve_live(
        &mut self,
        request: &CallRequest,
    ) -> Result<Result<CallResult, CallError>, RunError> {
        let options = CallOptions {
            deadline: self.deadline,
            observer: self.observer.clone(),
            deltas: self.deltas.clone(),
            budget: self.budget.clone(),
        };
        let call = (self.host).call_with(&self.node_id, request, &self.events, options);
        let Some(deadline) = self.deadline else {
            return Ok(call.await);
        };
        match tokio::time::timeout_at(deadline, call).await {
            Ok(outcome) => Ok(outcome),
            Err(_) => {
                let wall = self.host.config().limits.wall_ms;
                Err(self.stop(RunError::Limit {
                    key: "limits.wallMs",
                    message: format!("the run took longer than {wall} ms"),
                }))
            }
        }
    }

    /// The checked request, and its key in a run log: the canonical JSON of
    /// the request when it passed its checks, else what the pack sent (made
    /// only when the run is journaled).
    fn check(&self, input: CallInput) -> (Result<CallRequest, CallError>, Value) {
        let (checked, mut key) = self.check_keyed(input);
        crate::images::without_image_bytes(&mut key);
        (checked, key)
    }

    /// [`Self::check`], the key with any image bytes it holds.
    fn check_keyed(&self, input: CallInput) -> (Result<CallRequest, CallError>, Value) {
        let retry_field = self.call_accounting().retry_field();
        let keyed = !self.journal.is_live();
        let checked = |parsed: ParsedRequest| {
            let (request, unknown) = parsed.check(retry_field)?;
            (self.host)
                .unknown_fields(&self.node_id, unknown, &self.events)
                .map(|()| request)
        };
        match input {
            CallInput::Json(text) => {
                let request = ParsedRequest::from_json(&text).and_then(checked);
                let key = match (&request, keyed) {
                    (_, false) => Value::Null,
                    (Ok(r), true) => r.canonical(),
                    (Err(_), true) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
                };
                (request, key)
            }
            CallInput::Parsed(parsed) => {
                let request = checked(parsed);
                let key = match (&request, keyed) {
                    (_, false) => Value::Null,
                    (Ok(r), true) => r.canonical(),
                    // What was sent is not kept: the refusal stands for it.
                    (Err(e), true) => e.to_json(),
                };
                (request, key)
            }
            CallInput::Typed(mut request) => {
                if retry_field == callai_wire::RetryField::Ignored {
                    request.retry = None;
                }
                let key = if keyed {
                    request.canonical()
                } else {
                    Value::Null
                };
                let checked = request.check(retry_field).map(|()| request);
                (checked, key)
            }
        }
    }

    /// Emits `replay.diverged` naming call `index`.
    fn diverged(&self, index: u32, reason: String) -> RunError {
        self.events.emit(Event::ReplayDiverged {
            node_id: self.node_id.clone(),
            call_index: index,
            reason: reason.clone(),
        });
        RunError::ReplayDiverged(reason)
    }

    /// Stops the run with `error`, which the run reports whatever the guest
    /// does next.
    fn stop(&mut self, error: RunError) -> RunError {
        self.abort.get_or_insert(error).clone()
    }

    /// Ends the run: the reason the host stopped it (a limit, a divergence,
    /// a run log that failed) wins over what the guest saw; a replay that
    /// made too few calls diverged; a recorded run is closed with its
    /// output. Returns the run's result and takes its events.
    pub async fn finish(
        &mut self,
        result: Result<String, RunError>,
    ) -> (Result<String, RunError>, Vec<Event>) {
        let mut result = match self.abort.take() {
            Some(abort) => Err(abort),
            None => result,
        };
        if result.is_ok()
            && let Some(reason) = self.journal.missing_calls(self.calls)
        {
            result = Err(self.diverged(self.calls, reason));
        }
        if self.log.dropped_lines > 0 || self.log.dropped_bytes > 0 {
            self.events.emit(Event::PackLogDropped {
                node_id: self.node_id.clone(),
                lines: self.log.dropped_lines,
                bytes: self.log.dropped_bytes,
            });
        }
        let (status, output) = match &result {
            Ok(out) => (RunStatus::Ok, out.clone()),
            Err(e) => (RunStatus::Failed, e.to_json().to_string()),
        };
        // A resume that diverged leaves the run as it was, for a resume
        // with the right pack and input.
        let diverged = matches!(result, Err(RunError::ReplayDiverged(_)));
        if !(diverged && self.journal.is_resume())
            && let Err(e) = self.journal.finish(&self.events, status, &output).await
        {
            result = Err(RunError::RunLog(e.to_string()));
        }
        // A log the caller shares keeps its events for the caller to read.
        let events = match self.shared_events {
            true => self.events.snapshot(),
            false => self.events.take(),
        };
        (result, events)
    }
}
