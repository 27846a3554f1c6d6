//! What the API answers, as typed bodies: a run's status, its events, a
//! call's result. Each serialises to the design's JSON (camelCase), a field
//! left out when it has nothing to say.

use callai_engine::events::Event;
use callai_engine::wire::CallResult;
use serde::Serialize;
use serde_json::Value;

/// A run's or a host's attempts, summed over its calls: RFC 0248's record
/// without `structuredOutput` (a run's calls may differ in it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptsTotal {
    /// Provider requests.
    pub count: u64,
    /// Output tokens summed over the requests that reported them; absent
    /// when none did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Whether every request reported its usage.
    pub usage_complete: bool,
}

/// Where a run stands, as `status` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StatusWord {
    /// Queued or going on.
    Running,
    /// The node returned `Ok`.
    Ok,
    /// It failed.
    Failed,
}

/// `POST /v1/runs` and `GET /v1/runs/{runId}`: `{"runId", "status",
/// "calls", "attempts", "output"?, "error"?, "events"?}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunAnswer {
    /// The run id.
    pub run_id: String,
    /// Where it stands.
    pub status: StatusWord,
    /// Its ctx.callAI calls so far.
    pub calls: u32,
    /// Its provider requests, summed.
    pub attempts: AttemptsTotal,
    /// The node's output (JSON, or the text as a string), once `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// `{"kind", "message", ...}`, once `failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    /// Every event of the run, when the caller asked (`"events": true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<Event>>,
}

/// `202` to `"wait": false`: `{"runId", "status": "running"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Accepted {
    /// The run id to poll.
    pub run_id: String,
    /// Always `running`.
    pub status: StatusWord,
}

/// One event in openwop's run-event envelope.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunEvent {
    /// From 1, in order.
    pub sequence: u64,
    /// The event's name and payload (`{"type", "payload"}`), serialised.
    #[serde(flatten)]
    pub event: Value,
    /// The node its payload names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<Value>,
    /// When it happened: RFC 3339, UTC, milliseconds.
    pub timestamp: String,
}

/// `GET /v1/runs/{runId}/events`: `{"events", "isComplete"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventsAnswer {
    /// The run's events so far.
    pub events: Vec<RunEvent>,
    /// Whether the run has ended (no event will follow).
    pub is_complete: bool,
}

/// `POST /v1/call`: `{"result", "events"?}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallAnswer {
    /// The wire result, `attempts` included.
    pub result: CallResult,
    /// The call's events, when the caller asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<Event>>,
    /// What it cost, when a price is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<crate::calls::Cost>,
}

/// `GET /healthz`: `{"status": "ok"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Health {
    /// Always `ok` while the server answers.
    pub status: &'static str,
}
