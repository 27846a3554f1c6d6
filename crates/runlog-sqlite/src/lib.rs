//! The built-in run log: one SQLite file (bundled SQLite, WAL journal,
//! synchronous commits), one transaction per call, behind the engine's
//! [`callai_engine::RunLog`] trait. SQLite is blocking, so every operation
//! runs on tokio's blocking pool, never on an async worker.

#![warn(missing_docs)]

use callai_engine::BoxFuture;
use callai_engine::RunLogError;
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use schema::{MIGRATIONS, SCHEMA_VERSION};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

/// `PRAGMA application_id` of a callai run log ("CAl0").
const APPLICATION_ID: u32 = 0x4341_6c30;
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

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

mod api_keys;
mod growth;
mod ledger;
mod responses;
mod schema;
mod store;
mod traces;

#[cfg(test)]
mod tests;
