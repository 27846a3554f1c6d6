//! Call traces in PostgreSQL: `callai_call_traces` (one row per call, its
//! JSON, numbered in the order kept across every host) and
//! `callai_call_trace_tags` (what a listing filters on, keyed by tag then
//! number, so a filtered page is an index range read from the newest down);
//! and `callai_usage_calls` and `callai_usage_requests`, their sums per
//! minute.

use super::PostgresRunLog;
use callai_engine::BoxFuture;
use callai_engine::runlog::{
    MINUTE_MS, MinuteRequests, MinuteSpend, MinuteSums, RunLogError, SinceFloor, SqlParam,
    TraceLog, TracePage, TraceQuery, TraceRow, UsageBatch,
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
            let mut usage = UsageBatch::default();
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
                usage.add(&t.tenant, t.started_ms, &t.usage);
            }
            self.add_usage(&tx, &usage).await?;
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
                        .query_opt(
                            "SELECT seq FROM callai_call_traces \
                             WHERE id = $1 AND ($2::TEXT IS NULL OR tenant = $2)",
                            &[id, &query.owner],
                        )
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

    fn minute_sums<'a>(
        &'a self,
        tenant: Option<&'a str>,
        since_ms: u64,
    ) -> BoxFuture<'a, Result<MinuteSums, RunLogError>> {
        Box::pin(self.read_minute_sums(tenant, since_ms))
    }
}

impl PostgresRunLog {
    /// Adds what a batch of traces adds to the sums of their minutes, in
    /// one statement per table (however many minutes and keys it holds).
    async fn add_usage(&self, tx: &Transaction<'_>, usage: &UsageBatch) -> Result<(), RunLogError> {
        if usage.is_empty() {
            return Ok(());
        }
        let mut minutes = Vec::new();
        let (mut tenants, mut currencies) = (Vec::new(), Vec::new());
        let (mut calls, mut costs, mut incomplete) = (Vec::new(), Vec::new(), Vec::new());
        for ((minute, tenant, currency), sum) in &usage.calls {
            minutes.push(*minute as i64);
            tenants.push(tenant.as_str());
            currencies.push(currency.as_str());
            calls.push(sum.calls as i64);
            costs.push(i64::try_from(sum.nanos).unwrap_or(i64::MAX));
            incomplete.push(sum.incomplete);
        }
        tx.execute(
            "INSERT INTO callai_usage_calls AS u
                 (minute_ms, tenant, currency, calls, cost, incomplete)
             SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[],
                                  $5::bigint[], $6::boolean[])
             ON CONFLICT (minute_ms, tenant, currency) DO UPDATE SET
                 calls = u.calls + excluded.calls,
                 cost = least(u.cost::numeric + excluded.cost, 9223372036854775807)::bigint,
                 incomplete = u.incomplete OR excluded.incomplete",
            &[&minutes, &tenants, &currencies, &calls, &costs, &incomplete],
        )
        .await
        .map_err(self.storage())?;
        let mut minutes = Vec::new();
        let (mut tenants, mut providers, mut reasons, mut counts) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for ((minute, tenant, provider, reason), count) in &usage.requests {
            minutes.push(*minute as i64);
            tenants.push(tenant.as_str());
            providers.push(provider.as_str());
            reasons.push(reason.as_str());
            counts.push(*count as i64);
        }
        tx.execute(
            "INSERT INTO callai_usage_requests AS u (minute_ms, tenant, provider, reason, count)
             SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[])
             ON CONFLICT (minute_ms, tenant, provider, reason) DO UPDATE SET
                 count = u.count + excluded.count",
            &[&minutes, &tenants, &providers, &reasons, &counts],
        )
        .await
        .map_err(self.storage())?;
        Ok(())
    }

    /// The sums of the minutes from `since_ms` on ([`TraceLog::minute_sums`]).
    async fn read_minute_sums(
        &self,
        tenant: Option<&str>,
        since_ms: u64,
    ) -> Result<MinuteSums, RunLogError> {
        let conn = self.conn().await?;
        let since = since_ms as i64;
        let calls: i64 = conn
            .query_one(
                "SELECT coalesce(sum(calls), 0)::bigint FROM callai_usage_calls
                 WHERE minute_ms >= $1 AND ($2::text IS NULL OR tenant = $2)",
                &[&since, &tenant],
            )
            .await
            .map_err(self.storage())?
            .get(0);
        let requests = conn
            .query(
                "SELECT minute_ms, provider, reason, sum(count)::bigint FROM callai_usage_requests
                 WHERE minute_ms >= $1 AND ($2::text IS NULL OR tenant = $2)
                 GROUP BY minute_ms, provider, reason ORDER BY minute_ms, provider, reason",
                &[&since, &tenant],
            )
            .await
            .map_err(self.storage())?
            .into_iter()
            .map(|r| MinuteRequests {
                minute_ms: r.get::<_, i64>(0).max(0) as u64,
                provider: r.get(1),
                reason: r.get(2),
                count: r.get::<_, i64>(3).max(0) as u64,
            })
            .collect();
        let spend = conn
            .query(
                "SELECT minute_ms, tenant, currency, cost, incomplete FROM callai_usage_calls
                 WHERE minute_ms >= $1 AND ($2::text IS NULL OR tenant = $2) AND currency <> ''
                 ORDER BY minute_ms, tenant, currency",
                &[&since, &tenant],
            )
            .await
            .map_err(self.storage())?
            .into_iter()
            .map(|r| MinuteSpend {
                minute_ms: r.get::<_, i64>(0).max(0) as u64,
                tenant: r.get(1),
                currency: r.get(2),
                nanos: r.get::<_, i64>(3).max(0) as u64,
                complete: !r.get::<_, bool>(4),
            })
            .collect();
        Ok(MinuteSums {
            calls: calls.max(0) as u64,
            requests,
            spend,
        })
    }

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
    let traces = tx
        .execute(
            "DELETE FROM callai_call_traces WHERE seq < $1",
            &[&first_kept],
        )
        .await
        .map_err(log.storage())?;
    // The sums of the minutes that ended by then go with their calls.
    let minutes_before = (before_ms - before_ms % MINUTE_MS) as i64;
    for table in ["callai_usage_calls", "callai_usage_requests"] {
        tx.execute(
            &format!("DELETE FROM {table} WHERE minute_ms < $1"),
            &[&minutes_before],
        )
        .await
        .map_err(log.storage())?;
    }
    Ok(traces)
}
