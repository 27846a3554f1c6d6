//! What a run does with its calls: serve them live, record them, or replay
//! them from a log. Replay never invents a result and never goes live: a call
//! that differs from the recorded one is a divergence.

use super::{RecordedCall, RecordedRun, RunLog, RunLogError, RunStatus};
use crate::events::{Event, EventLog};
use serde_json::Value;
use std::fmt;
use std::sync::Arc;

/// A replayed call: the recorded outcome and events, or the divergence.
#[derive(Debug, Clone, PartialEq)]
pub enum Replayed {
    /// The recorded call matched: its outcome and events.
    Served {
        /// `{"result": ...}` or `{"error": ...}`.
        outcome: Value,
        /// The events the call emitted when it was recorded.
        events: Vec<Event>,
    },
    /// The call is not the recorded one; the reason names the point.
    Diverged(String),
}

/// The journal of one run.
pub enum Journal {
    /// Calls go to the providers; nothing is kept.
    Live,
    /// Calls go to the providers and each is committed to the log.
    Record {
        /// The log.
        log: Arc<dyn RunLog>,
        /// The run id.
        run_id: String,
        /// Events already committed.
        flushed: usize,
    },
    /// Calls are served from the log.
    Replay {
        /// The recorded run.
        run: Box<RecordedRun>,
    },
}

impl fmt::Debug for Journal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Live => f.write_str("Live"),
            Self::Record { run_id, .. } => write!(f, "Record({run_id})"),
            Self::Replay { run } => write!(f, "Replay({})", run.run_id),
        }
    }
}

impl Journal {
    /// Starts recording `run_id` of `node_id` into `log`.
    pub fn record(
        log: Arc<dyn RunLog>,
        run_id: &str,
        node_id: &str,
        overwrite: bool,
    ) -> Result<Self, RunLogError> {
        log.begin(run_id, node_id, overwrite)?;
        Ok(Self::Record {
            log,
            run_id: run_id.into(),
            flushed: 0,
        })
    }

    /// Loads `run_id` from `log` for replay.
    pub fn replay(log: &dyn RunLog, run_id: &str) -> Result<Self, RunLogError> {
        Ok(Self::Replay {
            run: Box::new(log.load(run_id)?),
        })
    }

    /// Whether calls are committed to a log.
    pub fn is_recording(&self) -> bool {
        matches!(self, Self::Record { .. })
    }

    /// Whether calls are served from a log.
    pub fn is_replay(&self) -> bool {
        matches!(self, Self::Replay { .. })
    }

    /// Serves call `index` from the log, if it is the recorded one.
    pub fn replay_call(
        &self,
        node_id: &str,
        index: u32,
        entry: super::Entry,
        request: &str,
    ) -> Replayed {
        let Self::Replay { run } = self else {
            return Replayed::Diverged("not replaying".into());
        };
        let Some(call) = run.calls.iter().find(|c| c.index == index) else {
            return Replayed::Diverged(format!(
                "call {index} was not recorded (the log holds {} calls of run {:?})",
                run.calls.len(),
                run.run_id
            ));
        };
        let reason = if call.node_id != node_id {
            format!(
                "call {index} was recorded for node {:?}, not {node_id:?}",
                call.node_id
            )
        } else if call.entry != entry {
            format!(
                "call {index} was recorded through call-ai{}, not call-ai{}",
                suffix(call.entry),
                suffix(entry)
            )
        } else if call.request != request {
            format!("call {index} asks for a different request than the recorded one")
        } else {
            return Replayed::Served {
                outcome: call.outcome.clone(),
                events: call.events.clone(),
            };
        };
        Replayed::Diverged(reason)
    }

    /// After the node returns: on replay, a finished run that made fewer
    /// calls than the log holds has diverged too.
    pub fn missing_calls(&self, made: u32) -> Option<String> {
        let Self::Replay { run } = self else {
            return None;
        };
        let recorded = run.calls.len() as u32;
        (run.status != RunStatus::Running && made < recorded).then(|| {
            format!(
                "the node made {made} calls; run {:?} recorded {recorded}",
                run.run_id
            )
        })
    }

    /// Commits a recorded call with the run's events not yet committed.
    pub fn commit(&mut self, call: &RecordedCall, events: &EventLog) -> Result<(), RunLogError> {
        self.flush(events, |log, run_id, new| {
            log.commit_call(run_id, call, new)
        })
    }

    /// Ends a recorded run.
    pub fn finish(
        &mut self,
        events: &EventLog,
        status: RunStatus,
        output: &str,
    ) -> Result<(), RunLogError> {
        self.flush(events, |log, run_id, new| {
            log.finish(run_id, new, status, output)
        })
    }

    /// When recording, hands `write` the events not yet committed, and
    /// counts them committed once it succeeds.
    fn flush(
        &mut self,
        events: &EventLog,
        write: impl FnOnce(&dyn RunLog, &str, &[Event]) -> Result<(), RunLogError>,
    ) -> Result<(), RunLogError> {
        if let Self::Record {
            log,
            run_id,
            flushed,
        } = self
        {
            let new = events.since(*flushed);
            write(log.as_ref(), run_id, &new)?;
            *flushed += new.len();
        }
        Ok(())
    }
}

fn suffix(entry: super::Entry) -> &'static str {
    match entry {
        super::Entry::Typed => "",
        super::Entry::Json => "-json",
    }
}
