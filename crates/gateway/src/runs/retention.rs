//! `[runlog] keepDays`: a serving host deletes the finished runs of its run
//! log that ended more than `keepDays` ago, at start-up and every hour, so
//! that the log does not grow without end. `callai runlog prune` does the
//! same on demand.

use crate::state::Gateway;
use callai_engine::events::now_ms;
use std::sync::Arc;
use std::time::Duration;

/// How often a host prunes.
const EVERY: Duration = Duration::from_secs(3600);

/// Prunes now and every [`EVERY`] until the task is stopped. Several hosts
/// on one log may prune at once: each deletes what is left.
pub(crate) async fn prune_periodically(state: Arc<Gateway>) {
    let Some(log) = state.runlog.clone() else {
        return;
    };
    loop {
        if let Some(before) = state.runlog_config.prune_before(now_ms()) {
            match log.prune(before).await {
                Ok(pruned) if pruned.runs > 0 || pruned.traces > 0 => eprintln!(
                    "callai serve: pruned {} runs and {} call traces older than runlog.keepDays ({} days)",
                    pruned.runs, pruned.traces, state.runlog_config.keep_days
                ),
                Ok(_) => {}
                Err(e) => eprintln!("callai serve: cannot prune the run log: {e}"),
            }
        }
        tokio::time::sleep(EVERY).await;
    }
}
