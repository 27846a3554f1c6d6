//! Run events (RFC 0032 reliability events, `provider.usage`, replay), and
//! the sinks that collect them.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;
use std::io::Write;
use std::sync::{Arc, Mutex};

/// One run event. Serialises as `{"type": "envelope.retry.exhausted", "payload": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "payload")]
pub enum Event {
    /// Before each provider request after the first.
    #[serde(rename = "envelope.retry.attempted", rename_all = "camelCase")]
    RetryAttempted {
        /// The node that made the call.
        node_id: String,
        /// The number of the request about to be sent (2..16).
        attempt: u32,
        /// Why the request is sent, as `provider.usage.reason` spells it.
        reason: Cow<'static, str>,
        /// What went wrong with the previous request.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        previous_error: Option<String>,
    },
    /// The host gave up on a call.
    #[serde(rename = "envelope.retry.exhausted", rename_all = "camelCase")]
    RetryExhausted {
        /// The node that made the call.
        node_id: String,
        /// Provider requests actually made for the call.
        total_attempts: u32,
        /// Why the last request failed.
        final_reason: Cow<'static, str>,
        /// The last request's error.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        final_error: Option<String>,
    },
    /// A reply was cut off by its output budget.
    #[serde(rename = "envelope.truncated", rename_all = "camelCase")]
    Truncated {
        /// The node that made the call.
        node_id: String,
        /// Provider id.
        provider: String,
        /// Model id.
        model: String,
        /// The provider's stop reason.
        stop_reason: String,
        /// Output tokens of the cut-off reply, when reported.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_token_count: Option<u32>,
    },
    /// The provider refused; never retried.
    #[serde(rename = "envelope.refusal", rename_all = "camelCase")]
    Refusal {
        /// The node that made the call.
        node_id: String,
        /// Provider id.
        provider: String,
        /// Model id.
        model: String,
    },
    /// The natural-language-to-JSON fallback request is about to be sent.
    #[serde(rename = "envelope.nlToFormat.engaged", rename_all = "camelCase")]
    NlToFormatEngaged {
        /// The node that made the call.
        node_id: String,
        /// What kind of envelope the call wanted.
        original_envelope_type: String,
        /// Always 1.
        fallback_calls: u32,
    },
    /// Lenient parsing recovered a reply: not a retry.
    #[serde(rename = "envelope.recovery.applied", rename_all = "camelCase")]
    RecoveryApplied {
        /// The node that made the call.
        node_id: String,
        /// `direct|markdown-fence|brace-walker`
        path: String,
    },
    /// Once per provider request.
    #[serde(rename = "provider.usage", rename_all = "camelCase")]
    ProviderUsage {
        /// Provider id.
        provider: String,
        /// Model id.
        model: String,
        /// Reported input tokens, null when not reported.
        input_tokens: Option<u32>,
        /// Reported output tokens, null when not reported.
        output_tokens: Option<u32>,
        /// The node that made the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node_id: Option<String>,
        /// The request's number within its call (1..16).
        attempt: u32,
        /// Why it was sent: `first`, `schema-violation`, `parse-error`,
        /// `truncation`, `x-host-callai-transient`, `x-host-callai-fallback`,
        /// `x-host-callai-native-rejected`.
        reason: Cow<'static, str>,
    },
    /// Replay met a call other than the recorded one.
    #[serde(rename = "replay.diverged", rename_all = "camelCase")]
    ReplayDiverged {
        /// The node that made the call.
        node_id: String,
        /// The call's position in the run (0-based).
        call_index: u32,
        /// What differed.
        reason: String,
    },
    /// Log lines the run's `limits.maxLogBytes` / `maxLogLines` left out.
    #[serde(rename = "pack.log.dropped", rename_all = "camelCase")]
    PackLogDropped {
        /// The node that logged them.
        node_id: String,
        /// Lines dropped.
        lines: u64,
        /// Their bytes.
        bytes: u64,
    },
    /// Top-level fields of a JSON request the spec does not define, which
    /// the host ignored (`[policy] unknownRequestFields = "warn"`).
    #[serde(rename = "request.unknownFields", rename_all = "camelCase")]
    UnknownRequestFields {
        /// The node that sent the request.
        node_id: String,
        /// Each field, with the spec's field it looks like.
        fields: Vec<callai_wire::UnknownField>,
    },
    /// A line the pack logged.
    #[serde(rename = "pack.log", rename_all = "camelCase")]
    PackLog {
        /// The node that logged it.
        node_id: String,
        /// `debug|info|warn|error`
        level: String,
        /// The text.
        message: String,
    },
}

impl Event {
    /// The event's type name, e.g. `provider.usage`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::RetryAttempted { .. } => "envelope.retry.attempted",
            Self::RetryExhausted { .. } => "envelope.retry.exhausted",
            Self::Truncated { .. } => "envelope.truncated",
            Self::Refusal { .. } => "envelope.refusal",
            Self::NlToFormatEngaged { .. } => "envelope.nlToFormat.engaged",
            Self::RecoveryApplied { .. } => "envelope.recovery.applied",
            Self::ProviderUsage { .. } => "provider.usage",
            Self::ReplayDiverged { .. } => "replay.diverged",
            Self::UnknownRequestFields { .. } => "request.unknownFields",
            Self::PackLog { .. } => "pack.log",
            Self::PackLogDropped { .. } => "pack.log.dropped",
        }
    }

    /// `{"type": ..., "payload": ...}`.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("an Event always serialises")
    }
}

/// Where a run's events go. Implementations must be cheap: the engine calls
/// `emit` inline.
pub trait EventSink: Send + Sync {
    /// Records one event.
    fn emit(&self, event: Event);

    /// Whether emitted events are kept. A sink that keeps none (a caller
    /// that will not read them) lets the engine skip making them.
    fn keeps(&self) -> bool {
        true
    }
}

/// Collects events in memory, in order, each with the time it was emitted.
/// Clones share one log: a caller can keep a handle on a run's events and
/// read them while the run goes on. A [`discarding`](Self::discarding)
/// log keeps none.
#[derive(Debug, Clone)]
pub struct EventLog {
    /// `None`: the log keeps nothing.
    inner: Option<Arc<Mutex<Stamped>>>,
}

impl Default for EventLog {
    fn default() -> Self {
        Self {
            inner: Some(Arc::default()),
        }
    }
}

#[derive(Debug, Default)]
struct Stamped {
    events: Vec<Event>,
    /// When each event was emitted, in ms since the Unix epoch.
    times: Vec<u64>,
}

/// Now, in ms since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl EventLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// A log that keeps no event, and whose making costs nothing: for a
    /// live session whose events nobody reads (a session that records or
    /// replays its calls does not take it: its record holds their events).
    /// The engine makes no event for a call whose sink keeps none.
    pub fn discarding() -> Self {
        Self { inner: None }
    }

    /// The log's events, or `None` when it keeps none.
    fn lock(&self) -> Option<std::sync::MutexGuard<'_, Stamped>> {
        let inner = self.inner.as_ref()?;
        Some(inner.lock().expect("event log poisoned"))
    }

    /// A copy of the events so far.
    pub fn snapshot(&self) -> Vec<Event> {
        self.lock().map(|l| l.events.clone()).unwrap_or_default()
    }

    /// How many events so far.
    pub fn len(&self) -> usize {
        self.lock().map_or(0, |l| l.events.len())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The events from position `start` on.
    pub fn since(&self, start: usize) -> Vec<Event> {
        let Some(log) = self.lock() else {
            return Vec::new();
        };
        log.events
            .get(start..)
            .map(<[Event]>::to_vec)
            .unwrap_or_default()
    }

    /// The events from position `start` on, each with the time it was
    /// emitted (ms since the Unix epoch).
    pub fn stamped_since(&self, start: usize) -> Vec<(u64, Event)> {
        let Some(log) = self.lock() else {
            return Vec::new();
        };
        let times = log.times.get(start..).unwrap_or_default();
        let events = log.events.get(start..).unwrap_or_default();
        times.iter().copied().zip(events.iter().cloned()).collect()
    }

    /// Takes the events out, leaving the log empty.
    pub fn take(&self) -> Vec<Event> {
        let Some(mut log) = self.lock() else {
            return Vec::new();
        };
        log.times.clear();
        std::mem::take(&mut log.events)
    }
}

/// Writes events as JSON lines, one `{"type", "payload"}` object each.
pub fn write_jsonl(events: &[Event], out: &mut dyn Write) -> std::io::Result<()> {
    for event in events {
        serde_json::to_writer(&mut *out, event)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

impl EventSink for EventLog {
    fn emit(&self, event: Event) {
        let Some(inner) = &self.inner else { return };
        // The time is read before the lock is taken.
        let at = now_ms();
        let mut log = inner.lock().expect("event log poisoned");
        log.events.push(event);
        log.times.push(at);
    }

    fn keeps(&self) -> bool {
        self.inner.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_serialise_with_the_rfc_names() {
        let e = Event::RetryExhausted {
            node_id: "n".into(),
            total_attempts: 1,
            final_reason: "truncation".into(),
            final_error: None,
        };
        assert_eq!(
            e.to_json(),
            json!({"type": "envelope.retry.exhausted",
                   "payload": {"nodeId": "n", "totalAttempts": 1, "finalReason": "truncation"}})
        );
        assert_eq!(e.type_name(), "envelope.retry.exhausted");
        let back: Event = serde_json::from_value(e.to_json()).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn the_log_keeps_order_and_writes_jsonl() {
        let log = EventLog::new();
        for attempt in 1..=3 {
            log.emit(Event::ProviderUsage {
                provider: "mock".into(),
                model: "m".into(),
                input_tokens: None,
                output_tokens: Some(attempt),
                node_id: None,
                attempt,
                reason: "first".into(),
            });
        }
        let mut out = Vec::new();
        write_jsonl(&log.snapshot(), &mut out).unwrap();
        let lines: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[2]["payload"]["outputTokens"], 3);
        assert_eq!(lines[0]["payload"]["inputTokens"], Value::Null);
    }

    #[test]
    fn a_discarding_log_keeps_nothing_and_says_so() {
        let log = EventLog::discarding();
        assert!(!log.keeps());
        assert!(EventLog::new().keeps());
        log.emit(Event::PackLogDropped {
            node_id: "n".into(),
            lines: 1,
            bytes: 1,
        });
        assert!(log.is_empty());
        assert!(log.snapshot().is_empty() && log.since(0).is_empty());
        assert!(log.stamped_since(0).is_empty() && log.take().is_empty());
        // Clones discard too.
        let clone = log.clone();
        assert!(!clone.keeps());
    }
}
