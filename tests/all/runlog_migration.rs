//! A run log written before runs had owners (issue 31, item 4), in the
//! schema callai wrote then (SQLite v7, PostgreSQL v3, verbatim in
//! `tests/fixtures/runlog/`), opened by this build: it is migrated, every
//! run in it stays whole, a run a tenant started (its spec names the
//! tenant) is that tenant's and every other one the admin's, and budgets
//! work on the migrated tables. A database that is not a run log, or one a
//! newer callai wrote, is refused and left untouched.

use callai_engine::RunKey;
use callai_engine::budget::{Limits, ReserveRequest, Reserved, Spend, Window};
use callai_engine::runlog::RunLogError;
use callai_runlog_postgres::PostgresRunLog;
use callai_runlog_sqlite::SqliteRunLog;
use callai_tests::pg::PgCluster;
use std::time::Duration;

const SQLITE_V7: &str = include_str!("../fixtures/runlog/sqlite-v7.sql");
const POSTGRES_V3: &str = include_str!("../fixtures/runlog/postgres-v3.sql");

const REQUEST: &str = r#"{"messages":[{"content":"hi","role":"user"}]}"#;
const OUTCOME: &str = r#"{"result":{"content":"an old answer","attempts":{"count":2,"outputTokens":9,"usageComplete":true}}}"#;
const EVENT: &str = r#"{"type":"provider.usage","payload":{"provider":"mock","model":"mock-1","inputTokens":12,"outputTokens":9,"nodeId":"n","attempt":1,"reason":"first"}}"#;

/// The spec of a run a tenant started, as callai 0.1.0 kept it.
fn spec(tenant: Option<&str>) -> String {
    let tenant = tenant.map_or(String::new(), |t| format!(r#","tenant":"{t}""#));
    format!(r#"{{"pack":"echo-attempts","sha256":"00","input":"{{}}"{tenant}}}"#)
}

/// What the old rows hold: `bookai`'s run `r1` (its spec names it), the
/// admin's `r2` (a spec without a tenant) and `r3` (no spec: `callai run
/// --record`).
fn old_runs() -> [(&'static str, Option<String>); 3] {
    [
        ("r1", Some(spec(Some("bookai")))),
        ("r2", Some(spec(None))),
        ("r3", None),
    ]
}

async fn check_migrated(log: &dyn callai_engine::RunLog, name: &str) {
    let run = log.load(RunKey::new("bookai", "r1")).await.unwrap();
    assert_eq!(
        (run.tenant.as_str(), run.calls.len()),
        ("bookai", 1),
        "{name}"
    );
    assert_eq!(run.events.len(), 1, "{name}: its events came along");
    assert!(
        matches!(log.load("r1".into()).await, Err(RunLogError::NoSuchRun(_))),
        "{name}: bookai's run is not the admin's"
    );
    for id in ["r2", "r3"] {
        let run = log.load(id.into()).await.unwrap();
        assert_eq!(run.tenant, "admin", "{name} {id}");
        assert_eq!(run.calls.len(), 1, "{name} {id}");
    }
    // Ids are unique per owner now: the admin may have its own r1.
    let begin = callai_engine::runlog::BeginRun {
        run: "r1".into(),
        node_id: "n",
        seed: Default::default(),
        existing: Default::default(),
        spec: None,
        lease: None,
    };
    log.begin(&begin).await.unwrap();
    // The budget tables took their new columns.
    let ledger = log.ledger().unwrap();
    let one = Spend {
        requests: 1,
        ..Spend::default()
    };
    let request = ReserveRequest {
        tenant: "bookai",
        window: Window::Lifetime,
        limits: Limits {
            requests: Some(10),
            ..Limits::default()
        },
        need: one,
        calls: 4,
        owner: "test",
        ttl: Duration::from_secs(60),
    };
    let Reserved::Admitted { calls, .. } = ledger.reserve(&request).await.unwrap() else {
        panic!("{name}: fits");
    };
    assert_eq!(calls, 4, "{name}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sqlite_log_of_v7_is_migrated_and_its_tenants_runs_stay_theirs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        // The application id ("CAl0") and schema as 0.1.0 made them.
        conn.execute_batch("PRAGMA application_id = 1128361008;")
            .unwrap();
        conn.execute_batch(SQLITE_V7).unwrap();
        conn.execute_batch("PRAGMA user_version = 7;").unwrap();
        for (id, spec) in old_runs() {
            conn.execute(
                "INSERT INTO runs (run_id, node_id, status, output, spec, ended_ms)
                 VALUES (?1, 'n', 'ok', '{}', ?2, 1)",
                rusqlite::params![id, spec],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO calls (run_id, node_id, call_index, entry, request, outcome, events)
                 VALUES (?1, 'n', 0, 'json', ?2, ?3, '[]')",
                rusqlite::params![id, REQUEST, OUTCOME],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO events (run_id, seq, event, at_ms) VALUES (?1, 0, ?2, 5)",
                rusqlite::params![id, EVENT],
            )
            .unwrap();
        }
    }
    let log = SqliteRunLog::open(&path).unwrap();
    check_migrated(&log, "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_log_of_v3_is_migrated_and_its_tenants_runs_stay_theirs() {
    let Some(cluster) = PgCluster::shared() else {
        return; // PostgreSQL is not installed here: see pg.rs.
    };
    let url = cluster.database();
    let mut setup = POSTGRES_V3.to_owned();
    setup.push_str(
        "CREATE TABLE callai_schema (version BIGINT NOT NULL); INSERT INTO callai_schema VALUES (3);\n",
    );
    for (id, spec) in old_runs() {
        let spec = spec.map_or("NULL".to_owned(), |s| format!("'{s}'"));
        setup.push_str(&format!(
            "INSERT INTO callai_runs (run_id, node_id, status, output, fence, seed, clock_ms, spec, ended_at)
             VALUES ('{id}', 'n', 'ok', '{{}}', 1, 0, 0, {spec}, now());
             INSERT INTO callai_calls (run_id, call_index, node_id, entry, request, outcome, events)
             VALUES ('{id}', 0, 'n', 'json', '{REQUEST}', '{OUTCOME}', '[]');
             INSERT INTO callai_events (run_id, seq, event, at_ms) VALUES ('{id}', 0, '{EVENT}', 5);\n"
        ));
    }
    cluster.psql(&url, &setup);
    let log = PostgresRunLog::connect(&url).await.unwrap();
    check_migrated(&log, "postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_or_newer_postgres_database_is_refused_and_untouched() {
    let Some(cluster) = PgCluster::shared() else {
        return;
    };
    let foreign = cluster.database();
    cluster.psql(
        &foreign,
        "CREATE TABLE callai_runs (id INT); INSERT INTO callai_runs VALUES (7);",
    );
    let e = PostgresRunLog::connect(&foreign).await.unwrap_err();
    assert!(matches!(e, RunLogError::Foreign { .. }), "{e:?}");
    assert_eq!(
        cluster.psql(&foreign, "SELECT id FROM callai_runs").trim(),
        "7"
    );
    assert_eq!(
        cluster
            .psql(&foreign, "SELECT to_regclass('callai_schema') IS NULL")
            .trim(),
        "t"
    );

    let newer = cluster.database();
    PostgresRunLog::connect(&newer).await.unwrap();
    cluster.psql(&newer, "UPDATE callai_schema SET version = 999");
    let e = PostgresRunLog::connect(&newer).await.unwrap_err();
    assert!(matches!(e, RunLogError::Newer { found: 999, .. }), "{e:?}");
    assert!(e.to_string().contains("upgrade callai"), "{e}");

    // Several hosts starting on an empty database at once migrate it once.
    let fresh = cluster.database();
    let mut starts = Vec::new();
    for _ in 0..4 {
        let url = fresh.clone();
        starts.push(tokio::spawn(async move {
            PostgresRunLog::connect(&url).await.map(|_| ())
        }));
    }
    for s in starts {
        s.await.unwrap().unwrap();
    }
    assert_eq!(
        cluster
            .psql(&fresh, "SELECT version FROM callai_schema")
            .trim(),
        PostgresRunLog::schema_version().to_string()
    );
    let bad = PostgresRunLog::connect("postgres://postgres@127.0.0.1:1/x")
        .await
        .unwrap_err();
    assert!(bad.to_string().contains("cannot connect"), "{bad}");
}
