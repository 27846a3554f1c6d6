//! A run's sandbox sees no real clock and no real randomness: its clocks
//! and random sources are derived from the run's [`RunSeed`], which is
//! recorded with the run, so a replay sees the same values, and a pack
//! cannot tell how long the host took (or behave differently on replay).
//! Every read advances the clocks by one microsecond, so time moves forward.

use callai_engine::runlog::RunSeed;
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder};

/// The most random bytes one `get-random-bytes` may ask for.
const MAX_RANDOM_BYTES: u64 = 1 << 20;

/// A wall clock that starts at the run's recorded time.
struct RunWallClock {
    start: Duration,
    reads: AtomicU64,
}

impl HostWallClock for RunWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_micros(1)
    }

    fn now(&self) -> Duration {
        self.start + Duration::from_micros(self.reads.fetch_add(1, Ordering::Relaxed))
    }
}

/// A monotonic clock that starts at zero.
#[derive(Default)]
struct RunMonotonicClock {
    reads: AtomicU64,
}

impl HostMonotonicClock for RunMonotonicClock {
    fn resolution(&self) -> u64 {
        1_000
    }

    fn now(&self) -> u64 {
        self.reads.fetch_add(1, Ordering::Relaxed) * 1_000
    }
}

/// The WASI context of one run: nothing granted (no preopens, no env, no
/// args, no sockets, stdio closed), and clocks and random sources from
/// `seed`.
pub(super) fn sandbox(seed: RunSeed, stdio: &crate::stdio::PackStdio) -> WasiCtx {
    let derived = |n: u64| seed.seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    WasiCtxBuilder::new()
        .wall_clock(RunWallClock {
            start: Duration::from_millis(seed.clock_ms),
            reads: AtomicU64::new(0),
        })
        .monotonic_clock(RunMonotonicClock::default())
        .secure_random(StdRng::seed_from_u64(derived(1)))
        .insecure_random(StdRng::seed_from_u64(derived(2)))
        .insecure_random_seed(u128::from(derived(3)) << 64 | u128::from(derived(4)))
        .max_random_size(MAX_RANDOM_BYTES)
        .stdout(stdio.stdout.clone())
        .stderr(stdio.stderr.clone())
        .build()
}
