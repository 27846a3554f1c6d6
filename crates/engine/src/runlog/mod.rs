//! The durable run log: per run, every event in order and each ctx.callAI
//! call's recorded outcome, so that a replay serves the same results —
//! `attempts` included (RFC 0248 §A.5) — without any provider request.
//!
//! [`RunLog`] is the storage seam: `callai-runlog-sqlite` is the built-in
//! one, `callai-runlog-postgres` the one several hosts share, and a host can
//! put the same records in its own database.

pub mod decode;

use crate::events::Event;
use crate::provider::BoxFuture;
use callai_wire::{CallError, CallResult, MAX_ATTEMPTS};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The owner of what an embedder or `callai run` records, and of what
/// `callai serve`'s admin (the `[server] tokenEnv` token, or every caller
/// of a server without tokens) makes.
pub const ADMIN: &str = "admin";

/// A run's name in a log: the tenant that owns it and its id. Run ids are
/// unique per owner: two tenants may both have `order-1001`, and one never
/// reaches the other's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RunKey<'a> {
    /// The tenant whose run it is ([`ADMIN`] for an embedder's own).
    pub tenant: &'a str,
    /// The run id, unique among the tenant's runs.
    pub run_id: &'a str,
}

impl<'a> RunKey<'a> {
    /// Run `run_id` of `tenant`.
    pub fn new(tenant: &'a str, run_id: &'a str) -> Self {
        Self { tenant, run_id }
    }

    /// The admin's run `run_id`: what a log without tenants holds.
    pub fn admin(run_id: &'a str) -> Self {
        Self::new(ADMIN, run_id)
    }
}

/// A bare run id is the admin's run of that id.
impl<'a> From<&'a str> for RunKey<'a> {
    fn from(run_id: &'a str) -> Self {
        Self::admin(run_id)
    }
}

/// A bare run id is the admin's run of that id.
impl<'a> From<&'a String> for RunKey<'a> {
    fn from(run_id: &'a String) -> Self {
        Self::admin(run_id)
    }
}

impl std::fmt::Display for RunKey<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.tenant {
            ADMIN => write!(f, "{:?}", self.run_id),
            tenant => write!(f, "{:?} of tenant {tenant:?}", self.run_id),
        }
    }
}

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

    /// The entry of a stored `typed` / `json`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "typed" => Some(Self::Typed),
            "json" => Some(Self::Json),
            _ => None,
        }
    }
}

/// What a recorded call returned to the pack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum Outcome {
    /// `{"result": ...}`
    Result(CallResult),
    /// `{"error": ...}`
    Error(CallError),
}

impl Outcome {
    /// The outcome of a call.
    pub fn of(outcome: &Result<CallResult, CallError>) -> Self {
        match outcome {
            Ok(r) => Self::Result(r.clone()),
            Err(e) => Self::Error(e.clone()),
        }
    }

    /// Back to what the call returns.
    pub fn into_result(self) -> Result<CallResult, CallError> {
        match self {
            Self::Result(r) => Ok(r),
            Self::Error(e) => Err(e),
        }
    }

    /// What a well-formed outcome must satisfy: an `attempts.count` of
    /// 1..=16 (a host never reports a call that made no request, or more
    /// than the spec allows). `Err` says what is wrong.
    pub fn check(&self) -> Result<(), String> {
        let count = match self {
            Self::Result(r) => r.attempts.map(|a| a.count),
            Self::Error(e) => e.total_attempts(),
        };
        match count {
            Some(n) if !(1..=MAX_ATTEMPTS).contains(&n) => {
                Err(format!("attempts count {n} is outside 1..{MAX_ATTEMPTS}"))
            }
            _ => Ok(()),
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
    /// The request, as its canonical JSON: replay compares parsed JSON, so
    /// a request with its keys in another order is the same request.
    pub request: Value,
    /// What the pack received.
    pub outcome: Outcome,
    /// The events the call emitted, in order.
    pub events: Vec<Event>,
}

/// How a recorded run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Still running, or killed before it finished.
    Running,
    /// The node returned `Ok`.
    Ok,
    /// The node failed or trapped.
    Failed,
}

impl RunStatus {
    /// `running`, `ok` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Ok => "ok",
            Self::Failed => "failed",
        }
    }

    /// The status of a stored `running` / `ok` / `failed`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "running" => Some(Self::Running),
            "ok" => Some(Self::Ok),
            "failed" => Some(Self::Failed),
            _ => None,
        }
    }
}

/// What makes a run's sandbox deterministic: the seed of its random
/// source and where its wall clock starts. Recorded with the run, so that a
/// replay gives the pack the same values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunSeed {
    /// Seeds the pack's `wasi:random` sources.
    pub seed: u64,
    /// The pack's wall clock at the run's start, in ms since the Unix epoch.
    pub clock_ms: u64,
}

impl RunSeed {
    /// A fresh seed from the operating system's random source, and now.
    pub fn fresh() -> Self {
        use rand::TryRng;
        let seed = rand::rngs::SysRng
            .try_next_u64()
            .expect("the operating system's random source answers");
        let clock_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Self { seed, clock_ms }
    }
}

/// A run as the log holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRun {
    /// The tenant that owns it ([`ADMIN`] for an embedder's own).
    pub tenant: String,
    /// The run id.
    pub run_id: String,
    /// The node it ran.
    pub node_id: String,
    /// Its sandbox's seed and clock.
    pub seed: RunSeed,
    /// How it ended.
    pub status: RunStatus,
    /// The node's output or error text, once finished.
    pub output: Option<String>,
    /// Its calls, by index.
    pub calls: Vec<RecordedCall>,
    /// Every event, in order.
    pub events: Vec<Event>,
    /// When each event was committed, in ms since the Unix epoch (0 when
    /// the log did not keep it).
    pub event_times: Vec<u64>,
    /// What the run was started with, when the recorder kept it.
    pub spec: Option<RunSpec>,
    /// Whether the run is durable: leased, and taken over when its host
    /// stops renewing the lease.
    pub durable: bool,
}

/// What a run was started with, kept beside it so that another process
/// can resume it: the pack (by name and content hash), the node's input,
/// and the mock script when there was one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunSpec {
    /// The pack's name (a bundled example, a file, an upload).
    pub pack: String,
    /// SHA-256 of the component, hex.
    pub sha256: String,
    /// The node's input text.
    pub input: String,
    /// The mock script (JSON text) the run was given, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// The tenant that started the run, as logs written before runs had
    /// owners kept it (read when such a log is migrated; the run's own
    /// [`RecordedRun::tenant`] is what counts, and this is no longer
    /// written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

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
    /// the Unix epoch), with its calls and events, and every schema no call
    /// names any more. A run still running is never deleted.
    fn prune(&self, before_ms: u64) -> BoxFuture<'_, Result<Pruned, RunLogError>>;

    /// The budgets and idempotency keys kept in the same database, when
    /// this log keeps them.
    fn ledger(&self) -> Option<&dyn crate::budget::Ledger> {
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
