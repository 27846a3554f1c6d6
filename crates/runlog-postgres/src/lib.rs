//! The callAI run log on PostgreSQL.
//!
//! Every run-log feature of the SQLite log, on a database several hosts
//! share: one transaction per call, the recorder's fence checked under a
//! row lock in the same transaction, durable runs leased in the server's
//! clock and taken over with `FOR UPDATE SKIP LOCKED` once a lease lapses.
//! The schema is migrated at connect time (versioned, under an advisory
//! lock); a database holding someone else's `callai_runs`, or a newer
//! schema, is refused and left alone.
//!
//! ```no_run
//! use callai_engine::{Journal, Recording};
//! use callai_runlog_postgres::PostgresRunLog;
//! use std::sync::Arc;
//!
//! # async fn demo() -> Result<(), callai_engine::RunLogError> {
//! let log = PostgresRunLog::connect("postgres://callai@127.0.0.1:5432/callai").await?;
//! let journal = Journal::record(Arc::new(log), "run-1", "my.node", Recording::default()).await?;
//! # let _ = journal;
//! # Ok(())
//! # }
//! ```
//!
//! Connections are plain TCP (`sslmode=disable`): put the database on a
//! private network or a local socket; a URL asking for TLS is refused.

#![warn(missing_docs)]

mod api_keys;
mod growth;
mod keys;
mod ledger;
mod pool;
mod responses;
mod schema;
mod store;
mod takeover;
mod traces;

use callai_engine::RunLogError;
use pool::Pool;
use std::sync::Arc;
use tokio_postgres::config::SslMode;

/// A run log in a PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PostgresRunLog {
    pool: Pool,
    /// The URL without its password, for messages.
    shown: Arc<str>,
    max_run_bytes: Option<u64>,
}

/// Whether `url` names a PostgreSQL run log.
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// `url` with any password replaced by `***`.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (auth, host) = match rest.rsplit_once('@') {
        Some(parts) => parts,
        None => return url.to_owned(),
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

impl PostgresRunLog {
    /// Connects to the database of `url` (`postgres://user@host:port/db`),
    /// checks it is a callai run log (or empty), and migrates its schema.
    pub async fn connect(url: &str) -> Result<Self, RunLogError> {
        let shown: Arc<str> = redact_url(url).into();
        let config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| RunLogError::Storage(format!("{shown} is not a PostgreSQL URL: {e}")))?;
        if config.get_ssl_mode() == SslMode::Require {
            return Err(RunLogError::Storage(format!(
                "{shown}: TLS to PostgreSQL is not supported by this build; use sslmode=disable on a private network"
            )));
        }
        let pool = pool::new(config);
        let mut conn = pool
            .get()
            .await
            .map(pool::Conn)
            .map_err(|e| RunLogError::Storage(format!("cannot connect to {shown}: {e}")))?;
        schema::migrate(&mut conn, &shown).await?;
        drop(conn);
        Ok(Self {
            pool,
            shown,
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

    /// The URL, without its password.
    pub fn url(&self) -> &str {
        &self.shown
    }

    /// The schema version this build writes.
    pub fn schema_version() -> i64 {
        schema::VERSION
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_a_message() {
        assert_eq!(
            redact_url("postgres://u:s3cret@127.0.0.1:5432/db"),
            "postgres://u:***@127.0.0.1:5432/db"
        );
        assert_eq!(
            redact_url("postgres://u@127.0.0.1/db"),
            "postgres://u@127.0.0.1/db"
        );
        assert!(is_postgres_url("postgresql://x/y") && !is_postgres_url("/tmp/runs.db"));
    }
}
