//! Call traces in the SQLite log: `call_traces` (one row per call, its
//! JSON, numbered in the order kept) and `call_trace_tags` (what a listing
//! filters on, keyed by tag then number, so a filtered page is an index
//! range read from the newest down); and `usage_calls` and `usage_requests`,
//! their sums per minute.

use super::{SqliteRunLog, immediate, storage};
use callai_engine::BoxFuture;
use callai_engine::runlog::{
    MINUTE_MS, MinuteRequests, MinuteSpend, MinuteSums, RunLogError, SinceFloor, SqlParam,
    TraceLog, TracePage, TraceQuery, TraceRow, UsageBatch,
};
use rusqlite::{Connection, OptionalExtension, Transaction, params};

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

    fn minute_sums<'a>(
        &'a self,
        tenant: Option<&'a str>,
        since_ms: u64,
    ) -> BoxFuture<'a, Result<MinuteSums, RunLogError>> {
        let tenant = tenant.map(str::to_owned);
        self.blocking(move |conn, _| minute_sums(conn, tenant.as_deref(), since_ms))
    }
}

/// Writes `traces` in one transaction, committed without waiting for the
/// disk (`synchronous = NORMAL`, for this transaction only): in WAL mode a
/// crash of the machine may lose the last traces written, never damage the
/// log, and the runs' own commits keep `FULL`. A trace is an account of a
/// call, not what a replay depends on; an fsync per batch was a tenth of
/// a busy server's CPU.
fn put(conn: &mut Connection, traces: &[TraceRow]) -> Result<(), RunLogError> {
    conn.execute_batch("PRAGMA synchronous = NORMAL")
        .map_err(storage)?;
    let written = put_in_transaction(conn, traces);
    let restored = conn
        .execute_batch("PRAGMA synchronous = FULL")
        .map_err(storage);
    written.and(restored)
}

fn put_in_transaction(conn: &mut Connection, traces: &[TraceRow]) -> Result<(), RunLogError> {
    let tx = immediate(conn)?;
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
        let mut usage = UsageBatch::default();
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
            usage.add(&t.tenant, t.started_ms, &t.usage);
        }
        add_usage(&tx, &usage)?;
    }
    tx.commit().map_err(storage)
}

/// Adds what a batch of traces adds to the sums of their minutes.
fn add_usage(tx: &Transaction<'_>, usage: &UsageBatch) -> Result<(), RunLogError> {
    let mut calls = tx
        .prepare_cached(
            "INSERT INTO usage_calls (minute_ms, tenant, currency, calls, cost, incomplete)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (minute_ms, tenant, currency) DO UPDATE SET
                 calls = calls + excluded.calls,
                 cost = min(cost + excluded.cost, 9223372036854775807),
                 incomplete = max(incomplete, excluded.incomplete)",
        )
        .map_err(storage)?;
    for ((minute, tenant, currency), sum) in &usage.calls {
        let nanos = i64::try_from(sum.nanos).unwrap_or(i64::MAX);
        calls
            .execute(params![
                *minute as i64,
                tenant,
                currency,
                sum.calls as i64,
                nanos,
                sum.incomplete
            ])
            .map_err(storage)?;
    }
    let mut requests = tx
        .prepare_cached(
            "INSERT INTO usage_requests (minute_ms, tenant, provider, reason, count)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (minute_ms, tenant, provider, reason) DO UPDATE SET
                 count = count + excluded.count",
        )
        .map_err(storage)?;
    for ((minute, tenant, provider, reason), count) in &usage.requests {
        requests
            .execute(params![
                *minute as i64,
                tenant,
                provider,
                reason,
                *count as i64
            ])
            .map_err(storage)?;
    }
    Ok(())
}

/// The sums of the minutes from `since_ms` on ([`TraceLog::minute_sums`]).
fn minute_sums(
    conn: &Connection,
    tenant: Option<&str>,
    since_ms: u64,
) -> Result<MinuteSums, RunLogError> {
    let since = since_ms as i64;
    let calls: i64 = conn
        .query_row(
            "SELECT coalesce(sum(calls), 0) FROM usage_calls
             WHERE minute_ms >= ?1 AND (?2 IS NULL OR tenant = ?2)",
            params![since, tenant],
            |r| r.get(0),
        )
        .map_err(storage)?;
    let requests = conn
        .prepare_cached(
            "SELECT minute_ms, provider, reason, sum(count) FROM usage_requests
             WHERE minute_ms >= ?1 AND (?2 IS NULL OR tenant = ?2)
             GROUP BY minute_ms, provider, reason ORDER BY minute_ms, provider, reason",
        )
        .map_err(storage)?
        .query_map(params![since, tenant], |r| {
            Ok(MinuteRequests {
                minute_ms: r.get::<_, i64>(0)?.max(0) as u64,
                provider: r.get(1)?,
                reason: r.get(2)?,
                count: r.get::<_, i64>(3)?.max(0) as u64,
            })
        })
        .map_err(storage)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(storage)?;
    let spend = conn
        .prepare_cached(
            "SELECT minute_ms, tenant, currency, cost, incomplete FROM usage_calls
             WHERE minute_ms >= ?1 AND (?2 IS NULL OR tenant = ?2) AND currency <> ''
             ORDER BY minute_ms, tenant, currency",
        )
        .map_err(storage)?
        .query_map(params![since, tenant], |r| {
            Ok(MinuteSpend {
                minute_ms: r.get::<_, i64>(0)?.max(0) as u64,
                tenant: r.get(1)?,
                currency: r.get(2)?,
                nanos: r.get::<_, i64>(3)?.max(0) as u64,
                complete: !r.get::<_, bool>(4)?,
            })
        })
        .map_err(storage)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(storage)?;
    Ok(MinuteSums {
        calls: calls.max(0) as u64,
        requests,
        spend,
    })
}

fn list(conn: &mut Connection, query: &TraceQuery) -> Result<TracePage, RunLogError> {
    let before = match &query.before {
        None => i64::MAX,
        Some(id) => {
            let seq = conn
                .query_row(
                    "SELECT seq FROM call_traces WHERE id = ?1 AND (?2 IS NULL OR tenant = ?2)",
                    params![id, query.owner],
                    |r| r.get(0),
                )
                .optional()
                .map_err(storage)?;
            match seq {
                Some(seq) => seq,
                None => return Ok(TracePage::default()),
            }
        }
    };
    let from = match query.since_ms {
        Some(since) => since_floor(conn, since)?,
        None => 0,
    };
    let (sql, binds) = query.select("call_traces", "call_trace_tags", from..before, |n| {
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

/// The first trace a page `since_ms` reads ([`SinceFloor`]).
fn since_floor(conn: &Connection, since_ms: u64) -> Result<i64, RunLogError> {
    // Two queries: SQLite reads `min` or `max` alone off the key, but
    // both in one query by a scan.
    let bounds: (Option<i64>, Option<i64>) = conn
        .query_row(
            "SELECT (SELECT min(seq) FROM call_traces), (SELECT max(seq) FROM call_traces)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(storage)?;
    let (Some(first), Some(last)) = bounds else {
        return Ok(0);
    };
    let mut search = SinceFloor::new(first, last, since_ms);
    let mut at = conn
        .prepare_cached(
            "SELECT seq, ended_ms FROM call_traces WHERE seq >= ?1 ORDER BY seq LIMIT 1",
        )
        .map_err(storage)?;
    while let Some(probe) = search.probe() {
        let (seq, ended): (i64, i64) = at
            .query_row([probe], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(storage)?;
        search.found(seq, ended.max(0) as u64);
    }
    Ok(search.floor())
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
    // The sums of the minutes that ended by then go with their calls.
    let minutes_before = (before_ms - before_ms % MINUTE_MS) as i64;
    for table in ["usage_calls", "usage_requests"] {
        tx.execute(
            &format!("DELETE FROM {table} WHERE minute_ms < ?1"),
            [minutes_before],
        )
        .map_err(storage)?;
    }
    Ok(traces as u64)
}
