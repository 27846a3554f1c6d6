//! The thread that advances the engine's epoch, which stops wasm that
//! computes past its wall-clock limit and makes a busy pack yield its
//! worker. It ticks only while a run holds a store: a host with no run in
//! flight (idle, or serving `/v1/call` alone) makes no wake-ups at all.
//!
//! Written by hand: wasmtime leaves the ticking to its embedder, and no
//! crate ticks an engine on demand.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread::Thread;
use std::time::Duration;

/// How often the epoch advances while a run is in flight: the granularity of
/// the wall-clock limit and how often a busy pack yields its worker.
const EPOCH_TICK: Duration = Duration::from_millis(1);

/// A handle on the epoch thread of one engine; clones share it. The thread
/// ends once the engine and every handle are gone.
#[derive(Clone)]
pub(crate) struct EpochTicker {
    shared: Arc<Shared>,
}

struct Shared {
    /// Runs holding a store.
    running: AtomicUsize,
    /// Ticks made, for the tests.
    ticks: AtomicU64,
    thread: Thread,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Wakes the parked thread to see that nothing is left to tick for.
        self.thread.unpark();
    }
}

/// Held by a run while its store lives: the epoch advances until the last
/// one is dropped.
pub(crate) struct Ticking {
    shared: Arc<Shared>,
}

impl Drop for Ticking {
    fn drop(&mut self) {
        self.shared.running.fetch_sub(1, Ordering::Release);
    }
}

impl EpochTicker {
    /// Starts the (parked) epoch thread of `engine`.
    pub(crate) fn start(engine: &wasmtime::Engine) -> std::io::Result<Self> {
        let engine = engine.weak();
        let (tx, rx) = std::sync::mpsc::channel::<Weak<Shared>>();
        let thread = std::thread::Builder::new()
            .name("callai-epoch".into())
            .spawn(move || {
                let Ok(shared) = rx.recv() else { return };
                tick_while_running(&engine, &shared);
            })?;
        let shared = Arc::new(Shared {
            running: AtomicUsize::new(0),
            ticks: AtomicU64::new(0),
            thread: thread.thread().clone(),
        });
        // The thread cannot have ended: it waits on this channel.
        let _ = tx.send(Arc::downgrade(&shared));
        Ok(Self { shared })
    }

    /// Keeps the epoch advancing until the returned guard is dropped.
    pub(crate) fn hold(&self) -> Ticking {
        if self.shared.running.fetch_add(1, Ordering::AcqRel) == 0 {
            self.shared.thread.unpark();
        }
        Ticking {
            shared: self.shared.clone(),
        }
    }
}

fn tick_while_running(engine: &wasmtime::EngineWeak, shared: &Weak<Shared>) {
    loop {
        let Some(state) = shared.upgrade() else {
            return;
        };
        if state.running.load(Ordering::Acquire) == 0 {
            drop(state);
            // An unpark between the load above and this park is not lost:
            // it makes this park return at once.
            std::thread::park();
            continue;
        }
        let Some(engine) = engine.upgrade() else {
            return;
        };
        engine.increment_epoch();
        state.ticks.fetch_add(1, Ordering::Relaxed);
        drop((engine, state));
        std::thread::sleep(EPOCH_TICK);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticks_over(ticker: &EpochTicker, wait: Duration) -> u64 {
        let before = ticker.shared.ticks.load(Ordering::Relaxed);
        std::thread::sleep(wait);
        ticker.shared.ticks.load(Ordering::Relaxed) - before
    }

    #[test]
    fn parks_with_no_run_and_ticks_while_one_is_held() {
        let engine = wasmtime::Engine::default();
        let ticker = EpochTicker::start(&engine).unwrap();
        let wait = Duration::from_millis(60);
        assert_eq!(ticks_over(&ticker, wait), 0, "ticked with no run");
        let first = ticker.hold();
        let second = ticker.clone().hold();
        assert!(ticks_over(&ticker, wait) > 0, "did not tick for a run");
        drop(first);
        assert!(ticks_over(&ticker, wait) > 0, "stopped with a run left");
        drop(second);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(ticks_over(&ticker, wait), 0, "ticked after the last run");
        let _again = ticker.hold();
        assert!(ticks_over(&ticker, wait) > 0, "did not wake for a new run");
    }
}
