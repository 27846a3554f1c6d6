//! Taking a durable run over on PostgreSQL: the lapsed run claimed in one
//! transaction (`FOR UPDATE SKIP LOCKED`, so hosts claiming at once never
//! wait on each other), its fence moved on, its records read back; a run
//! whose records cannot be read is failed once, with the reason.

use crate::PostgresRunLog;
use callai_engine::runlog::{Fence, Lease, RecordedRun, RunKey, RunLogError};

impl PostgresRunLog {
    /// The oldest durable run whose lease lapsed, now this host's under
    /// `lease`; `None` when there is none.
    pub(crate) async fn claim_lapsed(
        &self,
        lease: Lease<'_>,
    ) -> Result<Option<(Fence, RecordedRun)>, RunLogError> {
        let mut conn = self.conn().await?;
        loop {
            let tx = conn.transaction().await.map_err(self.storage())?;
            // SKIP LOCKED: hosts claiming at once each get a different run
            // (or none), never wait on each other.
            let lapsed = tx
                .query_opt(
                    "SELECT tenant, run_id, fence FROM callai_runs
                 WHERE durable AND status = 'running' AND lease_until < clock_timestamp()
                 ORDER BY lease_until LIMIT 1 FOR UPDATE SKIP LOCKED",
                    &[],
                )
                .await
                .map_err(self.storage())?;
            let Some(row) = lapsed else {
                return Ok(None);
            };
            let (tenant, run_id, old): (String, String, i64) = (row.get(0), row.get(1), row.get(2));
            let key = RunKey::new(&tenant, &run_id);
            let fence = self.take_over(&tx, key, old, Some(lease)).await?;
            match self.load_in(&tx, key).await {
                Ok(run) => {
                    tx.commit().await.map_err(self.storage())?;
                    return Ok(Some((fence, run)));
                }
                // A run whose records cannot be read can never be resumed:
                // it is failed with the reason, once, and the next lapsed
                // run is looked at.
                Err(RunLogError::Corrupt { reason, .. }) => {
                    let output = callai_engine::runlog::unresumable_output(&reason);
                    tx.execute(
                        "UPDATE callai_runs SET status = 'failed', output = $3, ended_at = now()
                         WHERE tenant = $1 AND run_id = $2",
                        &[&tenant, &run_id, &output],
                    )
                    .await
                    .map_err(self.storage())?;
                    tx.commit().await.map_err(self.storage())?;
                }
                Err(e) => return Err(e),
            }
        }
    }
}
