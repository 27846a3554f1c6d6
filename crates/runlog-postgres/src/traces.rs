//! Call traces in PostgreSQL: `callai_call_traces` (one row per call, its
//! JSON, numbered in the order kept across every host) and
//! `callai_call_trace_tags` (what a listing filters on, keyed by tag then
//! number, so a filtered page is an index range read from the newest down).

use super::PostgresRunLog;
use callai_engine::BoxFuture;
use callai_engine::runlog::{
    RunLogError, SinceFloor, SqlParam, TraceLog, TracePage, TraceQuery, TraceRow,
};
use tokio_postgres::Transaction;
use tokio_postgres::types::ToSql;

impl TraceLog for PostgresRunLog {
    fn put_traces<'a>(&'a self, traces: &'a [TraceRow]) -> BoxFuture<'a, Result<(), RunLogError>> {
        Box::pin(async move {
            let mut conn = self.conn().await?;
            let tx = conn.transaction().await.map_err(self.storage())?;
            // Committed without waiting for the server's WAL flush: a crash
            // of the database may lose the last traces, never damage it; a
            // trace is an account of a call, not what a replay depends on.
            tx.batch_execute("SET LOCAL synchronous_commit = off")
                .await
                .map_err(self.storage())?;
            let trace = tx
                .prepare(
                    "INSERT INTO callai_call_traces
                         (id, tenant, started_ms, ended_ms, attempts, trace)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (id) DO NOTHING RETURNING seq",
                )
                .await
                .map_err(self.storage())?;
            for t in traces {
                let row = tx
                    .query_opt(
                        &trace,
                        &[
                            &t.id,
                            &t.tenant,
                            &(t.started_ms as i64),
                            &(t.ended_ms as i64),
                            &i64::from(t.attempts),
                            &t.json,
                        ],
                    )
                    .await
                    .map_err(self.storage())?;
                // A call id kept already (a write repeated after a failure
                // that had landed) keeps its first trace.
                let Some(row) = row else { continue };
                let seq: i64 = row.get(0);
                tx.execute(
                    "INSERT INTO callai_call_trace_tags (tag, seq)
                     SELECT DISTINCT unnest($1::text[]), $2::bigint ON CONFLICT DO NOTHING",
                    &[&t.tags, &seq],
                )
                .await
                .map_err(self.storage())?;
            }
            tx.commit().await.map_err(self.storage())
        })
    }

    fn get_trace<'a>(
        &'a self,
        tenant: Option<&'a str>,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, RunLogError>> {
        Box::pin(async move {
            let conn = self.conn().await?;
            let row = conn
                .query_opt(
                    "SELECT trace FROM callai_call_traces
                     WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)",
                    &[&id, &tenant],
                )
                .await
                .map_err(self.storage())?;
            Ok(row.map(|r| r.get(0)))
        })
    }

    fn list_traces<'a>(
        &'a self,
        query: &'a TraceQuery,
    ) -> BoxFuture<'a, Result<TracePage, RunLogError>> {
        Box::pin(async move {
            let conn = self.conn().await?;
            let before = match &query.before {
                None => i64::MAX,
                Some(id) => {
                    let row = conn
                        .query_opt("SELECT seq FROM callai_call_traces WHERE id = $1", &[id])
                        .await
                        .map_err(self.storage())?;
                    match row {
                        Some(row) => row.get(0),
                        None => return Ok(TracePage::default()),
                    }
                }
            };
            let from = match query.since_ms {
                Some(since) => self.since_floor(&conn, since).await?,
                None => 0,
            };
            let (sql, binds) = query.select(
                "callai_call_traces",
                "callai_call_trace_tags",
                from..before,
                |n| format!("${n}"),
            );
            let binds: Vec<&(dyn ToSql + Sync)> = binds
                .iter()
                .map(|p| match p {
                    SqlParam::Text(t) => t as &(dyn ToSql + Sync),
                    SqlParam::Int(i) => i as &(dyn ToSql + Sync),
                })
                .collect();
            let rows = conn
                .query(&sql, &binds)
                .await
                .map_err(self.storage())?
                .into_iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            Ok(query.page(rows))
        })
    }
}

impl PostgresRunLog {
    /// The first trace a page `since_ms` reads ([`SinceFloor`]).
    async fn since_floor(
        &self,
        conn: &tokio_postgres::Client,
        since_ms: u64,
    ) -> Result<i64, RunLogError> {
        let bounds = conn
            .query_one("SELECT min(seq), max(seq) FROM callai_call_traces", &[])
            .await
            .map_err(self.storage())?;
        let (Some(first), Some(last)) = (bounds.get(0), bounds.get(1)) else {
            return Ok(0);
        };
        let mut search = SinceFloor::new(first, last, since_ms);
        let at = conn
            .prepare(
                "SELECT seq, ended_ms FROM callai_call_traces WHERE seq >= $1 ORDER BY seq LIMIT 1",
            )
            .await
            .map_err(self.storage())?;
        while let Some(probe) = search.probe() {
            let row = conn
                .query_one(&at, &[&probe])
                .await
                .map_err(self.storage())?;
            let ended: i64 = row.get(1);
            search.found(row.get(0), ended.max(0) as u64);
        }
        Ok(search.floor())
    }
}

/// Deletes the traces kept before the first that ended at or after
/// `before_ms` (traces are kept as their calls end, so these ended before
/// it; across hosts, give or take a batch), with their tags; how many.
pub(crate) async fn prune(
    log: &PostgresRunLog,
    tx: &Transaction<'_>,
    before_ms: u64,
) -> Result<u64, RunLogError> {
    let before = before_ms as i64;
    // Walked from the oldest: as many rows as are pruned, then one.
    let first_kept: i64 = tx
        .query_opt(
            "SELECT seq FROM callai_call_traces WHERE ended_ms >= $1 ORDER BY seq LIMIT 1",
            &[&before],
        )
        .await
        .map_err(log.storage())?
        .map_or(i64::MAX, |r| r.get(0));
    tx.execute(
        "DELETE FROM callai_call_trace_tags WHERE seq < $1",
        &[&first_kept],
    )
    .await
    .map_err(log.storage())?;
    tx.execute(
        "DELETE FROM callai_call_traces WHERE seq < $1",
        &[&first_kept],
    )
    .await
    .map_err(log.storage())
}
