//! What a run log holds: a run's name (its tenant and id), how it was
//! started, each call as recorded (its entry, request key, outcome and
//! events), and how the run stands.

use crate::events::Event;
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

/// A fresh 64-bit number for a name nobody chose (an answer's id): from a
/// generator each thread seeds once from the operating system, so that an
/// id costs no system call. Not a run's seed, which is drawn from the
/// operating system itself.
pub fn fresh_id() -> u64 {
    use rand::{Rng, SeedableRng};
    thread_local! {
        static IDS: std::cell::RefCell<rand::rngs::StdRng> = std::cell::RefCell::new(
            rand::rngs::StdRng::try_from_rng(&mut rand::rngs::SysRng)
                .expect("the operating system's random source answers"),
        );
    }
    IDS.with(|ids| ids.borrow_mut().next_u64())
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
