//! One run this host started (or took over): where it stands, its live
//! events, the calls it made, and whether it is still this host's.

use super::views::{RunAnswer, Status, Tally, output_json, run_answer, run_error_json};
use callai_engine::cost::Cost;
use callai_engine::events::EventLog;
use callai_engine::observe::{CallObserver, CallStart, CallWatch, RequestEnd, RequestStart};
use callai_engine::wire::{CallError, CallResult};
use callai_host::RunOutput;
use serde_json::json;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// One run this server started.
#[derive(Debug)]
pub struct RunEntry {
    /// The tenant that owns it.
    pub tenant: String,
    /// Its id, unique among its tenant's runs.
    pub run_id: String,
    /// The pack it runs.
    pub pack: String,
    /// The node id its events carry.
    pub node_id: String,
    /// Its events, live.
    pub events: EventLog,
    /// The W3C `traceparent` its caller sent (a run taken over from
    /// another host has none: its spans start a trace of their own).
    pub trace_parent: Option<String>,
    state: Mutex<(Status, u32)>,
    /// Calls made so far (served from a log, or seen going live).
    calls: AtomicU32,
    done: watch::Sender<bool>,
    /// The run is no longer this host's (another took it over, or this one
    /// handed it on at shutdown): the run log says where it stands.
    handed_on: std::sync::atomic::AtomicBool,
}

impl RunEntry {
    /// Run `run_id` of `tenant`, about to be queued.
    pub fn new(tenant: String, run_id: String, pack: String, node_id: String) -> Self {
        Self {
            tenant,
            run_id,
            pack,
            node_id,
            events: EventLog::new(),
            trace_parent: None,
            state: Mutex::new((Status::Running, 0)),
            calls: AtomicU32::new(0),
            done: watch::channel(false).0,
            handed_on: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The same run, its spans under the caller's `trace_parent`.
    pub fn under(mut self, trace_parent: Option<String>) -> Self {
        self.trace_parent = trace_parent;
        self
    }

    /// The run ended with `output`.
    pub fn finish(&self, output: &RunOutput) {
        let status = match &output.result {
            Ok(text) => Status::Ok(output_json(text)),
            Err(e) => Status::Failed(run_error_json(e)),
        };
        self.end(status, output.calls);
    }

    /// Counts `n` calls the run made without the server seeing them go
    /// live (served from a run log on resume).
    pub fn add_calls(&self, n: u32) {
        self.calls.fetch_add(n, Ordering::Relaxed);
    }

    /// The run ended without running to its end (`kind`, `message`).
    pub fn fail(&self, kind: &str, message: &str) {
        let calls = self.calls.load(Ordering::Relaxed);
        self.end(
            Status::Failed(json!({"kind": kind, "message": message})),
            calls,
        );
    }

    /// The run went to another host (`kind`, `message` say why): what this
    /// host says of it from now on is read from the run log.
    pub fn hand_on(&self, kind: &str, message: &str) {
        self.handed_on.store(true, Ordering::Release);
        self.fail(kind, message);
    }

    /// Whether the run is another host's now.
    pub fn is_handed_on(&self) -> bool {
        self.handed_on.load(Ordering::Acquire)
    }

    fn end(&self, status: Status, calls: u32) {
        *self.state.lock().expect("run state") = (status, calls);
        self.done.send_replace(true);
    }

    /// Whether it has ended.
    pub fn is_done(&self) -> bool {
        *self.done.borrow()
    }

    /// Its key in the run log.
    pub fn key(&self) -> callai_engine::RunKey<'_> {
        callai_engine::RunKey::new(&self.tenant, &self.run_id)
    }

    /// Completes when the run ends.
    pub async fn wait(&self) {
        let mut rx = self.done.subscribe();
        // The sender lives as long as the entry.
        let _ = rx.wait_for(|done| *done).await;
    }

    /// `{"runId", "status", "calls", "attempts", "output"?, "error"?}`.
    pub fn answer(&self) -> RunAnswer {
        let (status, calls) = self.state.lock().expect("run state").clone();
        let events = self.events.snapshot();
        let calls = match status {
            Status::Running => self.calls.load(Ordering::Relaxed),
            _ => calls,
        };
        run_answer(&self.run_id, status, calls, Tally::of(&events))
    }
}

/// Counts a run's calls as they start (the observer of [`RunEntry`]).
#[derive(Debug, Clone)]
pub struct CallCounter(pub Arc<RunEntry>);

struct Unwatched;

impl CallWatch for Unwatched {
    fn request_started(&mut self, _: &RequestStart<'_>) {}
    fn request_finished(&mut self, _: &RequestStart<'_>, _: RequestEnd<'_>, _: Option<&Cost>) {}
    fn call_finished(self: Box<Self>, _: Result<&CallResult, &CallError>) {}
}

impl CallObserver for CallCounter {
    fn call_started(&self, _: &CallStart<'_>) -> Box<dyn CallWatch> {
        self.0.add_calls(1);
        Box::new(Unwatched)
    }
    fn call_refused(&self, _: &str, _: &CallError) {
        self.0.add_calls(1);
    }
}
