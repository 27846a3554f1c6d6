//! API keys in the SQLite log: `api_keys` (one row a key, its secret only
//! as a hash), `api_key_events` (the audit list) and `api_key_state` (the
//! generation every change moves on, and the pepper of the hashes). Every
//! change is one `BEGIN IMMEDIATE` transaction.

use super::{SqliteRunLog, immediate, storage};
use callai_engine::BoxFuture;
use callai_engine::runlog::{ApiKey, ApiKeyEvent, ApiKeyLog, RunLogError};
use rusqlite::{OptionalExtension, params};

const COLUMNS: &str = "id, tenant, name, hash, hint, settings, expires_ms, created_ms, revoked_ms,
     last_used_ms";

fn key_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<ApiKey> {
    let ms = |i: usize| -> rusqlite::Result<Option<u64>> {
        Ok(r.get::<_, Option<i64>>(i)?.map(|v| v as u64))
    };
    Ok(ApiKey {
        id: r.get(0)?,
        tenant: r.get(1)?,
        name: r.get(2)?,
        hash: r.get(3)?,
        hint: r.get(4)?,
        settings: r.get(5)?,
        expires_ms: ms(6)?,
        created_ms: r.get::<_, i64>(7)? as u64,
        revoked_ms: ms(8)?,
        last_used_ms: ms(9)?,
    })
}

impl ApiKeyLog for SqliteRunLog {
    fn api_key_state<'a>(
        &'a self,
        fresh_pepper: &'a [u8; 32],
    ) -> BoxFuture<'a, Result<(u64, Vec<u8>), RunLogError>> {
        let fresh = fresh_pepper.to_vec();
        self.blocking(move |conn, _| {
            let read = |conn: &rusqlite::Connection| {
                conn.query_row(
                    "SELECT generation, pepper FROM api_key_state WHERE one = 1",
                    [],
                    |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, Vec<u8>>(1)?)),
                )
                .optional()
            };
            if let Some(state) = read(conn).map_err(storage)? {
                return Ok(state);
            }
            let tx = immediate(conn)?;
            tx.execute(
                "INSERT OR IGNORE INTO api_key_state (one, generation, pepper) VALUES (1, 0, ?1)",
                params![fresh],
            )
            .map_err(storage)?;
            let state = read(&tx).map_err(storage)?;
            tx.commit().map_err(storage)?;
            state.ok_or_else(|| RunLogError::Storage("api_key_state has no row".into()))
        })
    }

    fn put_api_key<'a>(
        &'a self,
        key: &'a ApiKey,
        event: &'a ApiKeyEvent,
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        let (k, e) = (key.clone(), event.clone());
        self.blocking(move |conn, _| {
            let tx = immediate(conn)?;
            let ms = |v: Option<u64>| v.map(|v| v as i64);
            tx.execute(
                &format!(
                    "INSERT INTO api_keys ({COLUMNS})
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                     ON CONFLICT (id) DO UPDATE SET tenant = excluded.tenant,
                         name = excluded.name, hash = excluded.hash, hint = excluded.hint,
                         settings = excluded.settings, expires_ms = excluded.expires_ms,
                         created_ms = excluded.created_ms, revoked_ms = excluded.revoked_ms"
                ),
                params![
                    k.id,
                    k.tenant,
                    k.name,
                    k.hash,
                    k.hint,
                    k.settings,
                    ms(k.expires_ms),
                    k.created_ms as i64,
                    ms(k.revoked_ms),
                    ms(k.last_used_ms)
                ],
            )
            .map_err(storage)?;
            tx.execute(
                "INSERT INTO api_key_events (key_id, at_ms, actor, action, detail)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![e.key_id, e.at_ms as i64, e.actor, e.action, e.detail],
            )
            .map_err(storage)?;
            tx.execute(
                "UPDATE api_key_state SET generation = generation + 1 WHERE one = 1",
                [],
            )
            .map_err(storage)?;
            tx.commit().map_err(storage)
        })
    }

    fn api_keys(&self) -> BoxFuture<'_, Result<Vec<ApiKey>, RunLogError>> {
        self.blocking(move |conn, _| {
            let mut stmt = conn
                .prepare(&format!(
                    "SELECT {COLUMNS} FROM api_keys ORDER BY created_ms, id"
                ))
                .map_err(storage)?;
            let rows = stmt.query_map([], key_of).map_err(storage)?;
            rows.collect::<Result<_, _>>().map_err(storage)
        })
    }

    fn api_key_events<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<ApiKeyEvent>, RunLogError>> {
        let id = id.to_owned();
        self.blocking(move |conn, _| {
            let mut stmt = conn
                .prepare(
                    "SELECT at_ms, actor, action, detail FROM api_key_events
                     WHERE key_id = ?1 ORDER BY seq",
                )
                .map_err(storage)?;
            let rows = stmt
                .query_map(params![id], |r| {
                    Ok(ApiKeyEvent {
                        key_id: id.clone(),
                        at_ms: r.get::<_, i64>(0)? as u64,
                        actor: r.get(1)?,
                        action: r.get(2)?,
                        detail: r.get(3)?,
                    })
                })
                .map_err(storage)?;
            rows.collect::<Result<_, _>>().map_err(storage)
        })
    }

    fn touch_api_keys<'a>(
        &'a self,
        used: &'a [(String, u64)],
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        let used = used.to_vec();
        self.blocking(move |conn, _| {
            let tx = immediate(conn)?;
            for (id, at) in &used {
                tx.execute(
                    "UPDATE api_keys SET last_used_ms = MAX(COALESCE(last_used_ms, 0), ?2)
                     WHERE id = ?1",
                    params![id, *at as i64],
                )
                .map_err(storage)?;
            }
            tx.commit().map_err(storage)
        })
    }
}
