//! What a run does with its calls: serve them live, record them, or replay
//! them from a log. Replay never invents a result and never goes live: a
//! call that differs from the recorded one is a divergence.

use crate::events::{Event, EventLog};
use crate::runlog::{
    Entry, Fence, Outcome, RecordedCall, RecordedRun, RunLog, RunLogError, RunSeed, RunStatus,
};
use serde_json::Value;
use std::fmt;
use std::sync::Arc;

/// The journal of one run: live, recording into a run log, or replaying
/// from one. Build it with [`Journal::live`], [`Journal::record`] or
/// [`Journal::replay`] and hand it to the run.
pub struct Journal {
    mode: Mode,
    /// The run's sandbox seed: fresh when live or recording (and recorded),
    /// the recorded one on replay.
    seed: RunSeed,
}

enum Mode {
    Live,
    Record {
        log: Arc<dyn RunLog>,
        run_id: String,
        fence: Fence,
        /// Events of the run already committed.
        flushed: usize,
    },
    Replay {
        run: Box<RecordedRun>,
    },
}

impl fmt::Debug for Journal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.mode {
            Mode::Live => f.write_str("Journal::Live"),
            Mode::Record { run_id, .. } => write!(f, "Journal::Record({run_id})"),
            Mode::Replay { run } => write!(f, "Journal::Replay({})", run.run_id),
        }
    }
}

impl Default for Journal {
    fn default() -> Self {
        Self::live()
    }
}

/// A replayed call: the recorded outcome and events, or the divergence.
pub(crate) enum Replayed {
    /// The recorded call matched.
    Served(Outcome, Vec<Event>),
    /// The call is not the recorded one; the reason names the point.
    Diverged(String),
}

impl Journal {
    /// Calls go to the providers; nothing is kept.
    pub fn live() -> Self {
        Self {
            mode: Mode::Live,
            seed: RunSeed::fresh(),
        }
    }

    /// Starts recording `run_id` of `node_id` into `log`; with `overwrite`,
    /// an existing run of that id is replaced.
    pub async fn record(
        log: Arc<dyn RunLog>,
        run_id: &str,
        node_id: &str,
        overwrite: bool,
    ) -> Result<Self, RunLogError> {
        let seed = RunSeed::fresh();
        let fence = log.begin(run_id, node_id, seed, overwrite).await?;
        Ok(Self {
            mode: Mode::Record {
                log,
                run_id: run_id.into(),
                fence,
                flushed: 0,
            },
            seed,
        })
    }

    /// Loads `run_id` from `log` for replay.
    pub async fn replay(log: &dyn RunLog, run_id: &str) -> Result<Self, RunLogError> {
        let run = log.load(run_id).await?;
        Ok(Self {
            seed: run.seed,
            mode: Mode::Replay { run: Box::new(run) },
        })
    }

    /// The seed and clock the run's sandbox gets.
    pub fn seed(&self) -> RunSeed {
        self.seed
    }

    /// When recording, the fence the recording holds on its run: what a
    /// caller needs to close the run itself if the run is stopped before
    /// it ends.
    pub fn fence(&self) -> Option<Fence> {
        match &self.mode {
            Mode::Record { fence, .. } => Some(*fence),
            _ => None,
        }
    }

    /// Whether calls are served live (the request key need not be made).
    pub(crate) fn is_live(&self) -> bool {
        matches!(self.mode, Mode::Live)
    }

    /// Whether calls are served from a log.
    pub(crate) fn is_replay(&self) -> bool {
        matches!(self.mode, Mode::Replay { .. })
    }

    /// Serves call `index` from the log, if it is the recorded one.
    pub(crate) fn replay_call(
        &self,
        node_id: &str,
        index: u32,
        entry: Entry,
        request: &Value,
    ) -> Replayed {
        let Mode::Replay { run } = &self.mode else {
            return Replayed::Diverged("not replaying".into());
        };
        let Some(call) = run.calls.get(index as usize) else {
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
        } else if call.request != *request {
            format!("call {index} asks for a different request than the recorded one")
        } else {
            return Replayed::Served(call.outcome.clone(), call.events.clone());
        };
        Replayed::Diverged(reason)
    }

    /// After the node returns: on replay, a finished run that made fewer
    /// calls than the log holds has diverged too.
    pub(crate) fn missing_calls(&self, made: u32) -> Option<String> {
        let Mode::Replay { run } = &self.mode else {
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

    /// When recording, commits `call` with the run's events not yet committed.
    pub(crate) async fn commit(
        &mut self,
        call: &RecordedCall,
        events: &EventLog,
    ) -> Result<(), RunLogError> {
        if let Some(r) = self.recording(events) {
            r.log.commit_call(r.run_id, r.fence, call, &r.new).await?;
            *r.flushed += r.new.len();
        }
        Ok(())
    }

    /// When recording, ends the run with its remaining events.
    pub(crate) async fn finish(
        &mut self,
        events: &EventLog,
        status: RunStatus,
        output: &str,
    ) -> Result<(), RunLogError> {
        if let Some(r) = self.recording(events) {
            r.log
                .finish(r.run_id, r.fence, &r.new, status, output)
                .await?;
            *r.flushed += r.new.len();
        }
        Ok(())
    }

    /// When recording: the log, and the events not yet committed.
    fn recording<'a>(&'a mut self, events: &EventLog) -> Option<Recording<'a>> {
        match &mut self.mode {
            Mode::Record {
                log,
                run_id,
                fence,
                flushed,
            } => Some(Recording {
                log: &**log,
                run_id,
                fence: *fence,
                new: events.since(*flushed),
                flushed,
            }),
            _ => None,
        }
    }
}

/// A recording journal's view for one write.
struct Recording<'a> {
    log: &'a dyn RunLog,
    run_id: &'a str,
    fence: Fence,
    new: Vec<Event>,
    flushed: &'a mut usize,
}

fn suffix(entry: Entry) -> &'static str {
    match entry {
        Entry::Typed => "",
        Entry::Json => "-json",
    }
}
