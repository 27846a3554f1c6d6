//! A run read back (`GET /v1/runs/{runId}` and its events): as this host
//! holds it in memory, unless it handed the run on (another host has it
//! now: the run log says where it stands), else from the run log.

use super::entry::RunEntry;
use super::views::{EventsAnswer, RunAnswer, events_answer, inspected_answer};
use crate::error::GatewayError;
use crate::state::Gateway;
use callai_engine::RunKey;
use callai_engine::runlog::RunStatus;
use std::sync::Arc;

impl Gateway {
    /// Run `key` as this host holds it in memory, unless it handed it on.
    fn in_memory(&self, key: RunKey<'_>) -> Option<Arc<RunEntry>> {
        self.runs
            .get(key.tenant, key.run_id)
            .filter(|e| !e.is_handed_on())
    }

    /// Where run `key` stands; another tenant's run of the same id is not
    /// found, exactly as an id nobody holds.
    pub async fn run_status(&self, key: RunKey<'_>) -> Result<RunAnswer, GatewayError> {
        if let Some(entry) = self.in_memory(key) {
            return Ok(entry.answer());
        }
        let run = self.load(key).await?;
        Ok(inspected_answer(&run))
    }

    /// Run `key`'s events so far, and whether it has ended.
    pub async fn run_events(&self, key: RunKey<'_>) -> Result<EventsAnswer, GatewayError> {
        if let Some(entry) = self.in_memory(key) {
            // Read "done" first: every event of a finished run is in by then.
            let complete = entry.is_done();
            let events = entry.events.stamped_since(0);
            return Ok(events_answer(&events, complete));
        }
        let run = self.load(key).await?.run;
        let complete = run.status != RunStatus::Running;
        let events: Vec<_> = run.event_times.into_iter().zip(run.events).collect();
        Ok(events_answer(&events, complete))
    }
}
