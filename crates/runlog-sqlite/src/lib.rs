//! The built-in run log: one SQLite file (bundled SQLite, WAL journal,
//! synchronous commits), one transaction per call, behind the engine's
//! [`callai_engine::RunLog`] trait. SQLite is blocking, so every operation
//! runs on tokio's blocking pool, never on an async worker.

#![warn(missing_docs)]

use callai_engine::BoxFuture;
use callai_engine::RunLogError;
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

/// `PRAGMA application_id` of a callai run log ("CAl0").
const APPLICATION_ID: u32 = 0x4341_6c30;
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// The migrations, in order: `MIGRATIONS[n]` takes schema version `n` to
/// `n + 1`. The version a file is at is its `PRAGMA user_version`.
const MIGRATIONS: [&str; 12] = [
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
    // Durable runs: what each run was started with, its lease, and the
    // components of the packs they run.
    "ALTER TABLE runs ADD COLUMN spec TEXT;
     ALTER TABLE runs ADD COLUMN durable INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE runs ADD COLUMN owner TEXT;
     ALTER TABLE runs ADD COLUMN lease_until_ms INTEGER NOT NULL DEFAULT 0;
     CREATE TABLE packs (
         sha256 TEXT PRIMARY KEY,
         bytes  BLOB NOT NULL
     );",
    // Bounded growth: each call's schema stored once by its hash, what each
    // run recorded (runlog.maxRunBytes), and when each run ended (for
    // runlog.keepDays; a run that ended before this was kept counts as
    // ending now).
    "CREATE TABLE schemas (
         sha256 TEXT PRIMARY KEY,
         text   TEXT NOT NULL
     );
     ALTER TABLE calls ADD COLUMN schema_sha256 TEXT;
     CREATE INDEX calls_schema ON calls (schema_sha256) WHERE schema_sha256 IS NOT NULL;
     ALTER TABLE runs ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE runs ADD COLUMN ended_ms INTEGER NOT NULL DEFAULT 0;
     UPDATE runs SET ended_ms = CAST(strftime('%s', 'now') AS INTEGER) * 1000
         WHERE status <> 'running';
     CREATE INDEX runs_ended ON runs (ended_ms) WHERE status <> 'running';",
    // Tenants' budgets (each window's spend and what calls in flight hold)
    // and idempotency keys with the answers they repeat.
    "CREATE TABLE budget_windows (
         tenant            TEXT NOT NULL,
         window_ms         INTEGER NOT NULL,
         spent_requests    INTEGER NOT NULL DEFAULT 0,
         spent_output      INTEGER NOT NULL DEFAULT 0,
         spent_input       INTEGER NOT NULL DEFAULT 0,
         reserved_requests INTEGER NOT NULL DEFAULT 0,
         reserved_output   INTEGER NOT NULL DEFAULT 0,
         reserved_input    INTEGER NOT NULL DEFAULT 0,
         PRIMARY KEY (tenant, window_ms)
     );
     CREATE TABLE budget_reservations (
         id         INTEGER PRIMARY KEY AUTOINCREMENT,
         tenant     TEXT NOT NULL,
         window_ms  INTEGER NOT NULL,
         requests   INTEGER NOT NULL,
         output     INTEGER NOT NULL,
         input      INTEGER NOT NULL,
         owner      TEXT NOT NULL,
         expires_ms INTEGER NOT NULL
     );
     CREATE INDEX budget_reservations_lapse ON budget_reservations (tenant, expires_ms);
     CREATE TABLE idempotency_keys (
         tenant         TEXT NOT NULL,
         key            TEXT NOT NULL,
         request_sha256 TEXT NOT NULL,
         state          TEXT NOT NULL,
         owner          TEXT NOT NULL,
         until_ms       INTEGER NOT NULL,
         keep_ms        INTEGER NOT NULL,
         status         INTEGER,
         headers        TEXT,
         body           BLOB,
         PRIMARY KEY (tenant, key)
     );
     CREATE INDEX idempotency_keys_until ON idempotency_keys (until_ms);",
    // Every run has an owner, the tenant whose token made it, and run ids
    // are unique per owner: the runs, calls and events tables are rebuilt
    // with a `tenant` column in their keys (SQLite cannot change a primary
    // key in place). A run recorded before has the tenant its spec names
    // (what `callai serve` kept of a tenant's run), else the admin.
    "CREATE TABLE new_runs (
         tenant         TEXT NOT NULL,
         run_id         TEXT NOT NULL,
         node_id        TEXT NOT NULL,
         status         TEXT NOT NULL,
         output         TEXT,
         fence          INTEGER NOT NULL DEFAULT 0,
         seed           INTEGER NOT NULL DEFAULT 0,
         clock_ms       INTEGER NOT NULL DEFAULT 0,
         spec           TEXT,
         durable        INTEGER NOT NULL DEFAULT 0,
         owner          TEXT,
         lease_until_ms INTEGER NOT NULL DEFAULT 0,
         bytes          INTEGER NOT NULL DEFAULT 0,
         ended_ms       INTEGER NOT NULL DEFAULT 0,
         PRIMARY KEY (tenant, run_id)
     );
     INSERT INTO new_runs
         SELECT CASE WHEN json_valid(spec) AND json_type(spec, '$.tenant') = 'text'
                     THEN json_extract(spec, '$.tenant') ELSE 'admin' END,
                run_id, node_id, status, output, fence, seed, clock_ms, spec, durable, owner,
                lease_until_ms, bytes, ended_ms
         FROM runs;
     CREATE TABLE new_calls (
         tenant        TEXT NOT NULL,
         run_id        TEXT NOT NULL,
         node_id       TEXT NOT NULL,
         call_index    INTEGER NOT NULL,
         entry         TEXT NOT NULL,
         request       TEXT NOT NULL,
         outcome       TEXT NOT NULL,
         events        TEXT NOT NULL,
         schema_sha256 TEXT,
         PRIMARY KEY (tenant, run_id, node_id, call_index),
         FOREIGN KEY (tenant, run_id) REFERENCES runs (tenant, run_id) ON DELETE CASCADE
     );
     INSERT INTO new_calls
         SELECT r.tenant, c.run_id, c.node_id, c.call_index, c.entry, c.request, c.outcome,
                c.events, c.schema_sha256
         FROM calls c JOIN new_runs r ON r.run_id = c.run_id;
     CREATE TABLE new_events (
         tenant TEXT NOT NULL,
         run_id TEXT NOT NULL,
         seq    INTEGER NOT NULL,
         event  TEXT NOT NULL,
         at_ms  INTEGER NOT NULL DEFAULT 0,
         PRIMARY KEY (tenant, run_id, seq),
         FOREIGN KEY (tenant, run_id) REFERENCES runs (tenant, run_id) ON DELETE CASCADE
     );
     INSERT INTO new_events
         SELECT r.tenant, e.run_id, e.seq, e.event, e.at_ms
         FROM events e JOIN new_runs r ON r.run_id = e.run_id;
     DROP TABLE calls;
     DROP TABLE events;
     DROP TABLE runs;
     ALTER TABLE new_runs RENAME TO runs;
     ALTER TABLE new_calls RENAME TO calls;
     ALTER TABLE new_events RENAME TO events;
     CREATE INDEX calls_schema ON calls (schema_sha256) WHERE schema_sha256 IS NOT NULL;
     CREATE INDEX runs_ended ON runs (ended_ms) WHERE status <> 'running';
     CREATE INDEX runs_leased ON runs (lease_until_ms) WHERE durable = 1 AND status = 'running';",
    // Budget reservations say how many calls' worst cases they were granted
    // (more than one: a host's chunk, which may hold room no call holds
    // yet) and whether they lapsed (their host died or stalled: what they
    // hold is then charged, not released).
    "ALTER TABLE budget_reservations ADD COLUMN calls INTEGER NOT NULL DEFAULT 1;
     ALTER TABLE budget_reservations ADD COLUMN lapsed INTEGER NOT NULL DEFAULT 0;
     CREATE INDEX budget_reservations_window ON budget_reservations (tenant, window_ms)
         WHERE calls > 1 AND lapsed = 0;",
    // Call traces (`GET /v1/calls`): each call's trace, numbered in the
    // order kept, and the tags a listing filters on, keyed for a range
    // read of one tag from the newest down.
    "CREATE TABLE call_traces (
         seq        INTEGER PRIMARY KEY,
         id         TEXT NOT NULL UNIQUE,
         tenant     TEXT NOT NULL,
         started_ms INTEGER NOT NULL,
         ended_ms   INTEGER NOT NULL,
         attempts   INTEGER NOT NULL,
         trace      TEXT NOT NULL
     );
     CREATE TABLE call_trace_tags (
         tag TEXT NOT NULL,
         seq INTEGER NOT NULL,
         PRIMARY KEY (tag, seq)
     ) WITHOUT ROWID;",
    // Budgets in money (`[tenants.NAME.budget] cost`), in billionths of
    // the budget's currency.
    "ALTER TABLE budget_windows ADD COLUMN spent_cost INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE budget_windows ADD COLUMN reserved_cost INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE budget_reservations ADD COLUMN cost INTEGER NOT NULL DEFAULT 0;",
    // The kept calls summed per minute (`GET /v1/usage`), added to as
    // their traces are written: calls and their cost by tenant and
    // currency ('' for calls with no price), requests by tenant, provider
    // and reason; keyed by minute first, for a range read of the last ones.
    "CREATE TABLE usage_calls (
         minute_ms  INTEGER NOT NULL,
         tenant     TEXT NOT NULL,
         currency   TEXT NOT NULL,
         calls      INTEGER NOT NULL,
         cost       INTEGER NOT NULL,
         incomplete INTEGER NOT NULL,
         PRIMARY KEY (minute_ms, tenant, currency)
     ) WITHOUT ROWID;
     CREATE TABLE usage_requests (
         minute_ms INTEGER NOT NULL,
         tenant    TEXT NOT NULL,
         provider  TEXT NOT NULL,
         reason    TEXT NOT NULL,
         count     INTEGER NOT NULL,
         PRIMARY KEY (minute_ms, tenant, provider, reason)
     ) WITHOUT ROWID;",
];
const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// A run log in one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteRunLog {
    path: Arc<PathBuf>,
    conn: Arc<Mutex<Connection>>,
    max_run_bytes: Option<u64>,
}

fn storage(e: rusqlite::Error) -> RunLogError {
    RunLogError::Storage(e.to_string())
}

/// A write transaction, its lock taken at `BEGIN` (a writer that would
/// wait does so there, not half-way through).
fn immediate(conn: &mut Connection) -> Result<rusqlite::Transaction<'_>, RunLogError> {
    conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(storage)
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
        // Processes opening one log at once take turns (an advisory lock
        // on a file of its own beside it): the first creates and migrates
        // it, the others find it done.
        let _turn = take_turn(path, &shown)?;
        // POSIX drops every lock a process holds on a file when it closes
        // any descriptor of that file, SQLite's own locks included (they
        // tell another process the log is in use, and keep it from
        // deleting the live WAL). So once this process has the log open,
        // no descriptor of the database file is opened and closed again:
        // a second open shares the connection.
        let mut open = OPEN_LOGS.lock().unwrap_or_else(|p| p.into_inner());
        let key = std::fs::canonicalize(path).ok();
        if let Some(conn) = key
            .as_ref()
            .and_then(|k| open.get(k))
            .and_then(Weak::upgrade)
        {
            return Ok(Self {
                path: Arc::new(path.to_path_buf()),
                conn,
                max_run_bytes: None,
            });
        }
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
        let conn = Arc::new(Mutex::new(conn));
        open.retain(|_, c| c.strong_count() > 0);
        if let Ok(key) = std::fs::canonicalize(path) {
            open.insert(key, Arc::downgrade(&conn));
        }
        Ok(Self {
            path: Arc::new(path.to_path_buf()),
            conn,
            max_run_bytes: None,
        })
    }

    /// This handle refuses a call that would take what one run recorded
    /// past `limit` bytes (`runlog.maxRunBytes`): its rows, its events, and
    /// each distinct schema it names once.
    pub fn with_max_run_bytes(mut self, limit: u64) -> Self {
        self.max_run_bytes = Some(limit);
        self
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

/// Holds an exclusive advisory lock on `path-callai-open` (made if absent)
/// until dropped: never on the database file itself, whose descriptors
/// must stay SQLite's alone (see [`SqliteRunLog::open`]).
fn take_turn(path: &Path, shown: &str) -> Result<std::fs::File, RunLogError> {
    let mut name = path.as_os_str().to_owned();
    name.push("-callai-open");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&name)
        .map_err(|e| RunLogError::Storage(format!("cannot open the lock file of {shown}: {e}")))?;
    file.lock()
        .map_err(|e| RunLogError::Storage(format!("cannot lock {shown}: {e}")))?;
    Ok(file)
}

/// The logs this process has open, by canonical path.
static OPEN_LOGS: Mutex<BTreeMap<PathBuf, Weak<Mutex<Connection>>>> = Mutex::new(BTreeMap::new());

/// Applies the migrations a file at `version` still needs, each in its own
/// transaction with the version it reaches; a step another process already
/// applied is skipped. Foreign keys are off while they run (a table rebuilt
/// under a new key is referenced before it is renamed into place; the
/// pragma only takes outside a transaction) and checked once they have.
fn migrate(conn: &Connection, version: u32) -> rusqlite::Result<()> {
    if version as usize >= MIGRATIONS.len() {
        return Ok(());
    }
    conn.execute_batch("PRAGMA foreign_keys = OFF;")?;
    let migrated = apply_migrations(conn, version);
    let broken: Option<String> = conn
        .query_row("PRAGMA foreign_key_check", [], |r| r.get(0))
        .optional()?;
    conn.execute_batch("PRAGMA foreign_keys = ON;")?;
    migrated?;
    match broken {
        Some(table) => Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CONSTRAINT),
            Some(format!(
                "the migration left rows of {table} that reference no run"
            )),
        )),
        None => Ok(()),
    }
}

fn apply_migrations(conn: &Connection, version: u32) -> rusqlite::Result<()> {
    for (n, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        conn.execute_batch("BEGIN IMMEDIATE;")?;
        let now: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        let step = if now > n as u32 {
            "COMMIT;".to_owned()
        } else {
            format!("{sql} PRAGMA user_version = {}; COMMIT;", n + 1)
        };
        if let Err(e) = conn.execute_batch(&step) {
            let _ = conn.execute_batch("ROLLBACK;");
            return Err(e);
        }
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

mod growth;
mod ledger;
mod store;
mod traces;

#[cfg(test)]
mod tests;
