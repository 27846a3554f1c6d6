//! Call traces in the SQLite log: `call_traces` (one row per call, its
//! JSON, numbered in the order kept) and `call_trace_tags` (what a listing
//! filters on, keyed by tag then number, so a filtered page is an index
//! range read from the newest down).

use super::{SqliteRunLog, storage};
use callai_engine::BoxFuture;
use callai_engine::runlog::{RunLogError, SqlParam, TraceLog, TracePage, TraceQuery, TraceRow};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

impl TraceLog for SqliteRunLog {
    fn put_traces<'a>(&'a self, traces: &'a [TraceRow]) -> BoxFuture<'a, Result<(), RunLogError>> {
        let traces = traces.to_vec();
        self.blocking(move |conn, _| put(conn, &traces))
    }

    fn get_trace<'a>(
        &'a self,
        tenant: Option<&'a str>,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, RunLogError>> {
        let (tenant, id) = (tenant.map(str::to_owned), id.to_owned());
        self.blocking(move |conn, _| {
            conn.query_row(
                "SELECT trace FROM call_traces WHERE id = ?1 AND (?2 IS NULL OR tenant = ?2)",
                params![id, tenant],
                |r| r.get(0),
            )
            .optional()
            .map_err(storage)
        })
    }

    fn list_traces<'a>(
        &'a self,
        query: &'a TraceQuery,
    ) -> BoxFuture<'a, Result<TracePage, RunLogError>> {
        let query = query.clone();
        self.blocking(move |conn, _| list(conn, &query))
    }
}

fn put(conn: &mut Connection, traces: &[TraceRow]) -> Result<(), RunLogError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(storage)?;
    {
        let mut trace = tx
            .prepare_cached(
                "INSERT INTO call_traces (id, tenant, started_ms, ended_ms, attempts, trace)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (id) DO NOTHING RETURNING seq",
            )
            .map_err(storage)?;
        let mut tag = tx
            .prepare_cached("INSERT OR IGNORE INTO call_trace_tags (tag, seq) VALUES (?1, ?2)")
            .map_err(storage)?;
        for t in traces {
            let seq: Option<i64> = trace
                .query_row(
                    params![
                        t.id,
                        t.tenant,
                        t.started_ms as i64,
                        t.ended_ms as i64,
                        t.attempts,
                        t.json
                    ],
                    |r| r.get(0),
                )
                .optional()
                .map_err(storage)?;
            // A call id kept already (a write repeated after a failure
            // that had landed) keeps its first trace.
            let Some(seq) = seq else { continue };
            for key in &t.tags {
                tag.execute(params![key, seq]).map_err(storage)?;
            }
        }
    }
    tx.commit().map_err(storage)
}

fn list(conn: &mut Connection, query: &TraceQuery) -> Result<TracePage, RunLogError> {
    let before = match &query.before {
        None => i64::MAX,
        Some(id) => {
            let seq = conn
                .query_row("SELECT seq FROM call_traces WHERE id = ?1", [id], |r| {
                    r.get(0)
                })
                .optional()
                .map_err(storage)?;
            match seq {
                Some(seq) => seq,
                None => return Ok(TracePage::default()),
            }
        }
    };
    let (sql, binds) = query.select("call_traces", "call_trace_tags", before, |n| {
        format!("?{n}")
    });
    let mut stmt = conn.prepare_cached(&sql).map_err(storage)?;
    let binds: Vec<&dyn rusqlite::ToSql> = binds
        .iter()
        .map(|p| match p {
            SqlParam::Text(t) => t as &dyn rusqlite::ToSql,
            SqlParam::Int(i) => i as &dyn rusqlite::ToSql,
        })
        .collect();
    let rows = stmt
        .query_map(binds.as_slice(), |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(storage)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(storage)?;
    Ok(query.page(rows))
}

/// Deletes the traces kept before the first that ended at or after
/// `before_ms` (traces are kept as their calls end, so these ended before
/// it), with their tags; how many.
pub(crate) fn prune(tx: &Transaction<'_>, before_ms: u64) -> Result<u64, RunLogError> {
    let before = before_ms as i64;
    // Walked from the oldest: as many rows as are pruned, then one.
    let first_kept: Option<i64> = tx
        .query_row(
            "SELECT seq FROM call_traces WHERE ended_ms >= ?1 ORDER BY seq LIMIT 1",
            [before],
            |r| r.get(0),
        )
        .optional()
        .map_err(storage)?;
    let first_kept = first_kept.unwrap_or(i64::MAX);
    tx.execute("DELETE FROM call_trace_tags WHERE seq < ?1", [first_kept])
        .map_err(storage)?;
    let traces = tx
        .execute("DELETE FROM call_traces WHERE seq < ?1", [first_kept])
        .map_err(storage)?;
    Ok(traces as u64)
}
