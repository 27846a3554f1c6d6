//! A run's task, from its slot to its end: observed (metrics, traces,
//! spans, its calls counted), held to its owner's budget, leased while it
//! runs when durable, and stopped cleanly when a shutdown's grace period
//! ends (a durable run handed on, any other recorded run closed as failed).

use super::entry::{CallCounter, RunEntry};
use super::views::run_error_json;
use crate::admission::Ticket;
use crate::spans::SpanOrigin;
use crate::state::Gateway;
use crate::tenants::{Caller, TenantBudget};
use crate::traces::{CallTracer, Origin};
use callai_engine::runlog::{Fence, RunKey, RunStatus};
use callai_engine::{Journal, MockScript, RunError, RunLogError};
use callai_host::{Pack, RunOptions, RunOutput};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// A run about to go: what it runs, and how.
pub(crate) struct Work {
    pub state: Arc<Gateway>,
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
        let trace = state.spans.as_ref().map(|s| {
            let origin = SpanOrigin {
                tenant: &entry.tenant,
                id: &entry.run_id,
                parent: entry.trace_parent.as_deref(),
            };
            s.run(&entry.node_id, &entry.pack, origin)
        });
        // Each call of the run is traced under an id of its own.
        let tracer = CallTracer::new(
            state.calls.clone(),
            Origin {
                tenant: entry.tenant.as_str().into(),
                endpoint: "run",
                run_id: Some(entry.run_id.clone()),
                cache: None,
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
                    trace.end(Some("another host took the run over"));
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
                    trace.end(error.as_deref());
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
                    trace.end(Some(message));
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
async fn keep_lease(state: &Gateway, run: RunKey<'_>, fence: Option<Fence>) {
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
