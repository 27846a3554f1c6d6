//! Durable runs: the lease a host renews while it runs one, and the loop
//! that takes over runs whose host stopped renewing (it died, lost its
//! machine, was cut off) and resumes them from the run log.

use super::entry::RunEntry;
use super::work::Work;
use crate::admission::Ticket;
use crate::state::Gateway;
use crate::tenants::Caller;
use callai_engine::runlog::{Fence, Lease, RecordedRun, RunKey, RunStatus};
use callai_engine::{Journal, MockScript};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// How often a host looks for runs to take over.
fn poll_interval(lease: Duration) -> Duration {
    (lease / 4).clamp(Duration::from_millis(50), Duration::from_secs(2))
}

/// Takes over every durable run whose lease lapsed, while this host has
/// room for it, until the host shuts down.
pub(crate) async fn take_over(state: Arc<Gateway>) {
    let Some(log) = state.runlog.clone() else {
        return;
    };
    let lease = state.runlog_config.lease();
    loop {
        if state.admission.is_draining() {
            return;
        }
        let claimed = match state.admission.admit() {
            Err(_) => None, // full: leave the run to a host with room
            Ok(ticket) => {
                let claim = log.claim(Lease {
                    owner: &state.lease_owner,
                    duration: lease,
                });
                match claim.await {
                    Ok(Some((fence, run))) => Some((ticket, fence, run)),
                    Ok(None) => None,
                    Err(e) => {
                        eprintln!("callai serve: cannot look for runs to take over: {e}");
                        None
                    }
                }
            }
        };
        match claimed {
            // Another one may be waiting: look again at once.
            Some((ticket, fence, run)) => adopt(&state, ticket, fence, run).await,
            None => tokio::time::sleep(poll_interval(lease)).await,
        }
    }
}

/// Resumes a run this host just took over.
async fn adopt(state: &Arc<Gateway>, ticket: Ticket, fence: Fence, run: RecordedRun) {
    let log = state.runlog.clone().expect("claimed from the run log");
    let (tenant, run_id) = (run.tenant.clone(), run.run_id.clone());
    let fail = |message: String| {
        let log = log.clone();
        let (tenant, run_id) = (tenant.clone(), run_id.clone());
        async move {
            let key = RunKey::new(&tenant, &run_id);
            eprintln!("callai serve: cannot resume run {key}: {message}");
            let output = json!({"error": {"kind": "takeover", "message": message}});
            let _ = log
                .finish(key, fence, &[], RunStatus::Failed, &output.to_string())
                .await;
        }
    };
    let Some(spec) = run.spec.clone() else {
        return fail("the run log does not say what the run was started with".into()).await;
    };
    let pack = match state.packs.by_hash(&spec.sha256) {
        Some(info) => state.packs.pack(&info).await,
        None => match log.get_pack(&spec.sha256).await {
            Ok(Some(bytes)) => state.packs.compile_bytes(&spec.sha256, bytes.into()).await,
            Ok(None) => {
                return fail(format!(
                    "no pack with sha256 {} here or in the log",
                    spec.sha256
                ))
                .await;
            }
            Err(e) => return fail(e.to_string()).await,
        },
    };
    let pack = match pack {
        Ok(pack) => pack,
        Err(e) => return fail(e.message()).await,
    };
    // The run stays its owner's, and its calls held to its owner's budget;
    // a tenant this host does not know any more fails the run rather than
    // run it unbudgeted.
    let owner = match state.tenants.by_name(&tenant) {
        Some(owner) => owner.clone(),
        None => {
            return fail(format!(
                "its tenant {tenant:?} is not configured on this host"
            ))
            .await;
        }
    };
    let entry = Arc::new(RunEntry::new(
        tenant.clone(),
        run_id.clone(),
        spec.pack.clone(),
        run.node_id.clone(),
    ));
    entry.add_calls(run.calls.len() as u32);
    state.runs.put(entry.clone());
    let script = MockScript::resumed(spec.script.as_deref(), &run);
    let work = Work {
        state: state.clone(),
        entry,
        caller: Caller(owner),
        pack,
        input: spec.input,
        script,
        lease: Some(fence),
    };
    let journal = Journal::resumed(log, fence, run);
    state.tasks.spawn(work.run(ticket, journal));
}
