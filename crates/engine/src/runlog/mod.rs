//! The durable run log: per run, every event in order and each ctx.callAI
//! call's recorded outcome, so that a replay serves the same results —
//! `attempts` included (RFC 0248 §A.5) — without any provider request.
//!
//! [`RunLog`] is the storage seam: `callai-runlog-sqlite` is the built-in
//! one, `callai-runlog-postgres` the one several hosts share, and a host can
//! put the same records in its own database.

mod api_keys;
pub mod decode;
mod records;
mod responses;
mod traces;
mod usage;

pub use api_keys::{ApiKey, ApiKeyEvent, ApiKeyLog};
pub use records::{
    ADMIN, Entry, Outcome, RecordedCall, RecordedRun, RunKey, RunSeed, RunSpec, RunStatus, fresh_id,
};
pub use responses::{ResponseLog, StoredResponse};
pub use traces::{
    KEPT_ORDER_SLACK_MS, SinceFloor, SqlParam, TraceLog, TracePage, TraceQuery, TraceRow, TraceTag,
};
pub use usage::{
    CallsSum, MINUTE_MS, MinuteRequests, MinuteSpend, MinuteSums, TraceCost, TraceUsage,
    UsageBatch, minute_of,
};

use crate::events::Event;
use crate::provider::BoxFuture;

/// A lease on a durable run: its holder renews it; when it lapses, another
/// host may take the run over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease<'a> {
    /// Who holds it (a host id, for people reading the log).
    pub owner: &'a str,
    /// How long it lasts from each renewal.
    pub duration: std::time::Duration,
}

/// What recording into a run id the log already holds does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ExistingRun {
    /// Refuse it with [`RunLogError::RunExists`] (the default).
    #[default]
    Refuse,
    /// Replace the recorded run; its recorder is fenced off.
    Overwrite,
}

/// How a recording begins.
#[derive(Debug, Clone, Copy)]
pub struct BeginRun<'a> {
    /// The run: its owner and id.
    pub run: RunKey<'a>,
    /// The node it runs.
    pub node_id: &'a str,
    /// Its sandbox's seed and clock.
    pub seed: RunSeed,
    /// What a run already recorded under `run_id` means.
    pub existing: ExistingRun,
    /// What it was started with, for a later resume.
    pub spec: Option<&'a RunSpec>,
    /// A durable run's lease.
    pub lease: Option<Lease<'a>>,
}

/// The token a recording holds on its run: every commit carries it, and a
/// log refuses a commit whose fence is no longer the run's (the run was
/// overwritten or taken over by another recorder).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fence(pub i64);

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
    /// The log, or a record in it, is damaged.
    #[error("run log {path} is corrupt: {reason}; it was left untouched")]
    Corrupt {
        /// The path given.
        path: String,
        /// What is wrong.
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
    /// Another recorder took the run over (overwrote or resumed it): this
    /// one may no longer commit to it.
    #[error("run {0:?} was taken over by another recorder; this recording stopped")]
    Fenced(String),
    /// Resuming a run that already ended.
    #[error("run {0:?} has finished ({1}); only a run that stopped before its end can be resumed")]
    Finished(String, &'static str),
    /// The log was written by a newer callai than this one.
    #[error(
        "{path} has run-log schema version {found}; this callai knows up to {known}: upgrade callai"
    )]
    Newer {
        /// The path or URL given.
        path: String,
        /// The version found.
        found: i64,
        /// The newest this build knows.
        known: i64,
    },
    /// A run would record more than the log takes of one run.
    #[error(
        "run {run_id:?} would record more than runlog.maxRunBytes ({limit} bytes); the call was not committed"
    )]
    RunTooLarge {
        /// The run.
        run_id: String,
        /// The limit, in bytes.
        limit: u64,
    },
    /// Any other storage failure.
    #[error("run log: {0}")]
    Storage(String),
}

/// Where recorded runs live. Every method is async, so that a log backed by
/// a file or a database server never blocks an async worker.
pub trait RunLog: Send + Sync {
    /// Starts recording `run.run` with its sandbox's seed. An existing
    /// run of that owner and id is an error unless `run.existing` is
    /// [`ExistingRun::Overwrite`], which replaces
    /// it and fences off any recorder still writing the old one. With a
    /// lease the run is durable.
    fn begin<'a>(&'a self, run: &'a BeginRun<'a>) -> BoxFuture<'a, Result<Fence, RunLogError>>;

    /// Commits one call and the events emitted since the previous commit, in
    /// one transaction: after a crash, a call is either wholly there or
    /// absent. Refused with [`RunLogError::Fenced`] when `fence` is stale.
    fn commit_call<'a>(
        &'a self,
        run: RunKey<'a>,
        fence: Fence,
        call: &'a RecordedCall,
        events: &'a [Event],
    ) -> BoxFuture<'a, Result<(), RunLogError>>;

    /// Ends the run with its remaining events and its output.
    fn finish<'a>(
        &'a self,
        run: RunKey<'a>,
        fence: Fence,
        events: &'a [Event],
        status: RunStatus,
        output: &'a str,
    ) -> BoxFuture<'a, Result<(), RunLogError>>;

    /// Loads a run for replay; every record is checked on the way in.
    fn load<'a>(&'a self, run: RunKey<'a>) -> BoxFuture<'a, Result<RecordedRun, RunLogError>>;

    /// Loads a run to show it (its status, its calls), as far as its
    /// records read back: a damaged call ends it, named in the answer's
    /// `damage`, where [`RunLog::load`] refuses the whole run. By default,
    /// what `load` gives, or its refusal.
    fn inspect<'a>(
        &'a self,
        run: RunKey<'a>,
    ) -> BoxFuture<'a, Result<decode::Inspected, RunLogError>> {
        Box::pin(async move {
            let run = self.load(run).await?;
            Ok(decode::Inspected { run, damage: None })
        })
    }

    /// Takes over a run that stopped before its end, to go on recording it:
    /// a new fence (any recorder still writing it is fenced off), a new
    /// lease when `lease` is given, and the run as far as it was committed.
    /// A finished run is refused with [`RunLogError::Finished`].
    fn resume<'a>(
        &'a self,
        run: RunKey<'a>,
        lease: Option<Lease<'a>>,
    ) -> BoxFuture<'a, Result<(Fence, RecordedRun), RunLogError>>;

    /// Extends a durable run's lease by `duration` from now; refused with
    /// [`RunLogError::Fenced`] when another host has taken the run over.
    fn renew<'a>(
        &'a self,
        run: RunKey<'a>,
        fence: Fence,
        duration: std::time::Duration,
    ) -> BoxFuture<'a, Result<(), RunLogError>>;

    /// Lets a durable run's lease lapse now, for another host to take the
    /// run over at once (a host shutting down).
    fn release<'a>(
        &'a self,
        run: RunKey<'a>,
        fence: Fence,
    ) -> BoxFuture<'a, Result<(), RunLogError>>;

    /// Takes over one durable run whose lease has lapsed, if there is one,
    /// of any owner (the run it returns says whose): as [`RunLog::resume`]
    /// does, under a new lease held by `lease.owner`.
    /// Several hosts may call this at once; each run goes to one of them.
    fn claim<'a>(
        &'a self,
        lease: Lease<'a>,
    ) -> BoxFuture<'a, Result<Option<(Fence, RecordedRun)>, RunLogError>>;

    /// Keeps a component's bytes under their SHA-256 (hex), so that a host
    /// taking a durable run over can run its pack.
    fn put_pack<'a>(
        &'a self,
        sha256: &'a str,
        bytes: &'a [u8],
    ) -> BoxFuture<'a, Result<(), RunLogError>>;

    /// The component kept under `sha256`, if any.
    fn get_pack<'a>(
        &'a self,
        sha256: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, RunLogError>>;

    /// Deletes every finished run that ended before `before_ms` (ms since
    /// the Unix epoch), with its calls and events, every schema no call
    /// names any more, the call traces that ended before it and the
    /// responses kept before it. A run still running is never deleted.
    fn prune(&self, before_ms: u64) -> BoxFuture<'_, Result<Pruned, RunLogError>>;

    /// The budgets and idempotency keys kept in the same database, when
    /// this log keeps them.
    fn ledger(&self) -> Option<&dyn crate::budget::Ledger> {
        None
    }

    /// The call traces kept in the same database, when this log keeps them.
    fn traces(&self) -> Option<&dyn TraceLog> {
        None
    }

    /// The responses kept in the same database (the Responses API's
    /// `store`), when this log keeps them.
    fn responses(&self) -> Option<&dyn ResponseLog> {
        None
    }

    /// The API keys kept in the same database, when this log keeps them.
    fn api_keys(&self) -> Option<&dyn ApiKeyLog> {
        None
    }
}

/// What [`RunLog::prune`] deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Finished runs, with their calls and events.
    pub runs: u64,
    /// Schemas no call named any more.
    pub schemas: u64,
    /// Call traces.
    pub traces: u64,
    /// Kept responses.
    pub responses: u64,
}

/// The output a run log gives a lapsed durable run it cannot resume because
/// its records do not read back (`RunLogError::Corrupt`): the run is failed
/// with this once, so that takeovers of other runs go on.
pub fn unresumable_output(reason: &str) -> String {
    serde_json::json!({"error": {
        "kind": "takeover",
        "message": format!("the run cannot be resumed: its records in the run log do not read back: {reason}"),
    }})
    .to_string()
}

impl std::fmt::Debug for dyn RunLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunLog")
    }
}
