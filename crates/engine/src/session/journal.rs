//! What a run does with its calls: serve them live, record them, or replay
//! them from a log. Replay never invents a result and never goes live: a
//! call that differs from the recorded one is a divergence.

use crate::events::{Event, EventLog};
use crate::runlog::{
    BeginRun, Entry, ExistingRun, Fence, Lease, Outcome, RecordedCall, RecordedRun, RunKey, RunLog,
    RunLogError, RunSeed, RunSpec, RunStatus,
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
    seed: std::sync::OnceLock<RunSeed>,
}

enum Mode {
    Live,
    Record {
        log: Arc<dyn RunLog>,
        tenant: String,
        run_id: String,
        fence: Fence,
        /// Events of the run already committed.
        flushed: usize,
        /// On resume: the run as far as it was committed. Its calls are
        /// served from here, as on replay; the calls after them go live.
        resumed: Option<Box<RecordedRun>>,
    },
    Replay {
        run: Box<RecordedRun>,
    },
}

impl fmt::Debug for Journal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.mode {
            Mode::Live => f.write_str("Journal::Live"),
            Mode::Record {
                run_id,
                resumed: Some(_),
                ..
            } => write!(f, "Journal::Resume({run_id})"),
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

/// How [`Journal::record`] records a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Recording<'a> {
    /// What a run the log already holds under the id means.
    pub existing: ExistingRun,
    /// What the run was started with, so that it can be resumed elsewhere.
    pub spec: Option<&'a RunSpec>,
    /// A durable run's lease, renewed by its host.
    pub lease: Option<Lease<'a>>,
}

impl Journal {
    /// Calls go to the providers; nothing is kept.
    pub fn live() -> Self {
        Self {
            mode: Mode::Live,
            // Drawn when a sandbox asks for it: a call without one (a
            // server's `/v1/call`) costs no system call for it.
            seed: std::sync::OnceLock::new(),
        }
    }

    /// Starts recording `run` (a [`RunKey`], or a bare run id: the
    /// admin's) of `node_id` into `log`, as `recording` says
    /// (`Recording::default()`: refuse a run the log already holds, keep no
    /// spec, no lease).
    pub async fn record<'r>(
        log: Arc<dyn RunLog>,
        run: impl Into<RunKey<'r>>,
        node_id: &str,
        recording: Recording<'_>,
    ) -> Result<Self, RunLogError> {
        let run = run.into();
        let seed = RunSeed::fresh();
        let begin = BeginRun {
            run,
            node_id,
            seed,
            existing: recording.existing,
            spec: recording.spec,
            lease: recording.lease,
        };
        let fence = log.begin(&begin).await?;
        Ok(Self {
            mode: Mode::Record {
                log,
                tenant: run.tenant.into(),
                run_id: run.run_id.into(),
                fence,
                flushed: 0,
                resumed: None,
            },
            seed: seed.into(),
        })
    }

    /// Resumes `run`, a run that stopped before its end: its committed
    /// calls are served from `log` exactly as on replay, the first call past
    /// them goes live, and the run goes on recording under its key (any
    /// recorder still writing it is fenced off). A finished run is refused.
    pub async fn resume<'r>(
        log: Arc<dyn RunLog>,
        run: impl Into<RunKey<'r>>,
        lease: Option<Lease<'_>>,
    ) -> Result<Self, RunLogError> {
        let (fence, run) = log.resume(run.into(), lease).await?;
        Ok(Self::resumed(log, fence, run))
    }

    /// The journal of a run already taken over (by [`RunLog::claim`] or
    /// [`RunLog::resume`]) under `fence`.
    pub fn resumed(log: Arc<dyn RunLog>, fence: Fence, run: RecordedRun) -> Self {
        Self {
            seed: run.seed.into(),
            mode: Mode::Record {
                log,
                tenant: run.tenant.clone(),
                run_id: run.run_id.clone(),
                fence,
                flushed: 0,
                resumed: Some(Box::new(run)),
            },
        }
    }

    /// Loads `run` (a [`RunKey`], or a bare run id: the admin's) from
    /// `log` for replay.
    pub async fn replay<'r>(
        log: &dyn RunLog,
        run: impl Into<RunKey<'r>>,
    ) -> Result<Self, RunLogError> {
        let run = log.load(run.into()).await?;
        Ok(Self {
            seed: run.seed.into(),
            mode: Mode::Replay { run: Box::new(run) },
        })
    }

    /// The seed and clock the run's sandbox gets.
    pub fn seed(&self) -> RunSeed {
        *self.seed.get_or_init(RunSeed::fresh)
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

    /// The recorded run calls are served from: on replay, and on resume
    /// for the calls it committed.
    fn recorded(&self) -> Option<&RecordedRun> {
        match &self.mode {
            Mode::Replay { run } => Some(run),
            Mode::Record {
                resumed: Some(run), ..
            } => Some(run),
            _ => None,
        }
    }

    /// Whether call `index` is served from a log.
    pub(crate) fn serves_from_log(&self, index: u32) -> bool {
        match &self.mode {
            Mode::Replay { .. } => true,
            Mode::Record {
                resumed: Some(run), ..
            } => (index as usize) < run.calls.len(),
            _ => false,
        }
    }

    /// Whether this journal resumes a run.
    pub(crate) fn is_resume(&self) -> bool {
        matches!(
            self.mode,
            Mode::Record {
                resumed: Some(_),
                ..
            }
        )
    }

    /// On resume, after the last committed call was served: the run's
    /// `events` so far are the ones the log holds (a resumed pack runs the
    /// same way up to there), so only those after are committed.
    pub(crate) fn caught_up(&mut self, index: u32, events: usize) {
        if let Mode::Record {
            resumed: Some(run),
            flushed,
            ..
        } = &mut self.mode
            && index as usize + 1 == run.calls.len()
        {
            *flushed = events;
        }
    }

    /// Serves call `index` from the log, if it is the recorded one.
    pub(crate) fn replay_call(
        &self,
        node_id: &str,
        index: u32,
        entry: Entry,
        request: &Value,
    ) -> Replayed {
        let Some(run) = self.recorded() else {
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
        let run = self.recorded()?;
        let recorded = run.calls.len() as u32;
        // A resumed run, or a finished one replayed, made every call it had.
        let complete = run.status != RunStatus::Running || self.is_resume();
        (complete && made < recorded).then(|| {
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
            r.log.commit_call(r.run, r.fence, call, &r.new).await?;
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
            r.log.finish(r.run, r.fence, &r.new, status, output).await?;
            *r.flushed += r.new.len();
        }
        Ok(())
    }

    /// When recording: the log, and the events not yet committed.
    fn recording<'a>(&'a mut self, events: &EventLog) -> Option<Write<'a>> {
        match &mut self.mode {
            Mode::Record {
                log,
                tenant,
                run_id,
                fence,
                flushed,
                ..
            } => Some(Write {
                log: &**log,
                run: RunKey::new(tenant, run_id),
                fence: *fence,
                new: events.since(*flushed),
                flushed,
            }),
            _ => None,
        }
    }
}

/// A recording journal's view for one write.
struct Write<'a> {
    log: &'a dyn RunLog,
    run: RunKey<'a>,
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
