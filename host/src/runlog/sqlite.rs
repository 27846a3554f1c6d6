//! The built-in run log: one SQLite file (bundled SQLite, WAL journal,
//! synchronous commits), one transaction per call.

use super::{Entry, RecordedCall, RecordedRun, RunLog, RunLogError, RunStatus};
use crate::events::Event;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// `PRAGMA application_id` of a callai run log ("CAl0").
const APPLICATION_ID: i32 = 0x4341_6c30;
/// The schema version this build writes and reads.
const SCHEMA_VERSION: i32 = 1;
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    run_id   TEXT PRIMARY KEY,
    node_id  TEXT NOT NULL,
    status   TEXT NOT NULL,
    output   TEXT
);
CREATE TABLE IF NOT EXISTS calls (
    run_id     TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    node_id    TEXT NOT NULL,
    call_index INTEGER NOT NULL,
    entry      TEXT NOT NULL,
    request    TEXT NOT NULL,
    outcome    TEXT NOT NULL,
    events     TEXT NOT NULL,
    PRIMARY KEY (run_id, node_id, call_index)
);
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    seq    INTEGER NOT NULL,
    event  TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
";

/// A run log in one SQLite file.
#[derive(Debug)]
pub struct SqliteRunLog {
    path: PathBuf,
    conn: Mutex<Connection>,
}

fn storage(e: rusqlite::Error) -> RunLogError {
    RunLogError::Storage(e.to_string())
}

fn json_err(e: serde_json::Error) -> RunLogError {
    RunLogError::Storage(format!("a record does not parse: {e}"))
}

impl SqliteRunLog {
    /// Opens the log at `path`, creating it when the file does not exist or
    /// is empty. A file that is not a callai run log — another format,
    /// another program's database, a damaged one — is an error and is not
    /// written to.
    pub fn open(path: &Path) -> Result<Self, RunLogError> {
        let shown = path.display().to_string();
        let fresh = Self::check_header(path, &shown)?;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
        )
        .map_err(|e| RunLogError::Corrupt {
            path: shown.clone(),
            reason: e.to_string(),
        })?;
        let corrupt = |e: rusqlite::Error| RunLogError::Corrupt {
            path: shown.clone(),
            reason: e.to_string(),
        };
        if fresh {
            conn.execute_batch(&format!(
                "PRAGMA journal_mode = WAL; PRAGMA application_id = {APPLICATION_ID};
                 PRAGMA user_version = {SCHEMA_VERSION}; BEGIN; {SCHEMA} COMMIT;"
            ))
            .map_err(storage)?;
        } else {
            let id: i32 = conn
                .query_row("PRAGMA application_id", [], |r| r.get(0))
                .map_err(corrupt)?;
            if id != APPLICATION_ID {
                return Err(RunLogError::Foreign {
                    path: shown,
                    reason: format!(
                        "an SQLite database of another program (application_id {id:#x})"
                    ),
                });
            }
            let version: i32 = conn
                .query_row("PRAGMA user_version", [], |r| r.get(0))
                .map_err(corrupt)?;
            if version != SCHEMA_VERSION {
                return Err(RunLogError::Foreign {
                    path: shown,
                    reason: format!("schema version {version}, this build reads {SCHEMA_VERSION}"),
                });
            }
            let check: String = conn
                .query_row("PRAGMA quick_check", [], |r| r.get(0))
                .map_err(corrupt)?;
            if check != "ok" {
                return Err(RunLogError::Corrupt {
                    path: shown,
                    reason: check,
                });
            }
        }
        conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
            .map_err(storage)?;
        Ok(Self {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
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

    /// Whether `path` is to be created (absent or empty); an error when it
    /// holds something other than an SQLite database.
    fn check_header(path: &Path, shown: &str) -> Result<bool, RunLogError> {
        let mut file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
            Err(e) => return Err(RunLogError::Storage(format!("cannot open {shown}: {e}"))),
        };
        let mut header = Vec::with_capacity(16);
        (&mut file)
            .take(16)
            .read_to_end(&mut header)
            .map_err(|e| RunLogError::Storage(format!("cannot read {shown}: {e}")))?;
        match header.as_slice() {
            [] => Ok(true),
            h if h == SQLITE_HEADER => Ok(false),
            _ => Err(RunLogError::Foreign {
                path: shown.into(),
                reason: "not an SQLite database".into(),
            }),
        }
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave a half-written
        // transaction behind (SQLite rolls it back), so the guard is reusable.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Appends `events` after the run's last sequence number.
fn append_events(
    tx: &rusqlite::Transaction<'_>,
    run_id: &str,
    events: &[Event],
) -> Result<(), RunLogError> {
    let next: i64 = tx
        .query_row(
            "SELECT COALESCE(MAX(seq) + 1, 0) FROM events WHERE run_id = ?1",
            [run_id],
            |r| r.get(0),
        )
        .map_err(storage)?;
    let mut insert = tx
        .prepare_cached("INSERT INTO events (run_id, seq, event) VALUES (?1, ?2, ?3)")
        .map_err(storage)?;
    for (i, event) in events.iter().enumerate() {
        let text = serde_json::to_string(event).map_err(json_err)?;
        insert
            .execute(params![run_id, next + i as i64, text])
            .map_err(storage)?;
    }
    Ok(())
}

impl RunLog for SqliteRunLog {
    fn begin(&self, run_id: &str, node_id: &str, overwrite: bool) -> Result<(), RunLogError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(storage)?;
        let exists = tx
            .query_row("SELECT 1 FROM runs WHERE run_id = ?1", [run_id], |_| Ok(()))
            .optional()
            .map_err(storage)?
            .is_some();
        if exists && !overwrite {
            return Err(RunLogError::RunExists(run_id.into()));
        }
        tx.execute("DELETE FROM runs WHERE run_id = ?1", [run_id])
            .map_err(storage)?;
        tx.execute(
            "INSERT INTO runs (run_id, node_id, status) VALUES (?1, ?2, 'running')",
            params![run_id, node_id],
        )
        .map_err(storage)?;
        tx.commit().map_err(storage)
    }

    fn commit_call(
        &self,
        run_id: &str,
        call: &RecordedCall,
        events: &[Event],
    ) -> Result<(), RunLogError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(storage)?;
        append_events(&tx, run_id, events)?;
        tx.execute(
            "INSERT INTO calls (run_id, node_id, call_index, entry, request, outcome, events)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                run_id,
                call.node_id,
                call.index,
                call.entry.as_str(),
                call.request,
                call.outcome.to_string(),
                serde_json::to_string(&call.events).map_err(json_err)?,
            ],
        )
        .map_err(storage)?;
        tx.commit().map_err(storage)
    }

    fn finish(
        &self,
        run_id: &str,
        events: &[Event],
        status: RunStatus,
        output: &str,
    ) -> Result<(), RunLogError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(storage)?;
        append_events(&tx, run_id, events)?;
        let status = match status {
            RunStatus::Running => "running",
            RunStatus::Ok => "ok",
            RunStatus::Failed => "failed",
        };
        tx.execute(
            "UPDATE runs SET status = ?2, output = ?3 WHERE run_id = ?1",
            params![run_id, status, output],
        )
        .map_err(storage)?;
        tx.commit().map_err(storage)
    }

    fn load(&self, run_id: &str) -> Result<RecordedRun, RunLogError> {
        let conn = self.conn();
        let (node_id, status, output): (String, String, Option<String>) = conn
            .query_row(
                "SELECT node_id, status, output FROM runs WHERE run_id = ?1",
                [run_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(storage)?
            .ok_or_else(|| RunLogError::NoSuchRun(run_id.into()))?;
        let status = match status.as_str() {
            "running" => RunStatus::Running,
            "ok" => RunStatus::Ok,
            "failed" => RunStatus::Failed,
            other => {
                return Err(RunLogError::Storage(format!(
                    "unknown run status {other:?}"
                )));
            }
        };
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
            calls.push(RecordedCall {
                node_id,
                index,
                entry: match entry.as_str() {
                    "typed" => Entry::Typed,
                    "json" => Entry::Json,
                    other => return Err(RunLogError::Storage(format!("unknown entry {other:?}"))),
                },
                request,
                outcome: serde_json::from_str(&outcome).map_err(json_err)?,
                events: serde_json::from_str(&events).map_err(json_err)?,
            });
        }
        let mut stmt = conn
            .prepare("SELECT event FROM events WHERE run_id = ?1 ORDER BY seq")
            .map_err(storage)?;
        let events = stmt
            .query_map([run_id], |r| r.get::<_, String>(0))
            .map_err(storage)?
            .map(|row| {
                let text = row.map_err(storage)?;
                serde_json::from_str(&text).map_err(json_err)
            })
            .collect::<Result<Vec<Event>, _>>()?;
        Ok(RecordedRun {
            run_id: run_id.into(),
            node_id,
            status,
            output,
            calls,
            events,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(index: u32) -> RecordedCall {
        RecordedCall {
            node_id: "n".into(),
            index,
            entry: Entry::Json,
            request: format!("{{\"i\": {index}}}"),
            outcome: json!({"result": {"attempts": {"count": 2, "usageComplete": true}}}),
            events: vec![Event::RecoveryApplied {
                node_id: "n".into(),
                path: "direct".into(),
            }],
        }
    }

    #[test]
    fn a_run_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.db");
        let log = SqliteRunLog::open(&path).unwrap();
        log.begin("r", "n", false).unwrap();
        log.commit_call("r", &call(0), &call(0).events).unwrap();
        log.commit_call("r", &call(1), &[]).unwrap();
        log.finish("r", &call(1).events, RunStatus::Ok, "{}")
            .unwrap();
        drop(log);
        let run = SqliteRunLog::open_existing(&path)
            .unwrap()
            .load("r")
            .unwrap();
        assert_eq!(run.calls, vec![call(0), call(1)]);
        assert_eq!(run.events.len(), 2);
        assert_eq!(run.status, RunStatus::Ok);
        assert_eq!(run.output.as_deref(), Some("{}"));
    }

    #[test]
    fn an_existing_run_is_refused_unless_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let log = SqliteRunLog::open(&dir.path().join("log.db")).unwrap();
        log.begin("r", "n", false).unwrap();
        log.commit_call("r", &call(0), &[]).unwrap();
        assert_eq!(
            log.begin("r", "n", false),
            Err(RunLogError::RunExists("r".into()))
        );
        assert_eq!(
            log.load("r").unwrap().calls.len(),
            1,
            "the refused begin lost nothing"
        );
        log.begin("r", "n", true).unwrap();
        assert!(log.load("r").unwrap().calls.is_empty());
        assert_eq!(
            log.load("other"),
            Err(RunLogError::NoSuchRun("other".into()))
        );
    }

    #[test]
    fn foreign_and_corrupt_files_are_refused_and_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("notes.txt");
        std::fs::write(&text, "hello").unwrap();
        assert!(matches!(
            SqliteRunLog::open(&text),
            Err(RunLogError::Foreign { .. })
        ));
        assert_eq!(std::fs::read(&text).unwrap(), b"hello");

        let foreign = dir.path().join("other.db");
        Connection::open(&foreign)
            .unwrap()
            .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
            .unwrap();
        let before = std::fs::read(&foreign).unwrap();
        let err = SqliteRunLog::open(&foreign).unwrap_err();
        assert!(err.to_string().contains("another program"), "{err}");
        assert_eq!(std::fs::read(&foreign).unwrap(), before);

        let corrupt = dir.path().join("corrupt.db");
        let mut bytes = SQLITE_HEADER.to_vec();
        bytes.extend(std::iter::repeat_n(0xA5u8, 8192));
        std::fs::write(&corrupt, &bytes).unwrap();
        assert!(matches!(
            SqliteRunLog::open(&corrupt),
            Err(RunLogError::Corrupt { .. })
        ));
        assert_eq!(std::fs::read(&corrupt).unwrap(), bytes);

        assert!(SqliteRunLog::open_existing(&dir.path().join("absent.db")).is_err());
        assert!(!dir.path().join("absent.db").exists());
    }
}
