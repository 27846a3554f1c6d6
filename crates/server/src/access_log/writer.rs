//! Where the log lines go: appended to a buffer in memory, written to
//! stderr in batches by a thread of its own. A request never waits on a
//! write (one `write` per line on a worker was a tenth of a call's CPU,
//! `docs/src/performance.md`), and an idle server wakes nothing: the thread
//! sleeps until a line comes, then gathers for [`BATCH`] and writes them
//! at once. Nothing is dropped: past [`MAX_PENDING`] bytes the request that
//! overflows writes the batch itself, and [`LineWriter::flush`] writes
//! what is left at shutdown. (tracing-appender's non-blocking writer does
//! this for `tracing`; this server writes its lines without `tracing`.)

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// How long the thread gathers lines after the first before writing.
const BATCH: Duration = Duration::from_millis(20);
/// The most bytes kept waiting; past it the appender writes them.
const MAX_PENDING: usize = 1 << 20;

/// Appends lines; cheap to clone.
#[derive(Debug, Clone)]
pub struct LineWriter(Arc<Shared>);

#[derive(Debug, Default)]
struct Shared {
    pending: Mutex<String>,
    /// Held while a batch is taken and written, so batches keep their order.
    out: Mutex<()>,
    ready: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic mid-append leaves a whole string: go on with it.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LineWriter {
    /// A writer and its thread, which lives as long as the process.
    pub fn spawn() -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let thread = shared.clone();
        std::thread::Builder::new()
            .name("callai-log".into())
            .spawn(move || thread.run())?;
        Ok(Self(shared))
    }

    /// Queues `line` (a newline is added).
    pub fn append(&self, line: &str) {
        let mut pending = lock(&self.0.pending);
        let was_empty = pending.is_empty();
        pending.push_str(line);
        pending.push('\n');
        if pending.len() > MAX_PENDING {
            drop(pending);
            self.flush();
            return;
        }
        drop(pending);
        if was_empty {
            self.0.ready.notify_one();
        }
    }

    /// Writes every line queued so far.
    pub fn flush(&self) {
        self.0.write_batch();
    }
}

impl Shared {
    fn run(&self) {
        loop {
            let mut pending = lock(&self.pending);
            while pending.is_empty() {
                pending = self
                    .ready
                    .wait(pending)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            drop(pending);
            std::thread::sleep(BATCH);
            self.write_batch();
        }
    }

    fn write_batch(&self) {
        let _order = lock(&self.out);
        let batch = std::mem::take(&mut *lock(&self.pending));
        if !batch.is_empty() {
            write_out(&batch);
        }
    }
}

fn write_out(text: &str) {
    // A closed or full stderr loses the lines, never the request.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}
