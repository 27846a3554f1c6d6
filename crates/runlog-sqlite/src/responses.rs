//! Kept responses in the SQLite log: `stored_responses`, one row per
//! response, keyed by tenant and id, indexed by when it was kept (for
//! pruning).

use super::{SqliteRunLog, storage};
use callai_engine::BoxFuture;
use callai_engine::runlog::{ResponseLog, RunLogError, StoredResponse};
use rusqlite::{OptionalExtension, Transaction, params};

impl ResponseLog for SqliteRunLog {
    fn put_response<'a>(
        &'a self,
        response: &'a StoredResponse,
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        let r = response.clone();
        self.blocking(move |conn, _| {
            conn.execute(
                "INSERT OR REPLACE INTO stored_responses
                     (tenant, id, created_ms, conversation, input_items, response)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    r.tenant,
                    r.id,
                    r.created_ms as i64,
                    r.conversation,
                    r.input_items,
                    r.response
                ],
            )
            .map(drop)
            .map_err(storage)
        })
    }

    fn get_response<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<StoredResponse>, RunLogError>> {
        let (tenant, id) = (tenant.to_owned(), id.to_owned());
        self.blocking(move |conn, _| {
            conn.query_row(
                "SELECT created_ms, conversation, input_items, response
                 FROM stored_responses WHERE tenant = ?1 AND id = ?2",
                params![tenant, id],
                |r| {
                    Ok(StoredResponse {
                        id: id.clone(),
                        tenant: tenant.clone(),
                        created_ms: r.get::<_, i64>(0)? as u64,
                        conversation: r.get(1)?,
                        input_items: r.get(2)?,
                        response: r.get(3)?,
                    })
                },
            )
            .optional()
            .map_err(storage)
        })
    }

    fn delete_response<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<bool, RunLogError>> {
        let (tenant, id) = (tenant.to_owned(), id.to_owned());
        self.blocking(move |conn, _| {
            conn.execute(
                "DELETE FROM stored_responses WHERE tenant = ?1 AND id = ?2",
                params![tenant, id],
            )
            .map(|n| n > 0)
            .map_err(storage)
        })
    }
}

/// Deletes the responses kept before `before_ms`; how many.
pub(crate) fn prune(tx: &Transaction<'_>, before_ms: u64) -> Result<u64, RunLogError> {
    tx.execute(
        "DELETE FROM stored_responses WHERE created_ms < ?1",
        [before_ms as i64],
    )
    .map(|n| n as u64)
    .map_err(storage)
}
