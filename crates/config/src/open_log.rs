//! The run log a `RUNLOG` argument or `[runlog] url` names: a
//! `postgres://` URL, or an SQLite file path.

use crate::RunLogConfig;
use callai_engine::{RunLog, RunLogError};
use callai_runlog_sqlite::SqliteRunLog;
use std::path::Path;
use std::sync::Arc;

/// What opening an SQLite run log that is not there does (a PostgreSQL
/// database is always there, and is migrated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenLog {
    /// Create the file (`--record`, `serve`).
    CreateIfMissing,
    /// Refuse: the file must hold a run log already (`--replay`, `--resume`).
    Existing,
}

/// Opens the run log `url` names, bounded as `config` says (its
/// `maxRunBytes`).
pub async fn open_runlog(
    url: &str,
    open: OpenLog,
    config: &RunLogConfig,
) -> Result<Arc<dyn RunLog>, RunLogError> {
    let limit = config.max_run_bytes;
    if callai_runlog_postgres::is_postgres_url(url) {
        let log = callai_runlog_postgres::PostgresRunLog::connect(url).await?;
        return Ok(Arc::new(log.with_max_run_bytes(limit)));
    }
    let path = Path::new(url).to_owned();
    let log = tokio::task::spawn_blocking(move || {
        match open {
            OpenLog::Existing => SqliteRunLog::open_existing(&path),
            OpenLog::CreateIfMissing => SqliteRunLog::open(&path),
        }
        .map(|log| log.with_max_run_bytes(limit))
    })
    .await
    .map_err(|e| RunLogError::Storage(format!("the run log's opening task failed: {e}")))??;
    Ok(Arc::new(log))
}
