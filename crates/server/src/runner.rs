//! One run, from `POST /v1/runs` to its end: admitted (or turned away),
//! queued for a slot, journaled when a run log is set, observed (metrics,
//! traces, its calls counted), and stopped cleanly when a shutdown's grace
//! period ends.

use crate::app::{AppState, ok_json};
use crate::body::RunRequest;
use crate::error::ApiError;
use crate::runs::{CallCounter, RunEntry, run_error_json};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use callai_host::runlog::RunStatus;
use callai_host::{Journal, RunLogError, RunOptions, RunOutput};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// Starts the run `request` asks for; answers when it ends, or at once
/// (`202`) when the caller does not wait.
pub async fn start(state: Arc<AppState>, request: RunRequest) -> Result<Response, ApiError> {
    let info = state
        .packs
        .get(&request.pack)
        .ok_or_else(|| ApiError::not_found(format!("no pack {:?} on this host", request.pack)))?;
    if request.durable && state.runlog.is_none() {
        return Err(ApiError::invalid(
            "durable",
            "a durable run needs a run log ([runlog] url or --runlog)",
        ));
    }
    if request.script.is_some() && !state.config().provider_allowed("mock") {
        return Err(ApiError::invalid(
            "script",
            "the mock provider is not allowed by this host's policy",
        ));
    }
    // Compile first (once per component): a pack that is no longer readable
    // fails here, before any slot is taken.
    let pack = state.packs.pack(&info).await?;
    let ticket = state.admission.admit()?;
    let run_id = request.run_id.clone().unwrap_or_else(new_run_id);
    let entry = Arc::new(RunEntry::new(
        run_id.clone(),
        info.name.clone(),
        info.node_id.clone(),
    ));
    state.runs.insert(entry.clone())?;
    let journal = match journal(&state, &entry).await {
        Ok(journal) => journal,
        Err(e) => {
            state.runs.remove(&run_id);
            return Err(e);
        }
    };
    let script = request.script.clone().or_else(|| {
        info.default_script
            .as_deref()
            .and_then(|s| callai_host::MockScript::from_json(s).ok())
    });
    let work = Work {
        state: state.clone(),
        entry: entry.clone(),
        pack,
        input: request.input.clone(),
        script,
        journal,
    };
    state.tasks.spawn(work.run(ticket));
    if !request.wait {
        let body = json!({"runId": run_id, "status": "running"});
        return Ok((StatusCode::ACCEPTED, axum::Json(body)).into_response());
    }
    entry.wait().await;
    let mut body = entry.to_json();
    if request.events {
        let events: Vec<_> = entry
            .events
            .snapshot()
            .iter()
            .map(|e| e.to_json())
            .collect();
        body["events"] = events.into();
    }
    Ok(ok_json(body))
}

/// The run's journal: recording into the run log when there is one. A run
/// id the log already holds is a conflict.
async fn journal(state: &AppState, entry: &RunEntry) -> Result<Journal, ApiError> {
    let Some(log) = &state.runlog else {
        return Ok(Journal::live());
    };
    Journal::record(log.clone(), &entry.run_id, &entry.node_id, false)
        .await
        .map_err(|e| match e {
            RunLogError::RunExists(id) => {
                ApiError::conflict(format!("run {id:?} is already in the run log"))
            }
            e => ApiError::internal(e.to_string()),
        })
}

/// A run id nobody chose: `run-` and 128 random bits.
fn new_run_id() -> String {
    let (a, b) = (
        callai_host::runlog::RunSeed::fresh().seed,
        callai_host::runlog::RunSeed::fresh().seed,
    );
    format!("run-{a:016x}{b:016x}")
}

struct Work {
    state: Arc<AppState>,
    entry: Arc<RunEntry>,
    pack: callai_host::Pack,
    input: String,
    script: Option<callai_host::MockScript>,
    journal: Journal,
}

impl Work {
    async fn run(mut self, mut ticket: crate::admission::Ticket) {
        let state = self.state.clone();
        let stop = state.admission.stop_token();
        let journal = std::mem::take(&mut self.journal);
        tokio::select! {
            () = ticket.start() => {}
            () = stop.cancelled() => {
                let message = "the host shut down before the run started";
                self.entry.fail("shutdown", message);
                self.close_log(journal.fence(), message).await;
                self.end(false, None);
                return;
            }
        }
        state.report_load();
        let began = Instant::now();
        let ok = self.execute(journal, &stop).await;
        drop(ticket);
        state.report_load();
        self.end(ok, Some(began));
    }

    /// Runs the node; whether it returned `Ok`.
    async fn execute(&self, journal: Journal, stop: &tokio_util::sync::CancellationToken) -> bool {
        let state = &self.state;
        let entry = &self.entry;
        let fence = journal.fence();
        let trace = state
            .telemetry
            .as_ref()
            .map(|t| t.run(&entry.node_id, Some(&entry.run_id), &entry.pack));
        let mut observers = state.observers().with(Arc::new(CallCounter(entry.clone())));
        if let Some(trace) = &trace {
            observers = observers.with(trace.observer());
        }
        let options = RunOptions {
            journal,
            observer: Some(Arc::new(observers)),
            events: Some(entry.events.clone()),
        };
        let host = state.host_with(self.script.clone());
        let run = self
            .pack
            .run_with(&host, &entry.node_id, &self.input, options);
        let output: Option<RunOutput> = tokio::select! {
            output = run => Some(output),
            () = stop.cancelled() => None,
        };
        match output {
            Some(output) => {
                entry.finish(&output);
                if let Some(trace) = &trace {
                    let error = output
                        .result
                        .as_ref()
                        .err()
                        .map(|e| run_error_json(e).to_string());
                    trace.end(error.as_deref().map_or(Ok(()), Err));
                }
                output.result.is_ok()
            }
            None => {
                let message = "the host shut down while the run was going on";
                entry.fail("shutdown", message);
                if let Some(trace) = &trace {
                    trace.end(Err(message));
                }
                self.close_log(fence, message).await;
                false
            }
        }
    }

    /// A recorded run stopped by a shutdown is closed as failed, so that
    /// nobody waits on it; what it committed stays.
    async fn close_log(&self, fence: Option<callai_host::runlog::Fence>, message: &str) {
        if let (Some(log), Some(fence)) = (&self.state.runlog, fence) {
            let output = json!({"error": {"kind": "shutdown", "message": message}});
            let _ = log
                .finish(
                    &self.entry.run_id,
                    fence,
                    &[],
                    RunStatus::Failed,
                    &output.to_string(),
                )
                .await;
        }
    }

    fn end(&self, ok: bool, began: Option<Instant>) {
        if let Some(began) = began {
            self.state.metrics.run_finished(ok, began.elapsed());
        } else {
            self.state
                .metrics
                .run_finished(false, std::time::Duration::ZERO);
        }
        self.state.runs.finished(&self.entry.run_id);
    }
}
