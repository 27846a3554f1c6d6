//! A run's rows, as any store hands them over, checked into a
//! [`RecordedRun`]: a record that does not parse, or says what no host
//! would (an attempts count of 0, a call missing from the sequence), is
//! corruption, named with the run and the call.
//!
//! A call's `responseSchema` is stored once, by the SHA-256 of its text, in
//! a table of schemas: the request's row names it (`{"responseSchema":
//! {"$callaiSchemaSha256": "..."}}`), and the store hands the text back
//! beside the row. A pack that makes 250 calls with one 1 MB schema records
//! it once, not 250 times.

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
    /// The text of the schema its request names by hash, when it names one.
    pub schema: Option<String>,
}

/// The key that stands for a stored request's schema.
pub const SCHEMA_REF: &str = "$callaiSchemaSha256";

/// A schema, stored once under the SHA-256 (hex) of its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaRow {
    /// SHA-256 of `text`, hex.
    pub sha256: String,
    /// The schema's JSON text.
    pub text: String,
}

/// A call as a store writes it.
#[derive(Debug, Clone)]
pub struct CallRow {
    /// The node that made it.
    pub node_id: String,
    /// Its index.
    pub index: i64,
    /// `typed` or `json`.
    pub entry: &'static str,
    /// The request's canonical JSON, its schema named by hash.
    pub request: String,
    /// The outcome's JSON.
    pub outcome: String,
    /// The call's events, a JSON array.
    pub events: String,
    /// The request's schema, to store once.
    pub schema: Option<SchemaRow>,
}

impl CallRow {
    /// What the row itself weighs (its schema not included).
    pub fn bytes(&self) -> u64 {
        (self.node_id.len() + self.request.len() + self.outcome.len() + self.events.len()) as u64
    }
}

/// The request of a stored row, its schema put back from `schema`.
fn join_schema(
    request: &str,
    schema: Option<&str>,
) -> Result<serde_json::Value, Box<dyn std::fmt::Display>> {
    let mut value: serde_json::Value =
        serde_json::from_str(request).map_err(|e| Box::new(e) as Box<dyn std::fmt::Display>)?;
    let named = value
        .get("responseSchema")
        .and_then(|s| s.get(SCHEMA_REF))
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned);
    if let Some(sha256) = named {
        let text = schema.ok_or_else(|| {
            Box::new(format!("its schema {sha256} is not in the log")) as Box<dyn std::fmt::Display>
        })?;
        let parsed: serde_json::Value =
            serde_json::from_str(text).map_err(|e| Box::new(e) as Box<dyn std::fmt::Display>)?;
        value["responseSchema"] = parsed;
    }
    Ok(value)
}

/// One stored run, as text and integers.
#[derive(Debug, Clone)]
pub struct RawRun {
    /// The tenant that owns it.
    pub tenant: String,
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

/// A run read as far as its records allow: what [`RawRun::inspect`] gives
/// a reader that wants to show a run (its status, its calls up to a
/// damaged one), where a replay wants it whole.
#[derive(Debug, Clone, PartialEq)]
pub struct Inspected {
    /// The run, its calls up to the first that does not read back and its
    /// events up to the first that does not.
    pub run: RecordedRun,
    /// What does not read back, naming the run and the call, if anything.
    pub damage: Option<String>,
}

impl RawRun {
    /// Checks every record; `log` names the store in errors.
    pub fn check(self, log: &str) -> Result<RecordedRun, RunLogError> {
        let path = log.to_owned();
        let inspected = self.inspect(log)?;
        match inspected.damage {
            None => Ok(inspected.run),
            Some(reason) => Err(RunLogError::Corrupt { path, reason }),
        }
    }

    /// Reads the run as far as its records allow: a head that does not
    /// read back (an unknown status, a spec that does not parse) is an
    /// error; a damaged call or event ends what is read there, named in
    /// [`Inspected::damage`].
    pub fn inspect(self, log: &str) -> Result<Inspected, RunLogError> {
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
        let damaged = |what: String| format!("run {run_id:?}: {what}");
        let mut damage = None;
        let mut calls = Vec::with_capacity(self.calls.len());
        for (i, raw) in self.calls.into_iter().enumerate() {
            match read_call(i, raw) {
                Ok(call) => calls.push(call),
                Err(what) => {
                    damage = Some(damaged(what));
                    break;
                }
            }
        }
        let mut events = Vec::with_capacity(self.events.len());
        let mut event_times = Vec::with_capacity(self.events.len());
        for (text, at) in self.events {
            match serde_json::from_str::<Event>(&text) {
                Ok(event) => {
                    events.push(event);
                    event_times.push(at.max(0) as u64);
                }
                Err(e) => {
                    damage.get_or_insert_with(|| damaged(format!("an event does not parse: {e}")));
                    break;
                }
            }
        }
        let run = RecordedRun {
            tenant: self.tenant,
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
        };
        Ok(Inspected { run, damage })
    }
}

/// Call `i` of a run from its row; what does not read back, named.
fn read_call(i: usize, raw: RawCall) -> Result<RecordedCall, String> {
    let index = raw.index;
    let at = |what: &str, e: &dyn std::fmt::Display| format!("call {index}: {what}: {e}");
    if index != i as i64 {
        return Err(format!("call {i} is missing (found call {index} there)"));
    }
    let outcome: Outcome =
        serde_json::from_str(&raw.outcome).map_err(|e| at("its outcome does not parse", &e))?;
    outcome
        .check()
        .map_err(|e| at("its outcome is impossible", &e))?;
    Ok(RecordedCall {
        node_id: raw.node_id,
        index: index as u32,
        entry: Entry::parse(&raw.entry).ok_or_else(|| at("unknown entry", &raw.entry))?,
        request: join_schema(&raw.request, raw.schema.as_deref())
            .map_err(|e| at("its request does not parse", &e))?,
        outcome,
        events: serde_json::from_str(&raw.events).map_err(|e| at("its events do not parse", &e))?,
    })
}

/// JSON text of a record.
pub fn to_text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("run log records always serialise")
}

/// A call's row, its request's `responseSchema` (when it has one) split
/// off to be stored once by its hash.
pub fn call_row(call: &RecordedCall) -> CallRow {
    let schema = call.request.get("responseSchema").map(|schema| {
        let text = to_text(schema);
        SchemaRow {
            sha256: sha256_hex(text.as_bytes()),
            text,
        }
    });
    let request = match &schema {
        None => call.request.to_string(),
        Some(s) => {
            let mut named = call.request.clone();
            named["responseSchema"] = serde_json::json!({ SCHEMA_REF: s.sha256 });
            named.to_string()
        }
    };
    CallRow {
        node_id: call.node_id.clone(),
        index: i64::from(call.index),
        entry: call.entry.as_str(),
        request,
        outcome: to_text(&call.outcome),
        events: to_text(&call.events),
        schema,
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
