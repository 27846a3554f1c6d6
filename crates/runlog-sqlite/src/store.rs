//! [`RunLog`] on SQLite: one `BEGIN IMMEDIATE` transaction per write, the
//! fence checked inside it; leases in ms of this machine's clock (an SQLite
//! file is shared by the processes of one machine).

use super::growth::{charge, prune, store_schema};
use super::{SqliteRunLog, immediate, storage};
use callai_engine::BoxFuture;
use callai_engine::events::{Event, now_ms};
use callai_engine::runlog::decode::{Inspected, RawCall, RawRun, call_row, to_text};
use callai_engine::runlog::{
    BeginRun, ExistingRun, Fence, Lease, Pruned, RecordedCall, RecordedRun, RunKey, RunLog,
    RunLogError, RunStatus,
};
use rusqlite::{Connection, OptionalExtension, Transaction, params};
use std::time::Duration;

fn until(duration: Duration) -> i64 {
    (now_ms() + duration.as_millis() as u64) as i64
}

/// A run's key, owned: what the blocking pool's closures take.
#[derive(Debug, Clone)]
pub(crate) struct Key {
    pub(crate) tenant: String,
    pub(crate) run_id: String,
}

impl From<RunKey<'_>> for Key {
    fn from(run: RunKey<'_>) -> Self {
        Self {
            tenant: run.tenant.to_owned(),
            run_id: run.run_id.to_owned(),
        }
    }
}

/// The run's fence and status; `NoSuchRun` when absent.
fn fence_and_status(tx: &Transaction<'_>, run: &Key) -> Result<(i64, String), RunLogError> {
    tx.query_row(
        "SELECT fence, status FROM runs WHERE tenant = ?1 AND run_id = ?2",
        [&run.tenant, &run.run_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
    .map_err(storage)?
    .ok_or_else(|| RunLogError::NoSuchRun(run.run_id.clone()))
}

/// The run's fence, checked against the recorder's; `Fenced` when another
/// recorder took it over.
fn check_fence(tx: &Transaction<'_>, run: &Key, fence: Fence) -> Result<(), RunLogError> {
    match fence_and_status(tx, run)? {
        (f, _) if f == fence.0 => Ok(()),
        _ => Err(RunLogError::Fenced(run.run_id.clone())),
    }
}

/// Appends `events` (as JSON text) after the run's last sequence number.
fn append_events(tx: &Transaction<'_>, run: &Key, events: &[String]) -> Result<(), RunLogError> {
    let next: i64 = tx
        .query_row(
            "SELECT COALESCE(MAX(seq) + 1, 0) FROM events WHERE tenant = ?1 AND run_id = ?2",
            [&run.tenant, &run.run_id],
            |r| r.get(0),
        )
        .map_err(storage)?;
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO events (tenant, run_id, seq, event, at_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(storage)?;
    let at = now_ms() as i64;
    for (i, event) in events.iter().enumerate() {
        insert
            .execute(params![run.tenant, run.run_id, next + i as i64, event, at])
            .map_err(storage)?;
    }
    Ok(())
}

/// Bumps the run's fence (taking it over), with a new lease when given.
fn take_over(
    tx: &Transaction<'_>,
    run: &Key,
    old: i64,
    lease: Option<(&str, Duration)>,
) -> Result<Fence, RunLogError> {
    let (owner, lease_until) = match lease {
        Some((owner, d)) => (Some(owner), until(d)),
        None => (None, 0),
    };
    tx.execute(
        "UPDATE runs SET fence = ?3, owner = COALESCE(?4, owner),
         lease_until_ms = CASE WHEN durable = 1 THEN ?5 ELSE lease_until_ms END
         WHERE tenant = ?1 AND run_id = ?2",
        params![run.tenant, run.run_id, old + 1, owner, lease_until],
    )
    .map_err(storage)?;
    Ok(Fence(old + 1))
}

fn load(conn: &Connection, log: &str, run: &Key) -> Result<RecordedRun, RunLogError> {
    raw(conn, run)?.check(log)
}

/// The run's rows, unchecked.
fn raw(conn: &Connection, run: &Key) -> Result<RawRun, RunLogError> {
    type Head = (
        String,
        String,
        Option<String>,
        i64,
        i64,
        Option<String>,
        bool,
    );
    let head: Head = conn
        .query_row(
            "SELECT node_id, status, output, seed, clock_ms, spec, durable FROM runs
             WHERE tenant = ?1 AND run_id = ?2",
            [&run.tenant, &run.run_id],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                ))
            },
        )
        .optional()
        .map_err(storage)?
        .ok_or_else(|| RunLogError::NoSuchRun(run.run_id.clone()))?;
    let mut stmt = conn
        .prepare_cached(
            "SELECT c.node_id, c.call_index, c.entry, c.request, c.outcome, c.events, s.text
             FROM calls c LEFT JOIN schemas s ON s.sha256 = c.schema_sha256
             WHERE c.tenant = ?1 AND c.run_id = ?2 ORDER BY c.call_index",
        )
        .map_err(storage)?;
    let calls = stmt
        .query_map([&run.tenant, &run.run_id], |r| {
            Ok(RawCall {
                node_id: r.get(0)?,
                index: r.get(1)?,
                entry: r.get(2)?,
                request: r.get(3)?,
                outcome: r.get(4)?,
                events: r.get(5)?,
                schema: r.get(6)?,
            })
        })
        .map_err(storage)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(storage)?;
    let mut stmt = conn
        .prepare_cached(
            "SELECT event, at_ms FROM events WHERE tenant = ?1 AND run_id = ?2 ORDER BY seq",
        )
        .map_err(storage)?;
    let events = stmt
        .query_map([&run.tenant, &run.run_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(storage)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(storage)?;
    let (node_id, status, output, seed, clock_ms, spec, durable) = head;
    Ok(RawRun {
        tenant: run.tenant.clone(),
        run_id: run.run_id.clone(),
        node_id,
        status,
        output,
        seed,
        clock_ms,
        spec,
        durable,
        calls,
        events,
    })
}

impl RunLog for SqliteRunLog {
    fn begin<'a>(&'a self, run: &'a BeginRun<'a>) -> BoxFuture<'a, Result<Fence, RunLogError>> {
        // SQLite integers are signed: the seed is stored bit for bit.
        let (seed, clock_ms) = (run.seed.seed as i64, run.seed.clock_ms as i64);
        let (key, node_id, existing) = (Key::from(run.run), run.node_id.to_owned(), run.existing);
        let spec = run.spec.map(to_text);
        let durable = run.lease.is_some();
        let owner = run.lease.map(|l| l.owner.to_owned());
        let lease_until = run.lease.map_or(0, |l| until(l.duration));
        self.blocking(move |conn, _| {
            let tx = immediate(conn)?;
            let old: Option<i64> = tx
                .query_row(
                    "SELECT fence FROM runs WHERE tenant = ?1 AND run_id = ?2",
                    [&key.tenant, &key.run_id],
                    |r| r.get(0),
                )
                .optional()
                .map_err(storage)?;
            let fence = match old {
                Some(_) if existing == ExistingRun::Refuse => {
                    return Err(RunLogError::RunExists(key.run_id));
                }
                Some(old) => {
                    // The old recording's next commit meets a new fence and stops.
                    for table in ["calls", "events", "runs"] {
                        tx.execute(
                            &format!("DELETE FROM {table} WHERE tenant = ?1 AND run_id = ?2"),
                            [&key.tenant, &key.run_id],
                        )
                        .map_err(storage)?;
                    }
                    old + 1
                }
                None => 1,
            };
            tx.execute(
                "INSERT INTO runs (tenant, run_id, node_id, status, fence, seed, clock_ms, spec,
                                   durable, owner, lease_until_ms)
                 VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    key.tenant,
                    key.run_id,
                    node_id,
                    fence,
                    seed,
                    clock_ms,
                    spec,
                    durable,
                    owner,
                    lease_until
                ],
            )
            .map_err(storage)?;
            tx.commit().map_err(storage)?;
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
        let key = Key::from(run);
        let events: Vec<String> = events.iter().map(to_text).collect();
        let row = call_row(call);
        let limit = self.max_run_bytes;
        self.blocking(move |conn, _| {
            let tx = immediate(conn)?;
            check_fence(&tx, &key, fence)?;
            let mut bytes = row.bytes() + events.iter().map(|e| e.len() as u64).sum::<u64>();
            if let Some(schema) = &row.schema {
                bytes += store_schema(&tx, &key, schema)?;
            }
            charge(&tx, &key, bytes, limit)?;
            append_events(&tx, &key, &events)?;
            tx.execute(
                "INSERT INTO calls (tenant, run_id, node_id, call_index, entry, request, outcome,
                                    events, schema_sha256)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    key.tenant,
                    key.run_id,
                    row.node_id,
                    row.index,
                    row.entry,
                    row.request,
                    row.outcome,
                    row.events,
                    row.schema.as_ref().map(|s| &s.sha256)
                ],
            )
            .map_err(storage)?;
            tx.commit().map_err(storage)
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
        let (key, output) = (Key::from(run), output.to_owned());
        let events: Vec<String> = events.iter().map(to_text).collect();
        self.blocking(move |conn, _| {
            let tx = immediate(conn)?;
            check_fence(&tx, &key, fence)?;
            append_events(&tx, &key, &events)?;
            tx.execute(
                "UPDATE runs SET status = ?3, output = ?4, ended_ms = ?5
                 WHERE tenant = ?1 AND run_id = ?2",
                params![
                    key.tenant,
                    key.run_id,
                    status.as_str(),
                    output,
                    now_ms() as i64
                ],
            )
            .map_err(storage)?;
            tx.commit().map_err(storage)
        })
    }

    fn load<'a>(&'a self, run: RunKey<'a>) -> BoxFuture<'a, Result<RecordedRun, RunLogError>> {
        let key = Key::from(run);
        self.blocking(move |conn, path| load(conn, path, &key))
    }

    fn inspect<'a>(&'a self, run: RunKey<'a>) -> BoxFuture<'a, Result<Inspected, RunLogError>> {
        let key = Key::from(run);
        self.blocking(move |conn, path| raw(conn, &key)?.inspect(path))
    }

    fn resume<'a>(
        &'a self,
        run: RunKey<'a>,
        lease: Option<Lease<'a>>,
    ) -> BoxFuture<'a, Result<(Fence, RecordedRun), RunLogError>> {
        let key = Key::from(run);
        let lease = lease.map(|l| (l.owner.to_owned(), l.duration));
        self.blocking(move |conn, path| {
            let tx = immediate(conn)?;
            let (old, status) = fence_and_status(&tx, &key)?;
            if let Some(done) = RunStatus::parse(&status).filter(|s| *s != RunStatus::Running) {
                return Err(RunLogError::Finished(key.run_id, done.as_str()));
            }
            let fence = take_over(
                &tx,
                &key,
                old,
                lease.as_ref().map(|(o, d)| (o.as_str(), *d)),
            )?;
            let run = load(&tx, path, &key)?;
            tx.commit().map_err(storage)?;
            Ok((fence, run))
        })
    }

    fn renew<'a>(
        &'a self,
        run: RunKey<'a>,
        fence: Fence,
        duration: Duration,
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        let key = Key::from(run);
        self.blocking(move |conn, _| {
            let n = conn
                .execute(
                    "UPDATE runs SET lease_until_ms = ?4
                     WHERE tenant = ?1 AND run_id = ?2 AND fence = ?3",
                    params![key.tenant, key.run_id, fence.0, until(duration)],
                )
                .map_err(storage)?;
            if n == 1 {
                Ok(())
            } else {
                Err(RunLogError::Fenced(key.run_id))
            }
        })
    }

    fn release<'a>(
        &'a self,
        run: RunKey<'a>,
        fence: Fence,
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        let key = Key::from(run);
        self.blocking(move |conn, _| {
            conn.execute(
                "UPDATE runs SET lease_until_ms = 0
                 WHERE tenant = ?1 AND run_id = ?2 AND fence = ?3",
                params![key.tenant, key.run_id, fence.0],
            )
            .map_err(storage)?;
            Ok(())
        })
    }

    fn claim<'a>(
        &'a self,
        lease: Lease<'a>,
    ) -> BoxFuture<'a, Result<Option<(Fence, RecordedRun)>, RunLogError>> {
        let (owner, duration) = (lease.owner.to_owned(), lease.duration);
        self.blocking(move |conn, path| {
            loop {
                // BEGIN IMMEDIATE holds the file's write lock: no other process
                // can claim the same run between the read and the update.
                let tx = immediate(conn)?;
                let lapsed: Option<(Key, i64)> = tx
                    .query_row(
                        "SELECT tenant, run_id, fence FROM runs
                         WHERE durable = 1 AND status = 'running' AND lease_until_ms < ?1
                         ORDER BY lease_until_ms LIMIT 1",
                        [now_ms() as i64],
                        |r| {
                            let key = Key {
                                tenant: r.get(0)?,
                                run_id: r.get(1)?,
                            };
                            Ok((key, r.get(2)?))
                        },
                    )
                    .optional()
                    .map_err(storage)?;
                let Some((key, old)) = lapsed else {
                    return Ok(None);
                };
                let fence = take_over(&tx, &key, old, Some((&owner, duration)))?;
                match load(&tx, path, &key) {
                    Ok(run) => {
                        tx.commit().map_err(storage)?;
                        return Ok(Some((fence, run)));
                    }
                    // A run whose records cannot be read can never be resumed:
                    // it is failed with the reason, once, and the next lapsed
                    // run is looked at.
                    Err(RunLogError::Corrupt { reason, .. }) => {
                        let output = callai_engine::runlog::unresumable_output(&reason);
                        tx.execute(
                            "UPDATE runs SET status = 'failed', output = ?3, ended_ms = ?4
                             WHERE tenant = ?1 AND run_id = ?2",
                            params![key.tenant, key.run_id, output, now_ms() as i64],
                        )
                        .map_err(storage)?;
                        tx.commit().map_err(storage)?;
                    }
                    Err(e) => return Err(e),
                }
            }
        })
    }

    fn put_pack<'a>(
        &'a self,
        sha256: &'a str,
        bytes: &'a [u8],
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        let (sha256, bytes) = (sha256.to_owned(), bytes.to_vec());
        self.blocking(move |conn, _| {
            conn.execute(
                "INSERT INTO packs (sha256, bytes) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                params![sha256, bytes],
            )
            .map_err(storage)?;
            Ok(())
        })
    }

    fn get_pack<'a>(
        &'a self,
        sha256: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, RunLogError>> {
        let sha256 = sha256.to_owned();
        self.blocking(move |conn, _| {
            conn.query_row("SELECT bytes FROM packs WHERE sha256 = ?1", [sha256], |r| {
                r.get(0)
            })
            .optional()
            .map_err(storage)
        })
    }

    fn prune(&self, before_ms: u64) -> BoxFuture<'_, Result<Pruned, RunLogError>> {
        self.blocking(move |conn, _| prune(conn, before_ms))
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
