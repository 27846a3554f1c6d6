//! Kept responses in PostgreSQL: `callai_stored_responses`, one row per
//! response, keyed by tenant and id, indexed by when it was kept (for
//! pruning); every host sharing the database reads the same ones.

use super::PostgresRunLog;
use callai_engine::BoxFuture;
use callai_engine::runlog::{ResponseLog, RunLogError, StoredResponse};
use tokio_postgres::Transaction;

impl ResponseLog for PostgresRunLog {
    fn put_response<'a>(&'a self, r: &'a StoredResponse) -> BoxFuture<'a, Result<(), RunLogError>> {
        Box::pin(async move {
            let conn = self.conn().await?;
            conn.execute(
                "INSERT INTO callai_stored_responses
                     (tenant, id, created_ms, conversation, input_items, response)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (tenant, id) DO UPDATE SET created_ms = excluded.created_ms,
                     conversation = excluded.conversation, input_items = excluded.input_items,
                     response = excluded.response",
                &[
                    &r.tenant,
                    &r.id,
                    &(r.created_ms as i64),
                    &r.conversation,
                    &r.input_items,
                    &r.response,
                ],
            )
            .await
            .map(drop)
            .map_err(self.storage())
        })
    }

    fn get_response<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<StoredResponse>, RunLogError>> {
        Box::pin(async move {
            let conn = self.conn().await?;
            let row = conn
                .query_opt(
                    "SELECT created_ms, conversation, input_items, response
                     FROM callai_stored_responses WHERE tenant = $1 AND id = $2",
                    &[&tenant, &id],
                )
                .await
                .map_err(self.storage())?;
            Ok(row.map(|row| StoredResponse {
                id: id.to_owned(),
                tenant: tenant.to_owned(),
                created_ms: row.get::<_, i64>(0) as u64,
                conversation: row.get(1),
                input_items: row.get(2),
                response: row.get(3),
            }))
        })
    }

    fn delete_response<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<bool, RunLogError>> {
        Box::pin(async move {
            let conn = self.conn().await?;
            conn.execute(
                "DELETE FROM callai_stored_responses WHERE tenant = $1 AND id = $2",
                &[&tenant, &id],
            )
            .await
            .map(|n| n > 0)
            .map_err(self.storage())
        })
    }
}

/// Deletes the responses kept before `before_ms`; how many.
pub(crate) async fn prune(
    log: &PostgresRunLog,
    tx: &Transaction<'_>,
    before_ms: u64,
) -> Result<u64, RunLogError> {
    tx.execute(
        "DELETE FROM callai_stored_responses WHERE created_ms < $1",
        &[&(before_ms as i64)],
    )
    .await
    .map_err(log.storage())
}
