//! The durable run log: per run, every event in order and each ctx.callAI
//! call's recorded outcome, so that a replay serves the same results —
//! `attempts` included (RFC 0248 §A.5) — without any provider request.
//!
//! [`RunLog`] is the storage seam: [`SqliteRunLog`] is the built-in one, and a
//! host can put the same records in its own database.

mod journal;
mod sqlite;

pub use journal::{Journal, Replayed};
pub use sqlite::SqliteRunLog;

use crate::events::Event;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which entry a call came through; part of its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Entry {
    /// `call-ai` (typed).
    Typed,
    /// `call-ai-json`.
    Json,
}

impl Entry {
    /// `typed` or `json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Typed => "typed",
            Self::Json => "json",
        }
    }
}

/// One recorded ctx.callAI call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedCall {
    /// The node that made it.
    pub node_id: String,
    /// Its position among the run's calls (0-based).
    pub index: u32,
    /// The entry it came through.
    pub entry: Entry,
    /// The request exactly as the pack sent it (the JSON entry's text; the
    /// typed entry's canonical form).
    pub request: String,
    /// `{"result": ...}` or `{"error": ...}`: the wire JSON the pack received.
    pub outcome: Value,
    /// The events the call emitted, in order.
    pub events: Vec<Event>,
}

/// How a recorded run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Still running, or killed before it finished.
    Running,
    /// The node returned `Ok`.
    Ok,
    /// The node failed or trapped.
    Failed,
}

/// A run as the log holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRun {
    /// The run id.
    pub run_id: String,
    /// The node it ran.
    pub node_id: String,
    /// How it ended.
    pub status: RunStatus,
    /// The node's output or error text, once finished.
    pub output: Option<String>,
    /// Its calls, by index.
    pub calls: Vec<RecordedCall>,
    /// Every event, in order.
    pub events: Vec<Event>,
}

/// A run log that cannot be used. Never a panic, never an overwrite.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunLogError {
    /// The file is not a run log (not SQLite, or another program's database).
    #[error("{path} is not a callai run log: {reason}; it was left untouched")]
    Foreign {
        /// The path given.
        path: String,
        /// What was found.
        reason: String,
    },
    /// The file is a damaged database.
    #[error("run log {path} is corrupt: {reason}; it was left untouched")]
    Corrupt {
        /// The path given.
        path: String,
        /// What SQLite said.
        reason: String,
    },
    /// Recording into a run id that already exists.
    #[error(
        "run {0:?} is already recorded in this log; choose another run id or ask to overwrite it"
    )]
    RunExists(String),
    /// Replaying a run id the log does not hold.
    #[error("run {0:?} is not in this log")]
    NoSuchRun(String),
    /// Any other storage failure.
    #[error("run log: {0}")]
    Storage(String),
}

/// Where recorded runs live.
pub trait RunLog: Send + Sync {
    /// Starts recording `run_id`. An existing run with that id is an error
    /// unless `overwrite`, which replaces it.
    fn begin(&self, run_id: &str, node_id: &str, overwrite: bool) -> Result<(), RunLogError>;

    /// Commits one call and the events emitted since the previous commit, in
    /// one transaction: after a crash, a call is either wholly there or absent.
    fn commit_call(
        &self,
        run_id: &str,
        call: &RecordedCall,
        events: &[Event],
    ) -> Result<(), RunLogError>;

    /// Ends the run with its remaining events and its output.
    fn finish(
        &self,
        run_id: &str,
        events: &[Event],
        status: RunStatus,
        output: &str,
    ) -> Result<(), RunLogError>;

    /// Loads a run for replay.
    fn load(&self, run_id: &str) -> Result<RecordedRun, RunLogError>;
}
