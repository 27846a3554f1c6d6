//! API keys in PostgreSQL: `callai_api_keys` (one row a key, its secret
//! only as a hash), `callai_api_key_events` (the audit list) and
//! `callai_api_key_state` (the generation every change moves on, and the
//! pepper of the hashes). A change is one transaction that takes the
//! state row's lock first, so the generation moves on in the order the
//! changes commit and a host that sees it move reads them all.

use super::PostgresRunLog;
use callai_engine::BoxFuture;
use callai_engine::runlog::{ApiKey, ApiKeyEvent, ApiKeyLog, RunLogError};

const COLUMNS: &str = "id, tenant, name, hash, hint, settings, expires_ms, created_ms, revoked_ms,
     last_used_ms";

fn key_of(row: &tokio_postgres::Row) -> ApiKey {
    let ms = |i: usize| row.get::<_, Option<i64>>(i).map(|v| v as u64);
    ApiKey {
        id: row.get(0),
        tenant: row.get(1),
        name: row.get(2),
        hash: row.get(3),
        hint: row.get(4),
        settings: row.get(5),
        expires_ms: ms(6),
        created_ms: row.get::<_, i64>(7) as u64,
        revoked_ms: ms(8),
        last_used_ms: ms(9),
    }
}

impl ApiKeyLog for PostgresRunLog {
    fn api_key_state<'a>(
        &'a self,
        fresh_pepper: &'a [u8; 32],
    ) -> BoxFuture<'a, Result<(u64, Vec<u8>), RunLogError>> {
        Box::pin(async move {
            let conn = self.conn().await?;
            conn.execute(
                "INSERT INTO callai_api_key_state (one, generation, pepper) VALUES (1, 0, $1)
                 ON CONFLICT (one) DO NOTHING",
                &[&fresh_pepper.as_slice()],
            )
            .await
            .map_err(self.storage())?;
            let row = conn
                .query_one(
                    "SELECT generation, pepper FROM callai_api_key_state WHERE one = 1",
                    &[],
                )
                .await
                .map_err(self.storage())?;
            Ok((row.get::<_, i64>(0) as u64, row.get::<_, Vec<u8>>(1)))
        })
    }

    fn put_api_key<'a>(
        &'a self,
        k: &'a ApiKey,
        e: &'a ApiKeyEvent,
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        Box::pin(async move {
            let mut conn = self.conn().await?;
            let tx = conn.transaction().await.map_err(self.storage())?;
            let moved = tx
                .execute(
                    "UPDATE callai_api_key_state SET generation = generation + 1 WHERE one = 1",
                    &[],
                )
                .await
                .map_err(self.storage())?;
            if moved == 0 {
                return Err(RunLogError::Storage(format!(
                    "{}: callai_api_key_state has no row",
                    self.shown
                )));
            }
            let ms = |v: Option<u64>| v.map(|v| v as i64);
            tx.execute(
                &format!(
                    "INSERT INTO callai_api_keys ({COLUMNS})
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                     ON CONFLICT (id) DO UPDATE SET tenant = excluded.tenant,
                         name = excluded.name, hash = excluded.hash, hint = excluded.hint,
                         settings = excluded.settings, expires_ms = excluded.expires_ms,
                         created_ms = excluded.created_ms, revoked_ms = excluded.revoked_ms"
                ),
                &[
                    &k.id,
                    &k.tenant,
                    &k.name,
                    &k.hash,
                    &k.hint,
                    &k.settings,
                    &ms(k.expires_ms),
                    &(k.created_ms as i64),
                    &ms(k.revoked_ms),
                    &ms(k.last_used_ms),
                ],
            )
            .await
            .map_err(self.storage())?;
            tx.execute(
                "INSERT INTO callai_api_key_events (key_id, at_ms, actor, action, detail)
                 VALUES ($1, $2, $3, $4, $5)",
                &[&e.key_id, &(e.at_ms as i64), &e.actor, &e.action, &e.detail],
            )
            .await
            .map_err(self.storage())?;
            tx.commit().await.map_err(self.storage())
        })
    }

    fn api_keys(&self) -> BoxFuture<'_, Result<Vec<ApiKey>, RunLogError>> {
        Box::pin(async move {
            let conn = self.conn().await?;
            let rows = conn
                .query(
                    &format!("SELECT {COLUMNS} FROM callai_api_keys ORDER BY created_ms, id"),
                    &[],
                )
                .await
                .map_err(self.storage())?;
            Ok(rows.iter().map(key_of).collect())
        })
    }

    fn api_key_events<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<ApiKeyEvent>, RunLogError>> {
        Box::pin(async move {
            let conn = self.conn().await?;
            let rows = conn
                .query(
                    "SELECT at_ms, actor, action, detail FROM callai_api_key_events
                     WHERE key_id = $1 ORDER BY seq",
                    &[&id],
                )
                .await
                .map_err(self.storage())?;
            Ok(rows
                .iter()
                .map(|r| ApiKeyEvent {
                    key_id: id.to_owned(),
                    at_ms: r.get::<_, i64>(0) as u64,
                    actor: r.get(1),
                    action: r.get(2),
                    detail: r.get(3),
                })
                .collect())
        })
    }

    fn touch_api_keys<'a>(
        &'a self,
        used: &'a [(String, u64)],
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        Box::pin(async move {
            let conn = self.conn().await?;
            for (id, at) in used {
                conn.execute(
                    "UPDATE callai_api_keys
                     SET last_used_ms = GREATEST(COALESCE(last_used_ms, 0), $2) WHERE id = $1",
                    &[id, &(*at as i64)],
                )
                .await
                .map_err(self.storage())?;
            }
            Ok(())
        })
    }
}
