//! Traces kept in the run log: each trace the store keeps is also sent to a
//! writer task, which writes what has queued in up to [`GATHER`] in one
//! transaction (so a busy server writes a few a second, not one per call).
//! A reader flushes it first, which cuts the gathering short, so a listing
//! sees every call that ended before it was asked for.

use super::record::CallTrace;
use callai_engine::RunLog;
use callai_engine::runlog::{TraceRow, TraceTag};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{Notify, mpsc, oneshot};

/// Traces queued for the log at most; past it, a trace stays in memory
/// only (said on stderr), rather than memory growing behind a slow log.
const QUEUE: usize = 16_384;
/// The most traces one transaction adds to those waiting.
const BATCH: usize = 512;
/// How long a batch nobody waits on gathers traces before it is written.
const GATHER: std::time::Duration = std::time::Duration::from_millis(50);
/// How long traces the log refused wait before they are tried again.
const RETRY: std::time::Duration = std::time::Duration::from_secs(1);

enum Write {
    Trace(Arc<CallTrace>),
    /// Answered once every trace queued before it was written, or with
    /// why some are not.
    Flush(oneshot::Sender<Result<(), String>>),
}

/// The sending end of the writer task.
#[derive(Debug)]
pub(super) struct TraceWriter {
    queue: mpsc::Sender<Write>,
    /// The log, for reading traces back.
    log: Arc<dyn RunLog>,
    /// Traces the full queue turned away.
    turned_away: AtomicU64,
    /// Woken when a reader waits on a flush (a trace queued wakes nobody
    /// while a batch gathers).
    flush_asked: Arc<Notify>,
}

impl TraceWriter {
    /// A writer into `log`, when it keeps traces; its task runs on the
    /// current tokio runtime until the writer is dropped.
    pub(super) fn spawn(log: Arc<dyn RunLog>) -> Option<Self> {
        log.traces()?;
        let (queue, rx) = mpsc::channel(QUEUE);
        let flush_asked = Arc::new(Notify::new());
        tokio::spawn(write_queued(log.clone(), rx, flush_asked.clone()));
        Some(Self {
            queue,
            log,
            turned_away: AtomicU64::new(0),
            flush_asked,
        })
    }

    /// The log it writes to.
    pub(super) fn log(&self) -> &dyn callai_engine::runlog::TraceLog {
        self.log.traces().expect("checked at spawn")
    }

    /// Queues `trace` for the log.
    pub(super) fn send(&self, trace: Arc<CallTrace>) {
        if self.queue.try_send(Write::Trace(trace)).is_err() {
            let n = self.turned_away.fetch_add(1, Ordering::Relaxed);
            if n.is_multiple_of(1000) {
                eprintln!(
                    "callai serve: the run log is behind; {} call traces were kept in memory only",
                    n + 1
                );
            }
        }
    }

    /// Waits until every trace queued before it is written; or says why
    /// some are not (the log refused them: they are tried again).
    pub(super) async fn flush(&self) -> Result<(), String> {
        let (done, written) = oneshot::channel();
        if self.queue.send(Write::Flush(done)).await.is_err() {
            return Err("the run log's trace writer stopped".into());
        }
        self.flush_asked.notify_one();
        written
            .await
            .unwrap_or_else(|_| Err("the run log's trace writer stopped".into()))
    }
}

/// What wakes the writer.
enum Wake {
    Queued(Write),
    /// Time to try the traces that failed again.
    Retry,
    /// Every sender is gone.
    Closed,
}

/// Writes what is queued, a batch at a time, until every sender is gone.
/// A batch the log refused is kept and tried again (with what queued
/// since) a second later, or sooner when more comes; past [`QUEUE`]
/// waiting, the oldest are given up, as stderr says.
async fn write_queued(
    log: Arc<dyn RunLog>,
    mut rx: mpsc::Receiver<Write>,
    flush_asked: Arc<Notify>,
) {
    let mut rows: Vec<TraceRow> = Vec::new();
    let mut flushes = Vec::new();
    let mut failed: Option<String> = None;
    loop {
        let wake = if failed.is_some() {
            tokio::select! {
                w = rx.recv() => w.map_or(Wake::Closed, Wake::Queued),
                () = tokio::time::sleep(RETRY) => Wake::Retry,
            }
        } else {
            rx.recv().await.map_or(Wake::Closed, Wake::Queued)
        };
        let closed = matches!(wake, Wake::Closed);
        let next = match wake {
            Wake::Queued(w) => Some(w),
            Wake::Retry | Wake::Closed => None,
        };
        let room = rows.len() + BATCH;
        take_queued(&mut rx, next, &mut rows, &mut flushes, room);
        if flushes.is_empty() && !closed && rows.len() < room {
            // While nobody waits on this batch, let more join it, so that
            // a busy server writes a few transactions a second, not one a
            // call; meanwhile only a reader's flush wakes the writer, not
            // each trace queued.
            tokio::select! {
                () = flush_asked.notified() => {}
                () = tokio::time::sleep(GATHER) => {}
            }
            let more = rx.try_recv().ok();
            take_queued(&mut rx, more, &mut rows, &mut flushes, room);
        }
        failed = write(&log, &mut rows).await.err();
        let said = match &failed {
            None => Ok(()),
            Some(e) => Err(format!(
                "{} call traces are not written yet: {e}",
                rows.len()
            )),
        };
        for done in flushes.drain(..) {
            let _ = done.send(said.clone());
        }
        if closed {
            return;
        }
    }
}

/// Takes `next` and what is queued behind it, until `rows` holds `room`.
fn take_queued(
    rx: &mut mpsc::Receiver<Write>,
    mut next: Option<Write>,
    rows: &mut Vec<TraceRow>,
    flushes: &mut Vec<oneshot::Sender<Result<(), String>>>,
    room: usize,
) {
    while let Some(write) = next.take() {
        match write {
            Write::Trace(trace) => rows.push(row(&trace)),
            Write::Flush(done) => flushes.push(done),
        }
        if rows.len() < room {
            next = rx.try_recv().ok();
        }
    }
}

/// Writes `rows` (emptied when written); a refusal is said on stderr, and
/// past [`QUEUE`] rows waiting the oldest are given up.
async fn write(log: &Arc<dyn RunLog>, rows: &mut Vec<TraceRow>) -> Result<(), String> {
    if rows.is_empty() {
        return Ok(());
    }
    let traces = log.traces().expect("checked at spawn");
    match traces.put_traces(rows).await {
        Ok(()) => {
            rows.clear();
            Ok(())
        }
        Err(e) => {
            eprintln!(
                "callai serve: {} call traces were not written to the run log (tried again in a second): {e}",
                rows.len()
            );
            if rows.len() > QUEUE {
                let excess = rows.len() - QUEUE;
                rows.drain(..excess);
                eprintln!(
                    "callai serve: gave up writing {excess} call traces to the run log (kept in memory only)"
                );
            }
            Err(match e {
                callai_engine::RunLogError::Storage(said) => said,
                other => other.to_string(),
            })
        }
    }
}

/// `trace` as the log keeps it: its JSON, a tag for each value a listing
/// may filter on, and what it adds to its minute's sums.
pub(super) fn row(trace: &CallTrace) -> TraceRow {
    let mut tags = vec![
        TraceTag::Tenant(&trace.tenant).key(),
        TraceTag::Endpoint(trace.endpoint).key(),
        TraceTag::Outcome(trace.outcome).key(),
    ];
    if let Some(run) = &trace.run_id {
        tags.push(TraceTag::Run(run).key());
    }
    if let Some(route) = &trace.route {
        tags.push(TraceTag::Model(route).key());
    }
    for r in &trace.requests {
        tags.push(TraceTag::Provider(&r.provider).key());
        tags.push(TraceTag::Model(&r.model).key());
    }
    tags.sort_unstable();
    tags.dedup();
    TraceRow {
        id: trace.id.to_string(),
        tenant: trace.tenant.to_string(),
        started_ms: trace.started_ms,
        ended_ms: trace.started_ms + trace.duration_ms,
        attempts: trace.attempts.count,
        tags,
        json: serde_json::to_string(trace).expect("a trace serializes"),
        usage: trace.usage(),
    }
}
