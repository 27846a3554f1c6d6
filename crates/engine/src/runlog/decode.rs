//! A run's rows, as any store hands them over, checked into a
//! [`RecordedRun`]: a record that does not parse, or says what no host
//! would (an attempts count of 0, a call missing from the sequence), is
//! corruption, named with the run and the call.

use super::{Entry, Outcome, RecordedCall, RecordedRun, RunLogError, RunSeed, RunSpec, RunStatus};
use crate::events::Event;

/// One stored call.
#[derive(Debug, Clone)]
pub struct RawCall {
    /// The node that made it.
    pub node_id: String,
    /// Its index.
    pub index: i64,
    /// `typed` or `json`.
    pub entry: String,
    /// The request's canonical JSON.
    pub request: String,
    /// The outcome's JSON.
    pub outcome: String,
    /// The call's events, a JSON array.
    pub events: String,
}

/// One stored run, as text and integers.
#[derive(Debug, Clone)]
pub struct RawRun {
    /// The run id.
    pub run_id: String,
    /// The node.
    pub node_id: String,
    /// `running`, `ok` or `failed`.
    pub status: String,
    /// The output or error text.
    pub output: Option<String>,
    /// The sandbox seed, stored bit for bit in a signed integer.
    pub seed: i64,
    /// The sandbox clock's start.
    pub clock_ms: i64,
    /// The spec's JSON.
    pub spec: Option<String>,
    /// Leased or not.
    pub durable: bool,
    /// Its calls, by index.
    pub calls: Vec<RawCall>,
    /// Its events (JSON) with their commit times, in order.
    pub events: Vec<(String, i64)>,
}

impl RawRun {
    /// Checks every record; `log` names the store in errors.
    pub fn check(self, log: &str) -> Result<RecordedRun, RunLogError> {
        let run_id = self.run_id;
        let corrupt = |what: String| RunLogError::Corrupt {
            path: log.into(),
            reason: format!("run {run_id:?}: {what}"),
        };
        let status = RunStatus::parse(&self.status)
            .ok_or_else(|| corrupt(format!("unknown status {:?}", self.status)))?;
        let spec: Option<RunSpec> = match &self.spec {
            None => None,
            Some(text) => Some(
                serde_json::from_str(text)
                    .map_err(|e| corrupt(format!("its spec does not parse: {e}")))?,
            ),
        };
        let mut calls = Vec::with_capacity(self.calls.len());
        for (i, raw) in self.calls.into_iter().enumerate() {
            let index = raw.index;
            let at = |what: &str, e: &dyn std::fmt::Display| {
                corrupt(format!("call {index}: {what}: {e}"))
            };
            if index != i as i64 {
                return Err(corrupt(format!(
                    "call {i} is missing (found call {index} there)"
                )));
            }
            let outcome: Outcome = serde_json::from_str(&raw.outcome)
                .map_err(|e| at("its outcome does not parse", &e))?;
            outcome
                .check()
                .map_err(|e| at("its outcome is impossible", &e))?;
            calls.push(RecordedCall {
                node_id: raw.node_id,
                index: index as u32,
                entry: Entry::parse(&raw.entry).ok_or_else(|| at("unknown entry", &raw.entry))?,
                request: serde_json::from_str(&raw.request)
                    .map_err(|e| at("its request does not parse", &e))?,
                outcome,
                events: serde_json::from_str(&raw.events)
                    .map_err(|e| at("its events do not parse", &e))?,
            });
        }
        let mut events = Vec::with_capacity(self.events.len());
        let mut event_times = Vec::with_capacity(self.events.len());
        for (text, at) in self.events {
            let event: Event = serde_json::from_str(&text)
                .map_err(|e| corrupt(format!("an event does not parse: {e}")))?;
            events.push(event);
            event_times.push(at.max(0) as u64);
        }
        Ok(RecordedRun {
            run_id: run_id.clone(),
            node_id: self.node_id,
            seed: RunSeed {
                seed: self.seed as u64,
                clock_ms: self.clock_ms as u64,
            },
            status,
            output: self.output,
            calls,
            events,
            event_times,
            spec,
            durable: self.durable,
        })
    }
}

/// JSON text of a record.
pub fn to_text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("run log records always serialise")
}

/// A call's columns: node, index, entry, request, outcome, events.
pub fn call_row(call: &RecordedCall) -> (String, i64, &'static str, String, String, String) {
    (
        call.node_id.clone(),
        i64::from(call.index),
        call.entry.as_str(),
        call.request.to_string(),
        to_text(&call.outcome),
        to_text(&call.events),
    )
}
