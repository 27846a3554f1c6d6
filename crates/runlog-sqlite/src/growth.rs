//! What keeps a run log from growing without end: each call's schema stored
//! once by its hash, what each run recorded counted against
//! `runlog.maxRunBytes`, and finished runs pruned (`runlog.keepDays`).

use super::store::Key;
use super::{immediate, storage};
use callai_engine::runlog::decode::SchemaRow;
use callai_engine::runlog::{Pruned, RunLogError};
use rusqlite::{Connection, Transaction, params};

/// Adds `bytes` to what the run recorded, refused past `limit` (the
/// transaction, dropped unfinished, rolls the addition back).
pub(crate) fn charge(
    tx: &Transaction<'_>,
    run: &Key,
    bytes: u64,
    limit: Option<u64>,
) -> Result<(), RunLogError> {
    let total: i64 = tx
        .query_row(
            "UPDATE runs SET bytes = bytes + ?3 WHERE tenant = ?1 AND run_id = ?2
             RETURNING bytes",
            params![run.tenant, run.run_id, bytes as i64],
            |r| r.get(0),
        )
        .map_err(storage)?;
    match limit {
        Some(limit) if total.max(0) as u64 > limit => Err(RunLogError::RunTooLarge {
            run_id: run.run_id.clone(),
            limit,
        }),
        _ => Ok(()),
    }
}

/// Stores `schema` once; its size when the run had not named it before.
pub(crate) fn store_schema(
    tx: &Transaction<'_>,
    run: &Key,
    schema: &SchemaRow,
) -> Result<u64, RunLogError> {
    let named: bool = tx
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM calls
                 WHERE tenant = ?1 AND run_id = ?2 AND schema_sha256 = ?3)",
            params![run.tenant, run.run_id, schema.sha256],
            |r| r.get(0),
        )
        .map_err(storage)?;
    tx.execute(
        "INSERT INTO schemas (sha256, text) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
        params![schema.sha256, schema.text],
    )
    .map_err(storage)?;
    Ok(if named { 0 } else { schema.text.len() as u64 })
}

/// Deletes the finished runs that ended before `before_ms`, their calls
/// and events, and the schemas no call names any more.
pub(crate) fn prune(conn: &mut Connection, before_ms: u64) -> Result<Pruned, RunLogError> {
    let tx = immediate(conn)?;
    let ended = "status <> 'running' AND ended_ms < ?1";
    let before = before_ms as i64;
    for table in ["calls", "events"] {
        tx.execute(
            &format!(
                "DELETE FROM {table} WHERE (tenant, run_id) IN
                 (SELECT tenant, run_id FROM runs WHERE {ended})"
            ),
            [before],
        )
        .map_err(storage)?;
    }
    let runs = tx
        .execute(&format!("DELETE FROM runs WHERE {ended}"), [before])
        .map_err(storage)?;
    let schemas = tx
        .execute(
            "DELETE FROM schemas WHERE sha256 NOT IN
             (SELECT schema_sha256 FROM calls WHERE schema_sha256 IS NOT NULL)",
            [],
        )
        .map_err(storage)?;
    // Idempotency keys past their keeping, and budget windows that ended
    // before `before_ms` (even the longest, 30 days) with nothing reserved.
    tx.execute(
        "DELETE FROM idempotency_keys WHERE until_ms < ?1",
        [callai_engine::events::now_ms() as i64],
    )
    .map_err(storage)?;
    tx.execute(
        "DELETE FROM budget_windows WHERE window_ms > 0 AND window_ms + 2592000000 < ?1
             AND reserved_requests = 0 AND reserved_output = 0 AND reserved_input = 0",
        [before],
    )
    .map_err(storage)?;
    let traces = super::traces::prune(&tx, before_ms)?;
    let responses = super::responses::prune(&tx, before_ms)?;
    tx.commit().map_err(storage)?;
    Ok(Pruned {
        runs: runs as u64,
        schemas: schemas as u64,
        traces,
        responses,
    })
}
