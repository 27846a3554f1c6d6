//! The runs this server knows: the ones going on, and the recent finished
//! ones (`[server] keepRuns`), each with its live event log. A run log, when
//! set, holds the rest.

use crate::answer::{AttemptsTotal, EventsAnswer, RunAnswer, RunEvent, StatusWord};
use crate::error::ApiError;
use callai_engine::RunError;
use callai_engine::cost::Cost;
use callai_engine::events::{Event, EventLog};
use callai_engine::observe::{CallObserver, CallStart, CallWatch, RequestEnd, RequestStart};
use callai_engine::runlog::decode::Inspected;
use callai_engine::runlog::{RecordedRun, RunStatus};
use callai_engine::wire::{CallError, CallResult};
use callai_host::RunOutput;
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

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

/// One run this server started.
#[derive(Debug)]
pub struct RunEntry {
    /// The tenant that owns it.
    pub tenant: String,
    /// Its id, unique among its tenant's runs.
    pub run_id: String,
    /// The pack it runs.
    pub pack: String,
    /// The node id its events carry.
    pub node_id: String,
    /// Its events, live.
    pub events: EventLog,
    state: Mutex<(Status, u32)>,
    /// Calls made so far (served from a log, or seen going live).
    calls: AtomicU32,
    done: watch::Sender<bool>,
    /// The run is no longer this host's (another took it over, or this one
    /// handed it on at shutdown): the run log says where it stands.
    handed_on: std::sync::atomic::AtomicBool,
}

impl RunEntry {
    /// Run `run_id` of `tenant`, about to be queued.
    pub fn new(tenant: String, run_id: String, pack: String, node_id: String) -> Self {
        Self {
            tenant,
            run_id,
            pack,
            node_id,
            events: EventLog::new(),
            state: Mutex::new((Status::Running, 0)),
            calls: AtomicU32::new(0),
            done: watch::channel(false).0,
            handed_on: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The run ended with `output`.
    pub fn finish(&self, output: &RunOutput) {
        let status = match &output.result {
            Ok(text) => Status::Ok(output_json(text)),
            Err(e) => Status::Failed(run_error_json(e)),
        };
        self.end(status, output.calls);
    }

    /// Counts `n` calls the run made without the server seeing them go
    /// live (served from a run log on resume).
    pub fn add_calls(&self, n: u32) {
        self.calls.fetch_add(n, Ordering::Relaxed);
    }

    /// The run ended without running to its end (`kind`, `message`).
    pub fn fail(&self, kind: &str, message: &str) {
        let calls = self.calls.load(Ordering::Relaxed);
        self.end(
            Status::Failed(json!({"kind": kind, "message": message})),
            calls,
        );
    }

    /// The run went to another host (`kind`, `message` say why): what this
    /// host says of it from now on is read from the run log.
    pub fn hand_on(&self, kind: &str, message: &str) {
        self.handed_on.store(true, Ordering::Release);
        self.fail(kind, message);
    }

    /// Whether the run is another host's now.
    pub fn is_handed_on(&self) -> bool {
        self.handed_on.load(Ordering::Acquire)
    }

    fn end(&self, status: Status, calls: u32) {
        *self.state.lock().expect("run state") = (status, calls);
        self.done.send_replace(true);
    }

    /// Whether it has ended.
    pub fn is_done(&self) -> bool {
        *self.done.borrow()
    }

    /// Its key in the run log.
    pub fn key(&self) -> callai_engine::RunKey<'_> {
        callai_engine::RunKey::new(&self.tenant, &self.run_id)
    }

    /// Completes when the run ends.
    pub async fn wait(&self) {
        let mut rx = self.done.subscribe();
        // The sender lives as long as the entry.
        let _ = rx.wait_for(|done| *done).await;
    }

    /// `{"runId", "status", "calls", "attempts", "output"?, "error"?}`.
    pub fn answer(&self) -> RunAnswer {
        let (status, calls) = self.state.lock().expect("run state").clone();
        let events = self.events.snapshot();
        let calls = match status {
            Status::Running => self.calls.load(Ordering::Relaxed),
            _ => calls,
        };
        run_answer(&self.run_id, status, calls, Tally::of(&events))
    }
}

/// Counts a run's calls as they start (the observer of [`RunEntry`]).
#[derive(Debug, Clone)]
pub struct CallCounter(pub Arc<RunEntry>);

struct Unwatched;

impl CallWatch for Unwatched {
    fn request_started(&mut self, _: &RequestStart<'_>) {}
    fn request_finished(&mut self, _: &RequestStart<'_>, _: RequestEnd<'_>, _: Option<&Cost>) {}
    fn call_finished(self: Box<Self>, _: Result<&CallResult, &CallError>) {}
}

impl CallObserver for CallCounter {
    fn call_started(&self, _: &CallStart<'_>) -> Box<dyn CallWatch> {
        self.0.add_calls(1);
        Box::new(Unwatched)
    }
    fn call_refused(&self, _: &str, _: &CallError) {
        self.0.add_calls(1);
    }
}

/// A run's status answer.
fn run_answer(run_id: &str, status: Status, calls: u32, tally: Tally) -> RunAnswer {
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

/// The runs in memory: every one going on, and the last `keep` finished.
#[derive(Debug)]
pub struct RunTable {
    inner: Mutex<Table>,
}

/// A run's key in the table: its tenant and id.
type Key = (String, String);

fn key_of(entry: &RunEntry) -> Key {
    (entry.tenant.clone(), entry.run_id.clone())
}

#[derive(Debug)]
struct Table {
    runs: HashMap<Key, Arc<RunEntry>>,
    finished: VecDeque<Key>,
    keep: usize,
}

impl RunTable {
    /// Keeps `keep` finished runs.
    pub fn new(keep: usize) -> Self {
        Self {
            inner: Mutex::new(Table {
                runs: HashMap::new(),
                finished: VecDeque::new(),
                keep,
            }),
        }
    }

    /// Adds a run; a run its tenant already holds on this server is a
    /// conflict.
    pub fn insert(&self, entry: Arc<RunEntry>) -> Result<(), ApiError> {
        let mut t = self.inner.lock().expect("run table");
        let key = key_of(&entry);
        if t.runs.contains_key(&key) {
            return Err(ApiError::conflict(format!(
                "run {:?} already exists on this host",
                entry.run_id
            )));
        }
        t.runs.insert(key, entry);
        Ok(())
    }

    /// Adds a run, or replaces the one of its key (a run this host held
    /// before, taken over again).
    pub fn put(&self, entry: Arc<RunEntry>) {
        let mut t = self.inner.lock().expect("run table");
        t.runs.insert(key_of(&entry), entry);
    }

    /// Forgets a run that never started (its admission was refused).
    pub fn remove(&self, entry: &RunEntry) {
        let key = key_of(entry);
        let mut t = self.inner.lock().expect("run table");
        if t.runs
            .get(&key)
            .is_some_and(|held| std::ptr::eq(&**held, entry))
        {
            t.runs.remove(&key);
        }
    }

    /// A run has ended: it is kept until `keep` newer ones have.
    pub fn finished(&self, entry: &RunEntry) {
        let mut t = self.inner.lock().expect("run table");
        t.finished.push_back(key_of(entry));
        while t.finished.len() > t.keep {
            if let Some(old) = t.finished.pop_front() {
                t.runs.remove(&old);
            }
        }
    }

    /// Run `run_id` of `tenant`, if this server holds it.
    pub fn get(&self, tenant: &str, run_id: &str) -> Option<Arc<RunEntry>> {
        let key = (tenant.to_owned(), run_id.to_owned());
        self.inner
            .lock()
            .expect("run table")
            .runs
            .get(&key)
            .cloned()
    }
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

/// `ms` since the Unix epoch as `2026-11-30T15:03:12.345Z`.
pub fn rfc3339(ms: u64) -> String {
    // Past jiff's range (year 9999) only for a clock gone wrong; saturate.
    let ts = i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .unwrap_or(jiff::Timestamp::MAX);
    ts.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(1_796_051_592_345), "2026-11-30T15:13:12.345Z");
    }

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

    #[test]
    fn the_table_keeps_the_newest_finished_runs() {
        let table = RunTable::new(2);
        for i in 0..4 {
            let id = format!("r{i}");
            let entry = Arc::new(RunEntry::new("a".into(), id, "p".into(), "n".into()));
            table.insert(entry.clone()).unwrap();
            table.finished(&entry);
        }
        assert!(table.get("a", "r0").is_none() && table.get("a", "r1").is_none());
        assert!(table.get("a", "r2").is_some() && table.get("a", "r3").is_some());
        let again = Arc::new(RunEntry::new(
            "a".into(),
            "r3".into(),
            "p".into(),
            "n".into(),
        ));
        assert_eq!(table.insert(again).unwrap_err().status().as_u16(), 409);
        // Run ids are unique per owner: another tenant's r3 is its own.
        let theirs = Arc::new(RunEntry::new(
            "b".into(),
            "r3".into(),
            "p".into(),
            "n".into(),
        ));
        table.insert(theirs).unwrap();
        assert!(table.get("b", "r3").is_some() && table.get("c", "r3").is_none());
    }
}
