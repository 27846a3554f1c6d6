//! What keeps a run log from growing without end: each call's schema stored
//! once by its hash, what each run recorded counted against
//! `runlog.maxRunBytes`, and finished runs pruned (`runlog.keepDays`).

use super::PostgresRunLog;
use callai_engine::RunLogError;
use callai_engine::runlog::decode::SchemaRow;
use callai_engine::runlog::{Pruned, RunKey};
use tokio_postgres::GenericClient;

impl PostgresRunLog {
    /// Adds `bytes` to what the run recorded, refused past the limit (the
    /// transaction, dropped unfinished, rolls the addition back).
    pub(crate) async fn charge(
        &self,
        tx: &impl GenericClient,
        run: RunKey<'_>,
        bytes: u64,
    ) -> Result<(), RunLogError> {
        let row = tx
            .query_one(
                "SELECT bytes FROM callai_runs WHERE tenant = $1 AND run_id = $2",
                &[&run.tenant, &run.run_id],
            )
            .await
            .map_err(self.storage())?;
        let recorded: i64 = row.get(0);
        let total = (recorded.max(0) as u64).saturating_add(bytes);
        if let Some(limit) = self.max_run_bytes.filter(|l| total > *l) {
            return Err(RunLogError::RunTooLarge {
                run_id: run.run_id.into(),
                limit,
            });
        }
        tx.execute(
            "UPDATE callai_runs SET bytes = $3 WHERE tenant = $1 AND run_id = $2",
            &[&run.tenant, &run.run_id, &(total as i64)],
        )
        .await
        .map_err(self.storage())?;
        Ok(())
    }

    /// Stores `schema` once; its size when the run had not named it before.
    pub(crate) async fn store_schema(
        &self,
        tx: &impl GenericClient,
        run: RunKey<'_>,
        schema: &SchemaRow,
    ) -> Result<u64, RunLogError> {
        let named: bool = tx
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM callai_calls
                     WHERE tenant = $1 AND run_id = $2 AND schema_sha256 = $3)",
                &[&run.tenant, &run.run_id, &schema.sha256],
            )
            .await
            .map_err(self.storage())?
            .get(0);
        tx.execute(
            "INSERT INTO callai_response_schemas (sha256, text) VALUES ($1, $2)
             ON CONFLICT DO NOTHING",
            &[&schema.sha256, &schema.text],
        )
        .await
        .map_err(self.storage())?;
        Ok(if named { 0 } else { schema.text.len() as u64 })
    }

    /// Deletes the finished runs that ended before `before_ms` (their calls
    /// and events go with them, ON DELETE CASCADE) and the schemas no call
    /// names any more.
    pub(crate) async fn prune_before(&self, before_ms: u64) -> Result<Pruned, RunLogError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await.map_err(self.storage())?;
        let before = before_ms as i64;
        let runs = tx
            .execute(
                "DELETE FROM callai_runs WHERE status <> 'running'
                     AND ended_at < to_timestamp($1::bigint / 1000.0)",
                &[&before],
            )
            .await
            .map_err(self.storage())?;
        let schemas = tx
            .execute(
                "DELETE FROM callai_response_schemas s WHERE NOT EXISTS
                     (SELECT 1 FROM callai_calls c WHERE c.schema_sha256 = s.sha256)",
                &[],
            )
            .await
            .map_err(self.storage())?;
        // Idempotency keys past their keeping, and budget windows that
        // ended before `before_ms` (even the longest, 30 days) with nothing
        // reserved.
        tx.execute(
            "DELETE FROM callai_idempotency_keys
             WHERE until_ms < (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
            &[],
        )
        .await
        .map_err(self.storage())?;
        tx.execute(
            "DELETE FROM callai_budget_windows WHERE window_ms > 0
                 AND window_ms + 2592000000 < $1 AND reserved_requests = 0
                 AND reserved_output = 0 AND reserved_input = 0",
            &[&before],
        )
        .await
        .map_err(self.storage())?;
        let traces = crate::traces::prune(self, &tx, before_ms).await?;
        let responses = crate::responses::prune(self, &tx, before_ms).await?;
        tx.commit().await.map_err(self.storage())?;
        Ok(Pruned {
            runs,
            schemas,
            traces,
            responses,
        })
    }
}
