//! [`RunLog`] on PostgreSQL: each write one transaction that locks the
//! run's row (`FOR UPDATE`) and checks the fence; leases in the server's
//! clock, so hosts on different machines agree on when one lapsed.

use crate::PostgresRunLog;
use crate::pool::Conn;
use callai_engine::events::Event;
use callai_engine::runlog::decode::{Inspected, RawCall, RawRun, call_row, to_text};
use callai_engine::runlog::{
    BeginRun, ExistingRun, Fence, Lease, Pruned, RecordedCall, RecordedRun, RunKey, RunLog,
    RunStatus,
};
use callai_engine::{BoxFuture, RunLogError};
use std::time::Duration;
use tokio_postgres::GenericClient;

impl PostgresRunLog {
    pub(crate) fn storage(&self) -> impl Fn(tokio_postgres::Error) -> RunLogError + '_ {
        move |e| RunLogError::Storage(format!("{}: {}", self.shown, said(&e)))
    }

    pub(crate) async fn conn(&self) -> Result<Conn, RunLogError> {
        self.pool.get().await.map(Conn).map_err(|e| {
            RunLogError::Storage(format!(
                "cannot get a connection to {} (at most {} at once): {e}",
                self.shown,
                crate::pool::MAX_CONNECTIONS
            ))
        })
    }

    /// The run's fence and status, its row locked until the transaction ends.
    async fn lock_run(
        &self,
        tx: &impl GenericClient,
        run: RunKey<'_>,
    ) -> Result<(i64, String), RunLogError> {
        let row = tx
            .query_opt(
                "SELECT fence, status FROM callai_runs WHERE tenant = $1 AND run_id = $2
                 FOR UPDATE",
                &[&run.tenant, &run.run_id],
            )
            .await
            .map_err(self.storage())?
            .ok_or_else(|| RunLogError::NoSuchRun(run.run_id.into()))?;
        Ok((row.get(0), row.get(1)))
    }

    async fn check_fence(
        &self,
        tx: &impl GenericClient,
        run: RunKey<'_>,
        fence: Fence,
    ) -> Result<(), RunLogError> {
        match self.lock_run(tx, run).await? {
            (f, _) if f == fence.0 => Ok(()),
            _ => Err(RunLogError::Fenced(run.run_id.into())),
        }
    }

    async fn append_events(
        &self,
        tx: &impl GenericClient,
        run: RunKey<'_>,
        events: &[Event],
    ) -> Result<(), RunLogError> {
        if events.is_empty() {
            return Ok(());
        }
        let next: i64 = tx
            .query_one(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM callai_events
                 WHERE tenant = $1 AND run_id = $2",
                &[&run.tenant, &run.run_id],
            )
            .await
            .map_err(self.storage())?
            .get(0);
        let texts: Vec<String> = events.iter().map(to_text).collect();
        let seqs: Vec<i64> = (0..texts.len() as i64).map(|i| next + i).collect();
        tx.execute(
            "INSERT INTO callai_events (tenant, run_id, seq, event, at_ms)
             SELECT $1, $2, s, e, (extract(epoch from clock_timestamp()) * 1000)::bigint
             FROM unnest($3::bigint[], $4::text[]) AS t(s, e)",
            &[&run.tenant, &run.run_id, &seqs, &texts],
        )
        .await
        .map_err(self.storage())?;
        Ok(())
    }

    /// Bumps the fence (taking the run over) under a new lease when given.
    pub(crate) async fn take_over(
        &self,
        tx: &impl GenericClient,
        run: RunKey<'_>,
        old: i64,
        lease: Option<Lease<'_>>,
    ) -> Result<Fence, RunLogError> {
        let owner = lease.map(|l| l.owner.to_owned());
        let ms = lease.map_or(0, |l| l.duration.as_millis() as i64);
        tx.execute(
            "UPDATE callai_runs SET fence = $3, owner = COALESCE($4, owner),
                 lease_until = CASE WHEN durable AND $4 IS NOT NULL
                     THEN clock_timestamp() + $5::bigint * interval '1 millisecond' ELSE lease_until END
             WHERE tenant = $1 AND run_id = $2",
            &[&run.tenant, &run.run_id, &(old + 1), &owner, &ms],
        )
        .await
        .map_err(self.storage())?;
        Ok(Fence(old + 1))
    }

    pub(crate) async fn load_in(
        &self,
        tx: &impl GenericClient,
        run: RunKey<'_>,
    ) -> Result<RecordedRun, RunLogError> {
        self.raw_in(tx, run).await?.check(&self.shown)
    }

    /// The run's rows, unchecked.
    async fn raw_in(
        &self,
        tx: &impl GenericClient,
        run: RunKey<'_>,
    ) -> Result<RawRun, RunLogError> {
        let head = tx
            .query_opt(
                "SELECT node_id, status, output, seed, clock_ms, spec, durable
                 FROM callai_runs WHERE tenant = $1 AND run_id = $2",
                &[&run.tenant, &run.run_id],
            )
            .await
            .map_err(self.storage())?
            .ok_or_else(|| RunLogError::NoSuchRun(run.run_id.into()))?;
        let calls = tx
            .query(
                "SELECT c.node_id, c.call_index, c.entry, c.request, c.outcome, c.events, s.text
                 FROM callai_calls c
                 LEFT JOIN callai_response_schemas s ON s.sha256 = c.schema_sha256
                 WHERE c.tenant = $1 AND c.run_id = $2 ORDER BY c.call_index",
                &[&run.tenant, &run.run_id],
            )
            .await
            .map_err(self.storage())?
            .into_iter()
            .map(|r| RawCall {
                node_id: r.get(0),
                index: r.get(1),
                entry: r.get(2),
                request: r.get(3),
                outcome: r.get(4),
                events: r.get(5),
                schema: r.get(6),
            })
            .collect();
        let events = tx
            .query(
                "SELECT event, at_ms FROM callai_events WHERE tenant = $1 AND run_id = $2
                 ORDER BY seq",
                &[&run.tenant, &run.run_id],
            )
            .await
            .map_err(self.storage())?
            .into_iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        Ok(RawRun {
            tenant: run.tenant.into(),
            run_id: run.run_id.into(),
            node_id: head.get(0),
            status: head.get(1),
            output: head.get(2),
            seed: head.get(3),
            clock_ms: head.get(4),
            spec: head.get(5),
            durable: head.get(6),
            calls,
            events,
        })
    }
}

impl RunLog for PostgresRunLog {
    fn begin<'a>(&'a self, run: &'a BeginRun<'a>) -> BoxFuture<'a, Result<Fence, RunLogError>> {
        Box::pin(async move {
            let mut conn = self.conn().await?;
            let tx = conn.transaction().await.map_err(self.storage())?;
            let key = run.run;
            let old = tx
                .query_opt(
                    "SELECT fence FROM callai_runs WHERE tenant = $1 AND run_id = $2 FOR UPDATE",
                    &[&key.tenant, &key.run_id],
                )
                .await
                .map_err(self.storage())?
                .map(|r| r.get::<_, i64>(0));
            let fence = match old {
                Some(_) if run.existing == ExistingRun::Refuse => {
                    return Err(RunLogError::RunExists(key.run_id.into()));
                }
                Some(old) => {
                    // Calls and events go with the row (ON DELETE CASCADE);
                    // the old recorder's next commit meets the new fence.
                    tx.execute(
                        "DELETE FROM callai_runs WHERE tenant = $1 AND run_id = $2",
                        &[&key.tenant, &key.run_id],
                    )
                    .await
                    .map_err(self.storage())?;
                    old + 1
                }
                None => 1,
            };
            let spec = run.spec.map(to_text);
            let owner = run.lease.map(|l| l.owner.to_owned());
            let ms = run.lease.map(|l| l.duration.as_millis() as i64);
            let inserted = tx
                .execute(
                    "INSERT INTO callai_runs (tenant, run_id, node_id, status, fence, seed,
                                              clock_ms, spec, durable, owner, lease_until)
                     VALUES ($10, $1, $2, 'running', $3, $4, $5, $6, $7, $8,
                             clock_timestamp() + $9::bigint * interval '1 millisecond')
                     ON CONFLICT (tenant, run_id) DO NOTHING",
                    &[
                        &key.run_id,
                        &run.node_id,
                        &fence,
                        &(run.seed.seed as i64),
                        &(run.seed.clock_ms as i64),
                        &spec,
                        &run.lease.is_some(),
                        &owner,
                        &ms,
                        &key.tenant,
                    ],
                )
                .await
                .map_err(self.storage())?;
            if inserted == 0 {
                // Another host began the same run between our read and write.
                return Err(RunLogError::RunExists(key.run_id.into()));
            }
            tx.commit().await.map_err(self.storage())?;
            Ok(Fence(fence))
        })
    }

    fn commit_call<'a>(
        &'a self,
        run: RunKey<'a>,
        fence: Fence,
        call: &'a RecordedCall,
        events: &'a [Event],
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        Box::pin(async move {
            let mut conn = self.conn().await?;
            let tx = conn.transaction().await.map_err(self.storage())?;
            self.check_fence(&tx, run, fence).await?;
            let row = call_row(call);
            let mut bytes =
                row.bytes() + events.iter().map(|e| to_text(e).len() as u64).sum::<u64>();
            let schema_sha256 = row.schema.as_ref().map(|s| s.sha256.as_str());
            if let Some(schema) = &row.schema {
                bytes += self.store_schema(&tx, run, schema).await?;
            }
            self.charge(&tx, run, bytes).await?;
            self.append_events(&tx, run, events).await?;
            tx.execute(
                "INSERT INTO callai_calls (run_id, node_id, call_index, entry, request, outcome,
                                           events, schema_sha256, tenant)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                &[
                    &run.run_id,
                    &row.node_id,
                    &row.index,
                    &row.entry,
                    &row.request,
                    &row.outcome,
                    &row.events,
                    &schema_sha256,
                    &run.tenant,
                ],
            )
            .await
            .map_err(self.storage())?;
            tx.commit().await.map_err(self.storage())
        })
    }

    fn finish<'a>(
        &'a self,
        run: RunKey<'a>,
        fence: Fence,
        events: &'a [Event],
        status: RunStatus,
        output: &'a str,
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        Box::pin(async move {
            let mut conn = self.conn().await?;
            let tx = conn.transaction().await.map_err(self.storage())?;
            self.check_fence(&tx, run, fence).await?;
            self.append_events(&tx, run, events).await?;
            tx.execute(
                "UPDATE callai_runs SET status = $3, output = $4, ended_at = now()
                 WHERE tenant = $1 AND run_id = $2",
                &[&run.tenant, &run.run_id, &status.as_str(), &output],
            )
            .await
            .map_err(self.storage())?;
            tx.commit().await.map_err(self.storage())
        })
    }

    fn load<'a>(&'a self, run: RunKey<'a>) -> BoxFuture<'a, Result<RecordedRun, RunLogError>> {
        Box::pin(async move {
            let mut conn = self.conn().await?;
            // One snapshot for the run's rows.
            let tx = conn
                .build_transaction()
                .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await
                .map_err(self.storage())?;
            let run = self.load_in(&tx, run).await?;
            tx.commit().await.map_err(self.storage())?;
            Ok(run)
        })
    }

    fn inspect<'a>(&'a self, run: RunKey<'a>) -> BoxFuture<'a, Result<Inspected, RunLogError>> {
        Box::pin(async move {
            let mut conn = self.conn().await?;
            let tx = conn
                .build_transaction()
                .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await
                .map_err(self.storage())?;
            let raw = self.raw_in(&tx, run).await?;
            tx.commit().await.map_err(self.storage())?;
            raw.inspect(&self.shown)
        })
    }

    fn resume<'a>(
        &'a self,
        run: RunKey<'a>,
        lease: Option<Lease<'a>>,
    ) -> BoxFuture<'a, Result<(Fence, RecordedRun), RunLogError>> {
        Box::pin(async move {
            let mut conn = self.conn().await?;
            let tx = conn.transaction().await.map_err(self.storage())?;
            let (old, status) = self.lock_run(&tx, run).await?;
            if let Some(done) = RunStatus::parse(&status).filter(|s| *s != RunStatus::Running) {
                return Err(RunLogError::Finished(run.run_id.into(), done.as_str()));
            }
            let fence = self.take_over(&tx, run, old, lease).await?;
            let run = self.load_in(&tx, run).await?;
            tx.commit().await.map_err(self.storage())?;
            Ok((fence, run))
        })
    }

    fn renew<'a>(
        &'a self,
        run: RunKey<'a>,
        fence: Fence,
        duration: Duration,
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        Box::pin(async move {
            let conn = self.conn().await?;
            let n = conn
                .execute(
                    "UPDATE callai_runs
                     SET lease_until = clock_timestamp() + $4::bigint * interval '1 millisecond'
                     WHERE tenant = $1 AND run_id = $2 AND fence = $3",
                    &[
                        &run.tenant,
                        &run.run_id,
                        &fence.0,
                        &(duration.as_millis() as i64),
                    ],
                )
                .await
                .map_err(self.storage())?;
            if n == 1 {
                Ok(())
            } else {
                Err(RunLogError::Fenced(run.run_id.into()))
            }
        })
    }

    fn release<'a>(
        &'a self,
        run: RunKey<'a>,
        fence: Fence,
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        Box::pin(async move {
            let conn = self.conn().await?;
            conn.execute(
                "UPDATE callai_runs SET lease_until = '-infinity'
                 WHERE tenant = $1 AND run_id = $2 AND fence = $3",
                &[&run.tenant, &run.run_id, &fence.0],
            )
            .await
            .map_err(self.storage())?;
            Ok(())
        })
    }

    fn claim<'a>(
        &'a self,
        lease: Lease<'a>,
    ) -> BoxFuture<'a, Result<Option<(Fence, RecordedRun)>, RunLogError>> {
        Box::pin(self.claim_lapsed(lease))
    }

    fn put_pack<'a>(
        &'a self,
        sha256: &'a str,
        bytes: &'a [u8],
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        Box::pin(async move {
            let conn = self.conn().await?;
            let known = conn
                .query_opt("SELECT 1 FROM callai_packs WHERE sha256 = $1", &[&sha256])
                .await
                .map_err(self.storage())?;
            if known.is_none() {
                conn.execute(
                    "INSERT INTO callai_packs (sha256, bytes) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                    &[&sha256, &bytes],
                )
                .await
                .map_err(self.storage())?;
            }
            Ok(())
        })
    }

    fn get_pack<'a>(
        &'a self,
        sha256: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, RunLogError>> {
        Box::pin(async move {
            let conn = self.conn().await?;
            let row = conn
                .query_opt(
                    "SELECT bytes FROM callai_packs WHERE sha256 = $1",
                    &[&sha256],
                )
                .await
                .map_err(self.storage())?;
            Ok(row.map(|r| r.get(0)))
        })
    }

    fn prune(&self, before_ms: u64) -> BoxFuture<'_, Result<Pruned, RunLogError>> {
        Box::pin(self.prune_before(before_ms))
    }

    fn ledger(&self) -> Option<&dyn callai_engine::budget::Ledger> {
        Some(self)
    }

    fn traces(&self) -> Option<&dyn callai_engine::runlog::TraceLog> {
        Some(self)
    }

    fn responses(&self) -> Option<&dyn callai_engine::runlog::ResponseLog> {
        Some(self)
    }

    fn api_keys(&self) -> Option<&dyn callai_engine::runlog::ApiKeyLog> {
        Some(self)
    }
}

/// What `e` says, with the server's own message when it sent one
/// (`tokio_postgres` shows a server's error as only "db error").
pub(crate) fn said(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{e}: {} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}
