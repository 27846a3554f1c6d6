//! One run, from `POST /v1/runs` (or a takeover) to its end: admitted (or
//! turned away), queued for a slot, journaled when a run log is set,
//! leased when durable, observed (metrics, traces, its calls counted), and
//! stopped cleanly when a shutdown's grace period ends.

use crate::admission::Ticket;
use crate::answer::{Accepted, StatusWord};
use crate::body::RunRequest;
use crate::error::ApiError;
use crate::runs::{self, CallCounter, RunEntry, run_error_json};
use crate::state::AppState;
use crate::tenants::{Caller, TenantBudget};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use callai_engine::runlog::{Fence, Lease, RunKey, RunSpec, RunStatus};
use callai_engine::{Journal, MockScript, Recording, RunError, RunLogError};
use callai_host::{Pack, RunOptions, RunOutput};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// Starts the run `request` asks for; answers when it ends, or at once
/// (`202`) when the caller does not wait.
pub async fn start(
    state: Arc<AppState>,
    caller: Caller,
    request: RunRequest,
) -> Result<Response, ApiError> {
    let info = state
        .packs
        .get(caller.name(), &request.pack)
        .ok_or_else(|| ApiError::not_found(format!("no pack {:?} on this host", request.pack)))?;
    if request.durable && state.runlog.is_none() {
        return Err(ApiError::invalid(
            "durable",
            "a durable run needs a run log ([runlog] url or --runlog)",
        ));
    }
    if request.script.is_some() && !caller.0.host.config().provider_allowed("mock") {
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
        caller.name().to_owned(),
        run_id.clone(),
        info.name.clone(),
        info.node_id.clone(),
    ));
    state.runs.insert(entry.clone())?;
    let script_text = match &request.script {
        Some((_, text)) => Some(text.clone()),
        None => info.default_script.clone(),
    };
    let spec = RunSpec {
        pack: info.name.clone(),
        sha256: info.sha256.clone(),
        input: request.input.clone(),
        script: script_text.clone(),
        tenant: None,
    };
    let begun = begin(&state, &entry, &spec, request.durable, &info.source).await;
    let (journal, lease) = match begun {
        Ok(begun) => begun,
        Err(e) => {
            state.runs.remove(&entry);
            return Err(e);
        }
    };
    let script = script_text.and_then(|s| MockScript::from_json(&s).ok());
    let work = Work {
        state: state.clone(),
        entry: entry.clone(),
        caller,
        pack,
        input: request.input.clone(),
        script,
        lease,
    };
    state.tasks.spawn(work.run(ticket, journal));
    if !request.wait {
        let body = Accepted {
            run_id,
            status: StatusWord::Running,
        };
        return Ok((StatusCode::ACCEPTED, axum::Json(body)).into_response());
    }
    entry.wait().await;
    if entry.is_handed_on()
        && let Ok(run) = state.load(entry.key()).await
    {
        // Another host has the run now: say where the log has it.
        let mut answer = runs::inspected_answer(&run);
        if request.events {
            answer.events = Some(run.run.events);
        }
        return Ok(axum::Json(answer).into_response());
    }
    let mut answer = entry.answer();
    if request.events {
        answer.events = Some(entry.events.snapshot());
    }
    Ok(axum::Json(answer).into_response())
}

/// The run's journal: recording into the run log when there is one (with
/// what it was started with, so that it can be resumed; leased and its
/// pack kept in the log when durable). A run id its tenant holds in the log
/// is a conflict; another tenant's run of the same id is another run.
async fn begin(
    state: &AppState,
    entry: &RunEntry,
    spec: &RunSpec,
    durable: bool,
    source: &crate::packs::PackSource,
) -> Result<(Journal, Option<Fence>), ApiError> {
    let Some(log) = &state.runlog else {
        return Ok((Journal::live(), None));
    };
    let internal = |e: RunLogError| ApiError::internal(e.to_string());
    if durable {
        let bytes = source.bytes().map_err(ApiError::internal)?;
        log.put_pack(&spec.sha256, &bytes).await.map_err(internal)?;
    }
    let lease = durable.then(|| Lease {
        owner: &state.host_id,
        duration: state.runlog_config.lease(),
    });
    let recording = Recording {
        spec: Some(spec),
        lease,
        ..Recording::default()
    };
    let journal = Journal::record(log.clone(), entry.key(), &entry.node_id, recording)
        .await
        .map_err(|e| match e {
            RunLogError::RunExists(id) => {
                ApiError::conflict(format!("run {id:?} is already in the run log"))
            }
            e => internal(e),
        })?;
    let fence = if durable { journal.fence() } else { None };
    Ok((journal, fence))
}

/// A run id nobody chose: `run-` and 128 random bits.
fn new_run_id() -> String {
    let (a, b) = (
        callai_engine::runlog::RunSeed::fresh().seed,
        callai_engine::runlog::RunSeed::fresh().seed,
    );
    format!("run-{a:016x}{b:016x}")
}

/// A run about to go: what it runs, and how.
pub(crate) struct Work {
    pub state: Arc<AppState>,
    pub entry: Arc<RunEntry>,
    /// Whose run it is: its policy and budget.
    pub caller: Caller,
    pub pack: Pack,
    pub input: String,
    pub script: Option<MockScript>,
    /// The fence of a durable run's lease, renewed while it runs.
    pub lease: Option<Fence>,
}

impl Work {
    /// Waits for a slot, runs, records the end.
    pub(crate) async fn run(self, mut ticket: Ticket, journal: Journal) {
        let state = self.state.clone();
        let stop = state.admission.stop_token();
        tokio::select! {
            () = ticket.start() => {}
            () = stop.cancelled() => {
                let message = "the host shut down before the run started";
                self.entry.fail("shutdown", message);
                self.hand_on_or_close(journal.fence(), message).await;
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
    async fn execute(&self, journal: Journal, stop: &CancellationToken) -> bool {
        let state = &self.state;
        let entry = &self.entry;
        let fence = journal.fence();
        let trace = state
            .telemetry
            .as_ref()
            .map(|t| t.run(&entry.node_id, Some(&entry.run_id), &entry.pack));
        // Each call of the run is traced under an id of its own.
        let tracer = crate::calls::CallTracer::new(
            state.calls.clone(),
            crate::calls::Origin {
                tenant: entry.tenant.as_str().into(),
                endpoint: "run",
                run_id: Some(entry.run_id.clone()),
            },
            state.metrics.clone(),
            None,
        );
        let mut observers = state
            .observers()
            .with(Arc::new(CallCounter(entry.clone())))
            .with(Arc::new(tracer));
        if let Some(trace) = &trace {
            observers = observers.with(trace.observer());
        }
        let options = RunOptions {
            journal,
            observer: Some(Arc::new(observers)),
            events: Some(entry.events.clone()),
            budget: TenantBudget::of(&self.caller).map(|b| b.shared()),
        };
        let host = state.host_for(&self.caller.0, self.script.clone());
        let run = self
            .pack
            .run_with(&host, &entry.node_id, &self.input, options);
        let lost = keep_lease(state, entry.key(), self.lease);
        let output: Result<RunOutput, &str> = tokio::select! {
            output = run => Ok(output),
            () = stop.cancelled() => Err("the host shut down while the run was going on"),
            () = lost => Err("another host took the run over"),
        };
        match output {
            Ok(output) if self.fenced_out(&output).await => {
                entry.hand_on("taken_over", "another host took the run over");
                if let Some(trace) = &trace {
                    trace.end(Err("another host took the run over"));
                }
                false
            }
            Ok(output) => {
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
            Err(message) => {
                let kind = if stop.is_cancelled() {
                    "shutdown"
                } else {
                    "taken_over"
                };
                if self.lease.is_some() {
                    // A durable run is another host's from here on.
                    entry.hand_on(kind, message);
                } else {
                    entry.fail(kind, message);
                }
                if let Some(trace) = &trace {
                    trace.end(Err(message));
                }
                self.hand_on_or_close(fence, message).await;
                false
            }
        }
    }

    /// Whether a durable run ended on a run-log error because another host
    /// holds it now (its commit was fenced): then its end is that host's.
    async fn fenced_out(&self, output: &RunOutput) -> bool {
        let (Some(log), Some(fence)) = (&self.state.runlog, self.lease) else {
            return false;
        };
        if !matches!(output.result, Err(RunError::RunLog(_))) {
            return false;
        }
        let lease = self.state.runlog_config.lease();
        matches!(
            log.renew(self.entry.key(), fence, lease).await,
            Err(RunLogError::Fenced(_))
        )
    }

    /// A run stopped before its end: a durable one is handed on (its lease
    /// lapses now, and another host resumes it); any other recorded run is
    /// closed as failed, so that nobody waits on it. What it committed stays.
    async fn hand_on_or_close(&self, fence: Option<Fence>, message: &str) {
        if let (Some(log), Some(lease)) = (&self.state.runlog, self.lease) {
            let _ = log.release(self.entry.key(), lease).await;
        } else if let (Some(log), Some(fence)) = (&self.state.runlog, fence) {
            let output = json!({"error": {"kind": "shutdown", "message": message}});
            let _ = log
                .finish(
                    self.entry.key(),
                    fence,
                    &[],
                    RunStatus::Failed,
                    &output.to_string(),
                )
                .await;
        }
    }

    fn end(&self, ok: bool, began: Option<Instant>) {
        let took = began.map_or(std::time::Duration::ZERO, |b| b.elapsed());
        self.state.metrics.run_finished(ok, took);
        self.state.runs.finished(&self.entry);
    }
}

/// Renews a durable run's lease every third of its length. Completes when
/// another host has taken the run over; never, for a run without a lease.
/// A renewal that fails for another reason is tried again at the next
/// tick: if the store stays away the lease lapses, another host takes over,
/// and this host's next commit is refused by the fence.
async fn keep_lease(state: &AppState, run: RunKey<'_>, fence: Option<Fence>) {
    let (Some(log), Some(fence)) = (&state.runlog, fence) else {
        return std::future::pending().await;
    };
    let lease = state.runlog_config.lease();
    loop {
        tokio::time::sleep(lease / 3).await;
        if let Err(RunLogError::Fenced(_)) = log.renew(run, fence, lease).await {
            return;
        }
    }
}
