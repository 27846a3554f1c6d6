//! Per-run limits on untrusted packs: linear memory (a `ResourceLimiter`),
//! wall-clock time (epoch deadline for wasm, a timer for provider waits),
//! fuel, and which limit stopped a run.

use callai_engine::config::Limits;
use std::time::{Duration, Instant};
use wasmtime::ResourceLimiter;

/// The most table elements a pack's tables may grow to.
const MAX_TABLE_ELEMENTS: usize = 100_000;

/// A limit that stopped a run: its config key and what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitHit {
    /// The config key, e.g. `limits.memoryBytes`.
    pub key: &'static str,
    /// What the pack tried.
    pub message: String,
}

/// Enforces `limits.memoryBytes` and records the first limit a run hits.
#[derive(Debug)]
pub struct RunLimiter {
    memory_bytes: usize,
    deadline: Instant,
    wall: Duration,
    /// The first limit hit, if any.
    pub hit: Option<LimitHit>,
}

impl RunLimiter {
    /// Limits for one run starting now.
    pub fn new(limits: &Limits) -> Self {
        let wall = Duration::from_millis(limits.wall_ms);
        Self {
            memory_bytes: usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX),
            deadline: Instant::now() + wall,
            wall,
            hit: None,
        }
    }

    /// Records `hit` unless an earlier limit was hit first.
    pub fn record(&mut self, key: &'static str, message: String) {
        self.hit.get_or_insert(LimitHit { key, message });
    }

    /// Called at each epoch tick while wasm runs: past the deadline, stop.
    pub fn past_deadline(&mut self) -> bool {
        let past = Instant::now() >= self.deadline;
        if past {
            self.record_wall();
        }
        past
    }

    /// Records that the wall-clock limit stopped the run.
    pub fn record_wall(&mut self) {
        let message = format!("the run took longer than {} ms", self.wall.as_millis());
        self.record("limits.wallMs", message);
    }
}

impl ResourceLimiter for RunLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            let message = format!(
                "linear memory would grow from {current} to {desired} bytes, over {}",
                self.memory_bytes
            );
            self.record("limits.memoryBytes", message.clone());
            // An error traps the pack at once, rather than handing its
            // allocator a failure it would turn into an abort.
            return Err(wasmtime::Error::msg(message));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_over_the_limit_is_refused_and_recorded() {
        let limits = Limits {
            memory_bytes: 2 << 20,
            ..Limits::default()
        };
        let mut l = RunLimiter::new(&limits);
        assert!(l.memory_growing(0, 1 << 20, None).unwrap());
        assert!(l.memory_growing(1 << 20, 3 << 20, None).is_err());
        assert_eq!(l.hit.as_ref().unwrap().key, "limits.memoryBytes");
    }

    #[test]
    fn the_first_limit_hit_wins() {
        let mut l = RunLimiter::new(&Limits {
            wall_ms: 1,
            ..Limits::default()
        });
        std::thread::sleep(Duration::from_millis(5));
        assert!(l.past_deadline());
        l.record("limits.fuel", "later".into());
        assert_eq!(l.hit.unwrap().key, "limits.wallMs");
    }
}
