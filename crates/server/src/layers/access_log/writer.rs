//! Where the log lines go: appended to a buffer in memory, written to
//! stderr in batches by a thread of their own, so a slow stderr (a pipe to
//! a busy journal) does not hold a request on a worker, and an idle server
//! wakes nothing: the thread sleeps until a line comes, then gathers for
//! [`BATCH`] and writes them at once, and goes on doing so while lines keep
//! coming; a batch that finds none puts it back to sleep. (Woken for each
//! batch instead, a host with one call in flight woke it for every line:
//! a futex wake-up on the worker and two context switches a call.)
//! Nothing is dropped: past
//! [`MAX_PENDING`] bytes the request that overflows writes the batch
//! itself, and [`LineWriter::close`] writes what is left at shutdown.
//! (tracing-appender's non-blocking writer does this for `tracing`; this
//! server writes its lines without `tracing`.)

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// How long the thread gathers lines after the first before writing.
const BATCH: Duration = Duration::from_millis(20);
/// The most bytes kept waiting; past it the appender writes them.
const MAX_PENDING: usize = 1 << 20;
/// The largest batch whose buffer is kept for the next: lines are then
/// appended into room already made, not into a buffer grown from empty
/// each batch; a burst's larger buffer is let go.
const KEEP_BUFFER: usize = 64 << 10;

/// Appends lines; cheap to clone.
#[derive(Debug, Clone)]
pub struct LineWriter(Arc<Shared>);

struct Shared {
    pending: Mutex<String>,
    /// Where batches go; held while one is taken and written, so batches
    /// keep their order.
    out: Mutex<Output>,
    ready: Condvar,
    /// The thread waits on `ready` (set and cleared under `pending`'s
    /// lock): only then does a line wake it.
    waiting: AtomicBool,
    /// Set by [`LineWriter::close`]: the thread ends, lines are written at once.
    closed: AtomicBool,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

/// Where batches go, and the buffer of the last one written, emptied,
/// which the next batch's lines go into.
struct Output {
    to: Box<dyn Write + Send>,
    spare: String,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic mid-append leaves a whole string: go on with it.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LineWriter {
    /// A writer to stderr and its thread, which lives until
    /// [`close`](Self::close).
    pub fn spawn() -> std::io::Result<Self> {
        Self::spawn_to(Box::new(std::io::stderr()))
    }

    /// A writer to `out`.
    fn spawn_to(out: Box<dyn Write + Send>) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            pending: Mutex::new(String::new()),
            out: Mutex::new(Output {
                to: out,
                spare: String::new(),
            }),
            ready: Condvar::new(),
            waiting: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        });
        let thread = shared.clone();
        std::thread::Builder::new()
            .name("callai-log".into())
            .spawn(move || thread.run())?;
        Ok(Self(shared))
    }

    /// Queues `line` (a newline is added).
    pub fn append(&self, line: &str) {
        let mut pending = lock(&self.0.pending);
        let wake = self.0.waiting.swap(false, Ordering::AcqRel);
        pending.push_str(line);
        pending.push('\n');
        if pending.len() > MAX_PENDING || self.0.closed.load(Ordering::Acquire) {
            drop(pending);
            self.flush();
            return;
        }
        drop(pending);
        if wake {
            self.0.ready.notify_one();
        }
    }

    /// Writes every line queued so far.
    pub fn flush(&self) {
        self.0.write_batch();
    }

    /// Writes every line queued so far and ends the thread; a line
    /// appended later is written at once.
    pub fn close(&self) {
        self.0.closed.store(true, Ordering::Release);
        self.flush();
        // Under the lock, so the thread is either waiting or will see it.
        let _pending = lock(&self.0.pending);
        self.0.ready.notify_all();
    }
}

impl Shared {
    fn run(&self) {
        loop {
            let mut pending = lock(&self.pending);
            while pending.is_empty() {
                if self.closed.load(Ordering::Acquire) {
                    return;
                }
                self.waiting.store(true, Ordering::Release);
                pending = self
                    .ready
                    .wait(pending)
                    .unwrap_or_else(PoisonError::into_inner);
                self.waiting.store(false, Ordering::Release);
            }
            drop(pending);
            // A batch every BATCH while lines keep coming.
            loop {
                std::thread::sleep(BATCH);
                if !self.write_batch() {
                    break;
                }
            }
        }
    }

    /// Writes the lines queued; whether there were any.
    fn write_batch(&self) -> bool {
        let mut out = lock(&self.out);
        let spare = std::mem::take(&mut out.spare);
        let mut batch = std::mem::replace(&mut *lock(&self.pending), spare);
        let wrote = !batch.is_empty();
        if wrote {
            // A closed stderr loses the lines, never the request.
            let _ = out.to.write_all(batch.as_bytes());
            let _ = out.to.flush();
        }
        if batch.capacity() <= KEEP_BUFFER {
            batch.clear();
            out.spare = batch;
        }
        wrote
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink the test reads back.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            lock(&self.0).extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Sink {
        fn text(&self) -> String {
            String::from_utf8(lock(&self.0).clone()).unwrap()
        }
    }

    #[test]
    fn every_line_comes_out_whole_and_in_each_appenders_order() {
        let sink = Sink::default();
        let writer = LineWriter::spawn_to(Box::new(sink.clone())).unwrap();
        let appenders: Vec<_> = (0..4)
            .map(|t| {
                let writer = writer.clone();
                std::thread::spawn(move || {
                    for i in 0..500 {
                        writer.append(&format!("t{t} line {i}"));
                    }
                })
            })
            .collect();
        appenders.into_iter().for_each(|a| a.join().unwrap());
        writer.flush();
        let text = sink.text();
        assert_eq!(text.lines().count(), 2000);
        for t in 0..4 {
            let mine: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with(&format!("t{t} ")))
                .collect();
            let want: Vec<String> = (0..500).map(|i| format!("t{t} line {i}")).collect();
            assert_eq!(mine, want, "appender {t}'s lines, in order");
        }
    }

    #[test]
    fn a_batchs_buffer_takes_the_next_lines_unless_a_burst_grew_it() {
        let sink = Sink::default();
        let writer = LineWriter::spawn_to(Box::new(sink.clone())).unwrap();
        writer.append("first");
        writer.flush();
        writer.append("second");
        writer.flush();
        // The first batch's buffer, emptied, is where lines now go (the
        // thread's batches only swap the two kept buffers).
        assert!(lock(&writer.0.pending).capacity() >= "first\n".len());
        let burst = "x".repeat(2 * KEEP_BUFFER);
        writer.append(&burst);
        writer.flush();
        writer.append("after");
        writer.flush();
        assert!(lock(&writer.0.pending).capacity() <= KEEP_BUFFER);
        assert!(lock(&writer.0.out).spare.capacity() <= KEEP_BUFFER);
        assert_eq!(sink.text(), format!("first\nsecond\n{burst}\nafter\n"));
        writer.close();
    }

    #[test]
    fn the_thread_writes_without_a_flush_and_an_overflow_is_written_at_once() {
        let sink = Sink::default();
        let writer = LineWriter::spawn_to(Box::new(sink.clone())).unwrap();
        writer.append("one");
        // The thread's batch: polled for at most 5 s (it takes ~20 ms).
        for _ in 0..500 {
            if sink.text() == "one\n" {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(sink.text(), "one\n");
        // Past a megabyte waiting, the appender writes it itself.
        let long = "x".repeat(MAX_PENDING + 1);
        writer.append(&long);
        assert_eq!(
            sink.text().len(),
            4 + MAX_PENDING + 2,
            "written before append returned"
        );
        // Closed: the thread ends, and a later line is written at once.
        writer.close();
        writer.append("late");
        assert!(sink.text().ends_with("\nlate\n"));
    }
}
