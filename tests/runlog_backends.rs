//! The run-log backends the suites run on, each empty: an SQLite file, and
//! (where PostgreSQL is installed) a database of the throwaway cluster;
//! with ways to reach under the `RunLog` trait (tamper with a row, read a
//! run's status) for the tests of corruption and growth.

use crate::pg::PgCluster;
use callai_engine::RunLog;
use callai_runlog_postgres::PostgresRunLog;
use callai_runlog_sqlite::SqliteRunLog;
use std::sync::Arc;

/// One backend.
#[derive(Debug)]
pub enum Backend {
    /// A file in a folder of its own.
    Sqlite(tempfile::TempDir),
    /// A database of its own on the shared throwaway cluster.
    Postgres(Arc<PgCluster>, String),
}

impl Backend {
    /// Both backends (PostgreSQL only where it is installed; see `pg.rs`).
    pub fn all() -> Vec<Self> {
        let mut all = vec![Self::Sqlite(tempfile::tempdir().unwrap())];
        if let Some(cluster) = PgCluster::shared() {
            let url = cluster.database();
            all.push(Self::Postgres(cluster, url));
        }
        all
    }

    /// Its name in messages.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Sqlite(_) => "sqlite",
            Self::Postgres(..) => "postgres",
        }
    }

    /// A handle on it.
    pub async fn open(&self) -> Arc<dyn RunLog> {
        match self {
            Self::Sqlite(dir) => Arc::new(SqliteRunLog::open(&dir.path().join("runs.db")).unwrap()),
            Self::Postgres(_, url) => Arc::new(PostgresRunLog::connect(url).await.unwrap()),
        }
    }

    /// A handle that refuses a call past `limit` bytes recorded per run.
    pub async fn open_with_max_run_bytes(&self, limit: u64) -> Arc<dyn RunLog> {
        match self {
            Self::Sqlite(dir) => Arc::new(
                SqliteRunLog::open(&dir.path().join("runs.db"))
                    .unwrap()
                    .with_max_run_bytes(limit),
            ),
            Self::Postgres(_, url) => Arc::new(
                PostgresRunLog::connect(url)
                    .await
                    .unwrap()
                    .with_max_run_bytes(limit),
            ),
        }
    }

    /// The one number `sql` selects (tables named as in SQLite; `callai_`
    /// is put before `runs`, `calls`, `events`, the budget, the call trace
    /// and the usage tables on PostgreSQL, and
    /// `schemas` is its `callai_response_schemas`).
    pub fn number(&self, sql: &str) -> i64 {
        match self {
            Self::Sqlite(dir) => {
                let conn = rusqlite::Connection::open(dir.path().join("runs.db")).unwrap();
                conn.query_row(sql, [], |r| r.get(0)).unwrap()
            }
            Self::Postgres(cluster, url) => {
                let sql = sql
                    .replace(" schemas", " callai_response_schemas")
                    .replace(" runs", " callai_runs")
                    .replace(" calls", " callai_calls")
                    .replace(" events", " callai_events")
                    .replace(" budget_", " callai_budget_")
                    .replace(" call_trace", " callai_call_trace")
                    .replace(" usage_", " callai_usage_");
                cluster.psql(url, &sql).trim().parse().unwrap()
            }
        }
    }

    /// Runs `sql` (tables named as in SQLite; `callai_` is put before the
    /// budget and call trace tables on PostgreSQL).
    pub fn execute(&self, sql: &str) {
        match self {
            Self::Sqlite(dir) => {
                let conn = rusqlite::Connection::open(dir.path().join("runs.db")).unwrap();
                conn.execute_batch(sql).unwrap();
            }
            Self::Postgres(cluster, url) => {
                let sql = sql
                    .replace(" budget_", " callai_budget_")
                    .replace(" call_trace", " callai_call_trace");
                cluster.psql(url, &sql);
            }
        }
    }

    /// Overwrites call `index` of `run_id`'s stored outcome with `text`.
    pub fn tamper(&self, run_id: &str, index: u32, text: &str) {
        match self {
            Self::Sqlite(dir) => {
                let conn = rusqlite::Connection::open(dir.path().join("runs.db")).unwrap();
                conn.execute(
                    "UPDATE calls SET outcome = ?1 WHERE run_id = ?2 AND call_index = ?3",
                    (text, run_id, index),
                )
                .unwrap();
            }
            Self::Postgres(cluster, url) => {
                cluster.psql(
                    url,
                    &format!(
                        "UPDATE callai_calls SET outcome = '{text}' WHERE run_id = '{run_id}' AND call_index = {index}"
                    ),
                );
            }
        }
    }
}

impl Backend {
    /// A run's status and output, read from the database itself.
    pub fn status(&self, run_id: &str) -> (String, String) {
        match self {
            Self::Sqlite(dir) => {
                let conn = rusqlite::Connection::open(dir.path().join("runs.db")).unwrap();
                conn.query_row(
                    "SELECT status, COALESCE(output, '') FROM runs WHERE run_id = ?1",
                    [run_id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap()
            }
            Self::Postgres(cluster, url) => {
                let out = cluster.psql(
                    url,
                    &format!(
                        "SELECT status || '|' || COALESCE(output, '') FROM callai_runs WHERE run_id = '{run_id}'"
                    ),
                );
                let (status, output) = out.trim().split_once('|').unwrap();
                (status.to_owned(), output.to_owned())
            }
        }
    }
}

/// Both backends as a `serve` config names them: an SQLite file in `dir`,
/// and (where PostgreSQL is installed) a fresh database of the throwaway
/// cluster, with the cluster, kept alive while a handle on it is.
pub fn urls(dir: &std::path::Path) -> Vec<(&'static str, String, Option<Arc<PgCluster>>)> {
    let file = dir.join("runs.db");
    let mut all = vec![("sqlite", file.to_str().unwrap().to_owned(), None)];
    if let Some(cluster) = PgCluster::shared() {
        all.push(("postgres", cluster.database(), Some(cluster)));
    }
    all
}
