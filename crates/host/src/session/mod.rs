//! The run session: everything one run of a node does with ctx.callAI that
//! is not wasm — per-run limits, the journal (live, record, replay), the
//! run's events, and how the run ends. The wasm layer only converts WIT
//! types and hands each call here; a host that runs nodes some other way
//! can drive a session directly.

mod journal;

pub use journal::Journal;

use crate::events::{Event, EventLog, EventSink};
use crate::runlog::{Entry, RecordedCall, RunStatus};
use crate::{CallOptions, Host};
use callai_wire::{CallAccounting, CallError, CallRequest, CallResult};
use journal::Replayed;
use serde_json::Value;
use std::io::Write;

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

/// A ctx.callAI call as a pack made it, before any check.
#[derive(Debug, Clone)]
pub enum CallInput {
    /// Through `call-ai-json`: the request's wire JSON text.
    Json(String),
    /// Through `call-ai`: the typed request (not yet checked).
    Typed(CallRequest),
}

impl CallInput {
    fn entry(&self) -> Entry {
        match self {
            Self::Json(_) => Entry::Json,
            Self::Typed(_) => Entry::Typed,
        }
    }

    /// The bytes the request carries, counted on its wire JSON: every
    /// message costs its framing too, so a request of many empty messages
    /// is as large as what a provider would be sent.
    fn size(&self) -> u64 {
        match self {
            Self::Json(text) => text.len() as u64,
            Self::Typed(request) => {
                let mut counter = ByteCounter(0);
                serde_json::to_writer(&mut counter, request).expect("counting cannot fail");
                counter.0
            }
        }
    }
}

struct ByteCounter(u64);

impl Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
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
        }
    }

    /// Ends the run's wall time at `deadline`: a provider wait that would
    /// pass it ends the call at once.
    pub fn with_deadline(mut self, deadline: tokio::time::Instant) -> Self {
        self.deadline = Some(deadline);
        self
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

    /// Records a line the pack logged.
    pub fn log(&mut self, level: &str, message: String) {
        self.events.emit(Event::PackLog {
            node_id: self.node_id.clone(),
            level: level.into(),
            message,
        });
    }

    /// One ctx.callAI call: checked against the run's limits, then served
    /// live, recorded, or replayed from the log. `Ok` is what the pack
    /// receives; `Err` stops the run (a limit, a divergence, a run log that
    /// cannot record), and the same error is what the run then reports.
    pub async fn call(
        &mut self,
        input: CallInput,
    ) -> Result<Result<CallResult, CallError>, RunError> {
        let index = self.calls;
        self.calls += 1;
        let limits = self.host.config().limits;
        if self.calls > limits.max_calls_per_run {
            let message = format!(
                "call {} is over the limit of {} calls per run",
                self.calls, limits.max_calls_per_run
            );
            return Err(self.stop(RunError::Limit {
                key: "limits.maxCallsPerRun",
                message,
            }));
        }
        let size = input.size();
        if size > limits.max_request_bytes {
            let message = format!(
                "a request of {size} bytes is over the limit of {}",
                limits.max_request_bytes
            );
            return Err(self.stop(RunError::Limit {
                key: "limits.maxRequestBytes",
                message,
            }));
        }
        let entry = input.entry();
        let (request, key) = self.check(input);
        if self.journal.is_replay() {
            return match self.journal.replay_call(&self.node_id, index, entry, &key) {
                Replayed::Served(outcome, events) => {
                    events.into_iter().for_each(|e| self.events.emit(e));
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
            Ok(request) => {
                let options = CallOptions {
                    deadline: self.deadline,
                };
                (self.host)
                    .call_with(&self.node_id, &request, &self.events, options)
                    .await
            }
            Err(e) => Err(e),
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
                return Err(self.stop(RunError::RunLog(e.to_string())));
            }
        }
        Ok(outcome)
    }

    /// The checked request, and its key in a run log: the canonical JSON of
    /// the request when it passed its checks, else what the pack sent (made
    /// only when the run is journaled).
    fn check(&self, input: CallInput) -> (Result<CallRequest, CallError>, Value) {
        let honour_retry = self.call_accounting().retry_policy;
        let keyed = !self.journal.is_live();
        match input {
            CallInput::Json(text) => {
                let request = CallRequest::from_json(&text, honour_retry);
                let key = match (&request, keyed) {
                    (_, false) => Value::Null,
                    (Ok(r), true) => r.canonical(),
                    (Err(_), true) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
                };
                (request, key)
            }
            CallInput::Typed(mut request) => {
                if !honour_retry {
                    request.retry = None;
                }
                let key = if keyed {
                    request.canonical()
                } else {
                    Value::Null
                };
                let checked = request.check(honour_retry).map(|()| request);
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
        let (status, output) = match &result {
            Ok(out) => (RunStatus::Ok, out.clone()),
            Err(e) => (RunStatus::Failed, e.to_json().to_string()),
        };
        if let Err(e) = self.journal.finish(&self.events, status, &output).await {
            result = Err(RunError::RunLog(e.to_string()));
        }
        (result, self.events.take())
    }
}
