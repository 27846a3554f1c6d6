//! What is said of a run: its status (`POST /v1/runs`,
//! `GET /v1/runs/{runId}`), its events in openwop's envelope, and the
//! attempts summed over its calls; typed, each serialising to the design's
//! JSON (camelCase), a field left out when it has nothing to say.

use crate::ids::rfc3339;
use callai_engine::RunError;
use callai_engine::events::Event;
use callai_engine::runlog::decode::Inspected;
use callai_engine::runlog::{RecordedRun, RunStatus};
use serde::Serialize;
use serde_json::{Value, json};

/// Where a run stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Waiting for a slot, or running.
    Running,
    /// The node returned `Ok` with this output.
    Ok(Value),
    /// The run failed with this error (`{"kind", "message", ...}`).
    Failed(Value),
}

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

/// What a run's status JSON says, summed over its calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Provider requests.
    pub count: u64,
    /// Output tokens summed over the requests that reported them.
    pub output_tokens: u64,
    /// Requests that reported output tokens.
    pub reported: u64,
}

impl Tally {
    /// Adds up the `provider.usage` events: one per provider request.
    pub fn of<'a>(events: impl IntoIterator<Item = &'a Event>) -> Self {
        let mut t = Self::default();
        for event in events {
            if let Event::ProviderUsage { output_tokens, .. } = event {
                t.count += 1;
                if let Some(n) = output_tokens {
                    t.output_tokens += u64::from(*n);
                    t.reported += 1;
                }
            }
        }
        t
    }

    /// `{"count", "outputTokens"?, "usageComplete"}`, as RFC 0248 spells a
    /// call's attempts.
    pub fn total(self) -> AttemptsTotal {
        AttemptsTotal {
            count: self.count,
            output_tokens: (self.reported > 0).then_some(self.output_tokens),
            usage_complete: self.reported == self.count,
        }
    }
}

/// A run's status answer.
pub(super) fn run_answer(run_id: &str, status: Status, calls: u32, tally: Tally) -> RunAnswer {
    let (status, output, error) = match status {
        Status::Running => (StatusWord::Running, None, None),
        Status::Ok(output) => (StatusWord::Ok, Some(output), None),
        Status::Failed(error) => (StatusWord::Failed, None, Some(error)),
    };
    RunAnswer {
        run_id: run_id.to_owned(),
        status,
        calls,
        attempts: tally.total(),
        output,
        error,
        events: None,
    }
}

/// A run's status answer as the run log holds it; a record that does not
/// read back is named in `error` (`kind` `corrupt`, with the run's own
/// error, if it failed, as `runError`).
pub fn inspected_answer(inspected: &Inspected) -> RunAnswer {
    let mut answer = recorded_answer(&inspected.run);
    if let Some(damage) = &inspected.damage {
        let mut error = json!({
            "kind": "corrupt",
            "message": format!("the run log holds a record of this run that does not read back: {damage}"),
        });
        if let Some(own) = answer.error.take() {
            error["runError"] = own;
        }
        answer.error = Some(error);
    }
    answer
}

/// A recorded run's status answer, from a run log.
pub fn recorded_answer(run: &RecordedRun) -> RunAnswer {
    let status = match (run.status, &run.output) {
        (RunStatus::Running, _) => Status::Running,
        (RunStatus::Ok, output) => Status::Ok(output_json(output.as_deref().unwrap_or("null"))),
        (RunStatus::Failed, output) => {
            let text = output.as_deref().unwrap_or("{}");
            let error = serde_json::from_str::<Value>(text)
                .ok()
                .and_then(|v| v.get("error").cloned())
                .unwrap_or_else(|| json!({"kind": "failed", "message": text}));
            Status::Failed(error)
        }
    };
    run_answer(
        &run.run_id,
        status,
        run.calls.len() as u32,
        Tally::of(&run.events),
    )
}

/// A node's output as JSON: parsed when it is JSON, else the text itself.
pub fn output_json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// A run error's `{"kind", "message", ...}`.
pub fn run_error_json(e: &RunError) -> Value {
    e.to_json()["error"].clone()
}

/// `{"events": [...], "isComplete"}`: openwop's run-event envelope, with a
/// `sequence` from 1, the event's `type` and `payload`, the `nodeId` its
/// payload names, and when it happened (RFC 3339, UTC).
pub fn events_answer(events: &[(u64, Event)], complete: bool) -> EventsAnswer {
    let events = events
        .iter()
        .enumerate()
        .map(|(i, (at, event))| {
            // Serialised once: the envelope's node id is read from it.
            let event = event.to_json();
            RunEvent {
                sequence: i as u64 + 1,
                node_id: event["payload"].get("nodeId").cloned(),
                event,
                timestamp: rfc3339(*at),
            }
        })
        .collect();
    EventsAnswer {
        events,
        is_complete: complete,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(tokens: Option<u32>, attempt: u32) -> Event {
        Event::ProviderUsage {
            provider: "mock".into(),
            model: "m".into(),
            input_tokens: None,
            output_tokens: tokens,
            node_id: Some("n".into()),
            attempt,
            reason: "first".into(),
        }
    }

    #[test]
    fn the_tally_sums_every_request() {
        let t = Tally::of(&[usage(Some(5), 1), usage(None, 2), usage(Some(7), 1)]);
        assert_eq!(
            json!(t.total()),
            json!({"count": 3, "outputTokens": 12, "usageComplete": false})
        );
        assert_eq!(
            json!(Tally::of(&[]).total()),
            json!({"count": 0, "usageComplete": true})
        );
    }

    #[test]
    fn envelopes_number_from_one_and_name_the_node() {
        let v = json!(events_answer(&[(0, usage(Some(1), 1))], true));
        assert_eq!(v["isComplete"], true);
        let e = &v["events"][0];
        assert_eq!(
            (&e["sequence"], &e["type"], &e["nodeId"]),
            (&json!(1), &json!("provider.usage"), &json!("n"))
        );
        assert_eq!(e["timestamp"], "1970-01-01T00:00:00.000Z");
    }
}
