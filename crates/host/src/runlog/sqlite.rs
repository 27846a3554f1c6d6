//! The built-in run log: one SQLite file (bundled SQLite, WAL journal,
//! synchronous commits), one transaction per call. SQLite is blocking, so
//! every operation runs on tokio's blocking pool, never on an async worker.

use super::{
    Entry, Fence, Outcome, RecordedCall, RecordedRun, RunLog, RunLogError, RunSeed, RunStatus,
};
use crate::events::Event;
use crate::provider::BoxFuture;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// `PRAGMA application_id` of a callai run log ("CAl0").
const APPLICATION_ID: u32 = 0x4341_6c30;
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// The migrations, in order: `MIGRATIONS[n]` takes schema version `n` to
/// `n + 1`. The version a file is at is its `PRAGMA user_version`.
const MIGRATIONS: [&str; 4] = [
    "CREATE TABLE runs (
        run_id   TEXT PRIMARY KEY,
        node_id  TEXT NOT NULL,
        status   TEXT NOT NULL,
        output   TEXT
    );
    CREATE TABLE calls (
        run_id     TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        node_id    TEXT NOT NULL,
        call_index INTEGER NOT NULL,
        entry      TEXT NOT NULL,
        request    TEXT NOT NULL,
        outcome    TEXT NOT NULL,
        events     TEXT NOT NULL,
        PRIMARY KEY (run_id, node_id, call_index)
    );
    CREATE TABLE events (
        run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        seq    INTEGER NOT NULL,
        event  TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );",
    // The fence of the recorder that owns each run.
    "ALTER TABLE runs ADD COLUMN fence INTEGER NOT NULL DEFAULT 0;",
    // The seed and clock of each run's sandbox.
    "ALTER TABLE runs ADD COLUMN seed INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE runs ADD COLUMN clock_ms INTEGER NOT NULL DEFAULT 0;",
    // When each event was committed, in ms since the Unix epoch (0: before
    // this was kept).
    "ALTER TABLE events ADD COLUMN at_ms INTEGER NOT NULL DEFAULT 0;",
];
const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// A run log in one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteRunLog {
    path: Arc<PathBuf>,
    conn: Arc<Mutex<Connection>>,
}

fn storage(e: rusqlite::Error) -> RunLogError {
    RunLogError::Storage(e.to_string())
}

/// What the first 100 bytes of a file say it is.
#[derive(PartialEq)]
enum Header {
    /// Absent or empty: a new log is made.
    Fresh,
    /// A callai run log.
    RunLog,
}

impl SqliteRunLog {
    /// Opens the log at `path`, creating it when the file does not exist or
    /// is empty. A file that is not a callai run log — another format,
    /// another program's database, a damaged one — is an error and is not
    /// written to: its header is read before SQLite opens it, so not even a
    /// hot journal beside it is rolled back.
    pub fn open(path: &Path) -> Result<Self, RunLogError> {
        let shown = path.display().to_string();
        let header = read_header(path, &shown)?;
        let corrupt = |e: rusqlite::Error| RunLogError::Corrupt {
            path: shown.clone(),
            reason: e.to_string(),
        };
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
        )
        .map_err(corrupt)?;
        if header == Header::Fresh {
            // A new log gets its application id and schema while still in
            // rollback-journal mode, so that they land in the file's own
            // header (WAL keeps header changes in the log until a
            // checkpoint), where the next open reads them before SQLite does.
            conn.execute_batch(&format!("PRAGMA application_id = {APPLICATION_ID};"))
                .map_err(storage)?;
            migrate(&conn, 0).map_err(storage)?;
            conn.execute_batch("PRAGMA journal_mode = WAL;")
                .map_err(storage)?;
        } else {
            let check: String = conn
                .query_row("PRAGMA quick_check", [], |r| r.get(0))
                .map_err(corrupt)?;
            if check != "ok" {
                return Err(RunLogError::Corrupt {
                    path: shown,
                    reason: check,
                });
            }
            // The schema version as SQLite sees it (the file's header may
            // lag behind the WAL).
            let version: u32 = conn
                .query_row("PRAGMA user_version", [], |r| r.get(0))
                .map_err(corrupt)?;
            if version > SCHEMA_VERSION {
                return Err(RunLogError::Foreign {
                    path: shown,
                    reason: format!(
                        "schema version {version}, newer than this build's {SCHEMA_VERSION}"
                    ),
                });
            }
            migrate(&conn, version).map_err(storage)?;
        }
        conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
            .map_err(storage)?;
        Ok(Self {
            path: Arc::new(path.to_path_buf()),
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// Opens an existing log (for replay): a missing file is an error, not
    /// a new log.
    pub fn open_existing(path: &Path) -> Result<Self, RunLogError> {
        if !path.exists() {
            return Err(RunLogError::Storage(format!(
                "run log {} does not exist",
                path.display()
            )));
        }
        Self::open(path)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `op` on the connection on tokio's blocking pool.
    fn blocking<'a, T: Send + 'static>(
        &'a self,
        op: impl FnOnce(&mut Connection, &str) -> Result<T, RunLogError> + Send + 'static,
    ) -> BoxFuture<'a, Result<T, RunLogError>> {
        let conn = self.conn.clone();
        let path = self.path.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                // A panic while holding the lock cannot leave a half-written
                // transaction behind (SQLite rolls it back): the guard is reusable.
                let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
                op(&mut conn, &path.display().to_string())
            })
            .await
            .map_err(|e| RunLogError::Storage(format!("the run log's worker failed: {e}")))?
        })
    }
}

/// Applies the migrations a file at `version` still needs, each in its own
/// transaction with the version it reaches.
fn migrate(conn: &Connection, version: u32) -> rusqlite::Result<()> {
    for (n, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; {sql} PRAGMA user_version = {}; COMMIT;",
            n + 1
        ))?;
    }
    Ok(())
}

/// Reads the header straight from the file (big-endian `application_id` at
/// byte 68), without SQLite, so that a file of another program is refused
/// before SQLite could touch it.
fn read_header(path: &Path, shown: &str) -> Result<Header, RunLogError> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Header::Fresh),
        Err(e) => return Err(RunLogError::Storage(format!("cannot open {shown}: {e}"))),
    };
    let mut header = Vec::with_capacity(100);
    file.take(100)
        .read_to_end(&mut header)
        .map_err(|e| RunLogError::Storage(format!("cannot read {shown}: {e}")))?;
    let foreign = |reason: String| RunLogError::Foreign {
        path: shown.into(),
        reason,
    };
    if header.is_empty() {
        return Ok(Header::Fresh);
    }
    if !header.starts_with(SQLITE_HEADER) {
        return Err(foreign("not an SQLite database".into()));
    }
    if header.len() < 100 {
        return Err(RunLogError::Corrupt {
            path: shown.into(),
            reason: "the database header is cut short".into(),
        });
    }
    let id = u32::from_be_bytes(header[68..72].try_into().expect("4 bytes"));
    if id != APPLICATION_ID {
        return Err(foreign(format!(
            "an SQLite database of another program (application_id {id:#x})"
        )));
    }
    Ok(Header::RunLog)
}

/// The run's fence, checked against the recorder's; `Fenced` when another
/// recorder took it over.
fn check_fence(
    tx: &rusqlite::Transaction<'_>,
    run_id: &str,
    fence: Fence,
) -> Result<(), RunLogError> {
    let stored: Option<i64> = tx
        .query_row("SELECT fence FROM runs WHERE run_id = ?1", [run_id], |r| {
            r.get(0)
        })
        .optional()
        .map_err(storage)?;
    match stored {
        Some(f) if f == fence.0 => Ok(()),
        Some(_) => Err(RunLogError::Fenced(run_id.into())),
        None => Err(RunLogError::NoSuchRun(run_id.into())),
    }
}

/// Appends `events` (as JSON text) after the run's last sequence number.
fn append_events(
    tx: &rusqlite::Transaction<'_>,
    run_id: &str,
    events: &[String],
) -> Result<(), RunLogError> {
    let next: i64 = tx
        .query_row(
            "SELECT COALESCE(MAX(seq) + 1, 0) FROM events WHERE run_id = ?1",
            [run_id],
            |r| r.get(0),
        )
        .map_err(storage)?;
    let mut insert = tx
        .prepare_cached("INSERT INTO events (run_id, seq, event, at_ms) VALUES (?1, ?2, ?3, ?4)")
        .map_err(storage)?;
    let at = crate::events::now_ms() as i64;
    for (i, event) in events.iter().enumerate() {
        insert
            .execute(params![run_id, next + i as i64, event, at])
            .map_err(storage)?;
    }
    Ok(())
}

fn to_text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("run log records always serialise")
}

fn immediate(conn: &mut Connection) -> Result<rusqlite::Transaction<'_>, RunLogError> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(storage)
}

impl RunLog for SqliteRunLog {
    fn begin<'a>(
        &'a self,
        run_id: &'a str,
        node_id: &'a str,
        seed: RunSeed,
        overwrite: bool,
    ) -> BoxFuture<'a, Result<Fence, RunLogError>> {
        // SQLite integers are signed: the seed is stored bit for bit.
        let (stored_seed, clock_ms) = (seed.seed as i64, seed.clock_ms as i64);
        let (run_id, node_id) = (run_id.to_owned(), node_id.to_owned());
        self.blocking(move |conn, _| {
            let tx = immediate(conn)?;
            let old: Option<i64> = tx
                .query_row("SELECT fence FROM runs WHERE run_id = ?1", [&run_id], |r| r.get(0))
                .optional()
                .map_err(storage)?;
            let fence = match old {
                Some(_) if !overwrite => return Err(RunLogError::RunExists(run_id)),
                Some(old) => {
                    // The old recording's next commit meets a new fence and stops.
                    for table in ["calls", "events"] {
                        tx.execute(&format!("DELETE FROM {table} WHERE run_id = ?1"), [&run_id])
                            .map_err(storage)?;
                    }
                    tx.execute(
                        "UPDATE runs SET node_id = ?2, status = 'running', output = NULL, fence = ?3,
                         seed = ?4, clock_ms = ?5 WHERE run_id = ?1",
                        params![run_id, node_id, old + 1, stored_seed, clock_ms],
                    )
                    .map_err(storage)?;
                    old + 1
                }
                None => {
                    tx.execute(
                        "INSERT INTO runs (run_id, node_id, status, fence, seed, clock_ms)
                         VALUES (?1, ?2, 'running', 1, ?3, ?4)",
                        params![run_id, node_id, stored_seed, clock_ms],
                    )
                    .map_err(storage)?;
                    1
                }
            };
            tx.commit().map_err(storage)?;
            Ok(Fence(fence))
        })
    }

    fn commit_call<'a>(
        &'a self,
        run_id: &'a str,
        fence: Fence,
        call: &'a RecordedCall,
        events: &'a [Event],
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        let run_id = run_id.to_owned();
        let events: Vec<String> = events.iter().map(to_text).collect();
        let row = (
            call.node_id.clone(),
            call.index,
            call.entry.as_str(),
            call.request.to_string(),
            to_text(&call.outcome),
            to_text(&call.events),
        );
        self.blocking(move |conn, _| {
            let tx = immediate(conn)?;
            check_fence(&tx, &run_id, fence)?;
            append_events(&tx, &run_id, &events)?;
            tx.execute(
                "INSERT INTO calls (run_id, node_id, call_index, entry, request, outcome, events)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![run_id, row.0, row.1, row.2, row.3, row.4, row.5],
            )
            .map_err(storage)?;
            tx.commit().map_err(storage)
        })
    }

    fn finish<'a>(
        &'a self,
        run_id: &'a str,
        fence: Fence,
        events: &'a [Event],
        status: RunStatus,
        output: &'a str,
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        let (run_id, output) = (run_id.to_owned(), output.to_owned());
        let events: Vec<String> = events.iter().map(to_text).collect();
        self.blocking(move |conn, _| {
            let tx = immediate(conn)?;
            check_fence(&tx, &run_id, fence)?;
            append_events(&tx, &run_id, &events)?;
            tx.execute(
                "UPDATE runs SET status = ?2, output = ?3 WHERE run_id = ?1",
                params![run_id, status.as_str(), output],
            )
            .map_err(storage)?;
            tx.commit().map_err(storage)
        })
    }

    fn load<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<RecordedRun, RunLogError>> {
        let run_id = run_id.to_owned();
        self.blocking(move |conn, path| load(conn, path, &run_id))
    }
}

/// Reads a run back, checking every record: a record that does not parse,
/// or says what no host would (an attempts count of 0), is corruption.
fn load(conn: &Connection, path: &str, run_id: &str) -> Result<RecordedRun, RunLogError> {
    let corrupt = |what: String| RunLogError::Corrupt {
        path: path.into(),
        reason: format!("run {run_id:?}: {what}"),
    };
    let (node_id, status, output, seed, clock_ms): (String, String, Option<String>, i64, i64) =
        conn.query_row(
            "SELECT node_id, status, output, seed, clock_ms FROM runs WHERE run_id = ?1",
            [run_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .optional()
        .map_err(storage)?
        .ok_or_else(|| RunLogError::NoSuchRun(run_id.into()))?;
    let status =
        RunStatus::parse(&status).ok_or_else(|| corrupt(format!("unknown status {status:?}")))?;
    let mut stmt = conn
        .prepare(
            "SELECT node_id, call_index, entry, request, outcome, events FROM calls
             WHERE run_id = ?1 ORDER BY call_index",
        )
        .map_err(storage)?;
    let rows = stmt
        .query_map([run_id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, u32>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
            ))
        })
        .map_err(storage)?;
    let mut calls = Vec::new();
    for row in rows {
        let (node_id, index, entry, request, outcome, events) = row.map_err(storage)?;
        let at =
            |what: &str, e: &dyn std::fmt::Display| corrupt(format!("call {index}: {what}: {e}"));
        let outcome: Outcome =
            serde_json::from_str(&outcome).map_err(|e| at("its outcome does not parse", &e))?;
        outcome
            .check()
            .map_err(|e| at("its outcome is impossible", &e))?;
        calls.push(RecordedCall {
            node_id,
            index,
            entry: Entry::parse(&entry).ok_or_else(|| at("unknown entry", &entry))?,
            request: serde_json::from_str(&request)
                .map_err(|e| at("its request does not parse", &e))?,
            outcome,
            events: serde_json::from_str(&events).map_err(|e| at("its events do not parse", &e))?,
        });
    }
    if let Some((i, c)) = calls.iter().enumerate().find(|(i, c)| c.index != *i as u32) {
        return Err(corrupt(format!(
            "call {} is missing (found call {} there)",
            i, c.index
        )));
    }
    let mut stmt = conn
        .prepare("SELECT event, at_ms FROM events WHERE run_id = ?1 ORDER BY seq")
        .map_err(storage)?;
    let (events, event_times): (Vec<Event>, Vec<u64>) = stmt
        .query_map([run_id], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
        })
        .map_err(storage)?
        .map(|row| {
            let (text, at) = row.map_err(storage)?;
            let event = serde_json::from_str(&text)
                .map_err(|e| corrupt(format!("an event does not parse: {e}")))?;
            Ok((event, at.max(0) as u64))
        })
        .collect::<Result<Vec<(Event, u64)>, RunLogError>>()?
        .into_iter()
        .unzip();
    Ok(RecordedRun {
        run_id: run_id.into(),
        node_id,
        seed: RunSeed {
            seed: seed as u64,
            clock_ms: clock_ms as u64,
        },
        status,
        output,
        calls,
        events,
        event_times,
    })
}

#[cfg(test)]
mod tests;
