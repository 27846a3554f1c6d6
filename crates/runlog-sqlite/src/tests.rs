//! The SQLite run log: round trips, refusals, fences, and files it must
//! leave alone.

use super::*;
use callai_engine::events::Event;
use callai_engine::runlog::{
    BeginRun, Entry, ExistingRun, Fence, Outcome, RecordedCall, RunLog, RunSeed, RunStatus,
};
use callai_wire::{Attempts, CallResult};

/// How these tests begin a run: `run_id` of node `n` with [`SEED`].
fn begin(run_id: &'static str, existing: ExistingRun) -> BeginRun<'static> {
    BeginRun {
        run: run_id.into(),
        node_id: "n",
        seed: SEED,
        existing,
        spec: None,
        lease: None,
    }
}

/// The schema version the log's file is at.
fn schema_version(log: &SqliteRunLog) -> u32 {
    let conn = log.conn.lock().unwrap();
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

const SEED: RunSeed = RunSeed {
    seed: u64::MAX - 7,
    clock_ms: 1_800_000_000_000,
};

fn call(index: u32) -> RecordedCall {
    RecordedCall {
        node_id: "n".into(),
        index,
        entry: Entry::Json,
        request: serde_json::json!({"i": index}),
        outcome: Outcome::Result(CallResult {
            attempts: Some(Attempts {
                count: 2,
                output_tokens: None,
                usage_complete: true,
                structured_output: None,
            }),
            ..CallResult::default()
        }),
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
    let rt = rt();
    let log = SqliteRunLog::open(&path).unwrap();
    rt.block_on(async {
        let f = log.begin(&begin("r", ExistingRun::Refuse)).await.unwrap();
        log.commit_call("r".into(), f, &call(0), &call(0).events)
            .await
            .unwrap();
        log.commit_call("r".into(), f, &call(1), &[]).await.unwrap();
        log.finish("r".into(), f, &call(1).events, RunStatus::Ok, "{}")
            .await
            .unwrap();
    });
    drop(log);
    let run = rt
        .block_on(SqliteRunLog::open_existing(&path).unwrap().load("r".into()))
        .unwrap();
    assert_eq!(run.calls, vec![call(0), call(1)]);
    assert_eq!(run.events.len(), 2);
    assert_eq!(run.status, RunStatus::Ok);
    assert_eq!(run.output.as_deref(), Some("{}"));
    assert_eq!(run.seed, SEED, "the seed round-trips bit for bit");
}

#[test]
fn a_log_another_handle_is_writing_opens_and_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.db");
    let rt = rt();
    let writer = SqliteRunLog::open(&path).unwrap();
    let f = rt
        .block_on(writer.begin(&begin("r", ExistingRun::Refuse)))
        .unwrap();
    rt.block_on(writer.commit_call("r".into(), f, &call(0), &[]))
        .unwrap();
    // The writer is still open: its changes sit in the WAL, not yet in the
    // database file's header.
    let reader = SqliteRunLog::open_existing(&path).unwrap();
    assert_eq!(
        rt.block_on(reader.load("r".into())).unwrap().calls,
        vec![call(0)]
    );
}

#[test]
fn an_existing_run_is_refused_unless_overwritten_and_the_old_recorder_is_fenced_off() {
    let dir = tempfile::tempdir().unwrap();
    let log = SqliteRunLog::open(&dir.path().join("log.db")).unwrap();
    rt().block_on(async {
        let first = log.begin(&begin("r", ExistingRun::Refuse)).await.unwrap();
        log.commit_call("r".into(), first, &call(0), &[])
            .await
            .unwrap();
        assert_eq!(
            log.begin(&begin("r", ExistingRun::Refuse)).await,
            Err(RunLogError::RunExists("r".into()))
        );
        assert_eq!(
            log.load("r".into()).await.unwrap().calls.len(),
            1,
            "the refused begin lost nothing"
        );
        let second = log
            .begin(&begin("r", ExistingRun::Overwrite))
            .await
            .unwrap();
        assert!(second > first);
        assert!(log.load("r".into()).await.unwrap().calls.is_empty());
        // The first recorder, still running, can no longer splice its calls in.
        assert_eq!(
            log.commit_call("r".into(), first, &call(1), &[]).await,
            Err(RunLogError::Fenced("r".into()))
        );
        assert_eq!(
            log.finish("r".into(), first, &[], RunStatus::Ok, "{}")
                .await,
            Err(RunLogError::Fenced("r".into()))
        );
        log.commit_call("r".into(), second, &call(0), &[])
            .await
            .unwrap();
        assert_eq!(log.load("r".into()).await.unwrap().calls, vec![call(0)]);
        assert_eq!(
            log.load("other".into()).await,
            Err(RunLogError::NoSuchRun("other".into()))
        );
    });
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
        Err(RunLogError::Foreign { .. } | RunLogError::Corrupt { .. })
    ));
    assert_eq!(std::fs::read(&corrupt).unwrap(), bytes);

    assert!(SqliteRunLog::open_existing(&dir.path().join("absent.db")).is_err());
    assert!(!dir.path().join("absent.db").exists());
}

#[test]
fn a_foreign_database_with_a_hot_journal_is_not_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.db");
    let conn = Connection::open(&live).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = DELETE; PRAGMA cache_size = 1; CREATE TABLE t (x);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
         INSERT INTO t SELECT randomblob(200) FROM n;
         BEGIN; UPDATE t SET x = randomblob(200);",
    )
    .unwrap();
    // What a crash mid-transaction leaves: the database with pages spilled
    // into it, and the hot journal that SQLite rolls back on the first read
    // of anyone who opens the file read-write.
    let db = dir.path().join("other.db");
    let journal = dir.path().join("other.db-journal");
    std::fs::copy(&live, &db).unwrap();
    std::fs::copy(dir.path().join("live.db-journal"), &journal).unwrap();
    conn.execute_batch("ROLLBACK").unwrap();
    let (db_before, journal_before) = (
        std::fs::read(&db).unwrap(),
        std::fs::read(&journal).unwrap(),
    );
    let err = SqliteRunLog::open(&db).unwrap_err();
    assert!(err.to_string().contains("another program"), "{err}");
    assert!(err.to_string().contains("left untouched"), "{err}");
    assert_eq!(
        std::fs::read(&db).unwrap(),
        db_before,
        "the database is as it was"
    );
    assert_eq!(
        std::fs::read(&journal).unwrap(),
        journal_before,
        "the hot journal is still there, as it was"
    );
}

#[test]
fn a_tampered_record_is_a_run_log_error_naming_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.db");
    let log = SqliteRunLog::open(&path).unwrap();
    let rt = rt();
    rt.block_on(async {
        let f = log.begin(&begin("r", ExistingRun::Refuse)).await.unwrap();
        log.commit_call("r".into(), f, &call(0), &[]).await.unwrap();
    });
    for (outcome, needle) in [
        (
            r#"{"result": {"attempts": {"count": 0, "usageComplete": true}}}"#,
            "outside 1..16",
        ),
        (
            r#"{"result": {"attempts": {"count": "2"}}}"#,
            "does not parse",
        ),
        (r#"{"neither": 1}"#, "does not parse"),
    ] {
        log.conn
            .lock()
            .unwrap()
            .execute("UPDATE calls SET outcome = ?1", [outcome])
            .unwrap();
        let err = rt.block_on(log.load("r".into())).unwrap_err();
        assert!(matches!(err, RunLogError::Corrupt { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains("call 0") && text.contains(needle), "{text}");
    }
}

#[test]
fn a_version_one_log_is_migrated_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA application_id = {APPLICATION_ID}; {} PRAGMA user_version = 1;
         INSERT INTO runs (run_id, node_id, status, output) VALUES ('old', 'n', 'ok', '{{}}');",
        MIGRATIONS[0]
    ))
    .unwrap();
    drop(conn);
    let log = SqliteRunLog::open(&path).unwrap();
    let rt = rt();
    assert_eq!(
        rt.block_on(log.load("old".into())).unwrap().status,
        RunStatus::Ok
    );
    assert_eq!(schema_version(&log), SCHEMA_VERSION);
    assert_eq!(
        rt.block_on(log.begin(&begin("old", ExistingRun::Overwrite)))
            .unwrap(),
        Fence(1)
    );
}

#[test]
fn hosts_opening_a_new_log_at_once_all_get_it_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.db");
    let opened: Vec<_> = (0..8)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || SqliteRunLog::open(&path))
        })
        .collect();
    let rt = rt();
    for (i, handle) in opened.into_iter().enumerate() {
        let log = handle.join().unwrap().expect("every opener gets the log");
        let id: &'static str = ["a", "b", "c", "d", "e", "f", "g", "h"][i];
        rt.block_on(log.begin(&begin(id, ExistingRun::Refuse)))
            .unwrap();
    }
    let log = SqliteRunLog::open(&path).unwrap();
    assert_eq!(schema_version(&log), SCHEMA_VERSION);
}
