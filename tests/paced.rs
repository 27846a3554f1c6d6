//! Victims started at a steady pace beside attackers, as the isolation
//! benchmarks run them, and the percentiles of their latencies.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// Starts `count` victims, `victim()` each, one every `pace`, then stops
/// `attackers` (through `stop`, waiting up to 30 s for each); the victims'
/// latencies, sorted.
pub async fn victims<F, Fut>(
    count: usize,
    pace: Duration,
    mut victim: F,
    stop: &Arc<AtomicBool>,
    attackers: Vec<JoinHandle<()>>,
) -> Vec<Duration>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut runs = Vec::with_capacity(count);
    for _ in 0..count {
        let run = victim();
        runs.push(tokio::spawn(async move {
            let start = Instant::now();
            run.await;
            start.elapsed()
        }));
        tokio::time::sleep(pace).await;
    }
    let mut latencies = Vec::with_capacity(count);
    for r in runs {
        latencies.push(r.await.unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    for a in attackers {
        let _ = tokio::time::timeout(Duration::from_secs(30), a).await;
    }
    latencies.sort();
    latencies
}

/// The `p` percentile (0..=1) of `sorted`.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Waits, when less than `room` of the current minute is left, until the
/// next one begins: so that a test of a per-minute limit runs within one
/// window.
pub async fn minute_with(room: Duration) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis() as u64;
    let left = 60_000 - now % 60_000;
    if Duration::from_millis(left) < room {
        tokio::time::sleep(Duration::from_millis(left + 50)).await;
    }
}
