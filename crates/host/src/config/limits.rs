//! `[limits]`: the per-run bounds on an untrusted pack.

use super::{ConfigError, in_range};
use serde::Deserialize;

/// `[limits]`: what one run of an untrusted pack may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Limits {
    /// Linear memory per run.
    pub memory_bytes: u64,
    /// Wall-clock time per run, provider waits included.
    pub wall_ms: u64,
    /// Fuel per run: a bound on the wasm instructions it may execute.
    pub fuel: u64,
    /// ctx.callAI calls per run.
    pub max_calls_per_run: u32,
    /// The largest request a pack may send (its JSON, or the typed request's text).
    pub max_request_bytes: u64,
    /// The largest reply text a provider may return.
    pub max_response_bytes: u64,
    /// Runs at once; more wait for a slot (the pooling allocator's size).
    pub max_concurrent_runs: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 << 20,
            wall_ms: 300_000,
            fuel: 20_000_000_000,
            max_calls_per_run: 256,
            max_request_bytes: 1 << 20,
            max_response_bytes: 4 << 20,
            max_concurrent_runs: 1000,
        }
    }
}

impl Limits {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let ranges: [(&str, u64, u64, u64); 7] = [
            ("limits.memoryBytes", self.memory_bytes, 1 << 20, 4 << 30),
            ("limits.wallMs", self.wall_ms, 1, 86_400_000),
            ("limits.fuel", self.fuel, 1, u64::MAX),
            (
                "limits.maxCallsPerRun",
                self.max_calls_per_run.into(),
                1,
                100_000,
            ),
            ("limits.maxRequestBytes", self.max_request_bytes, 1, 1 << 30),
            (
                "limits.maxResponseBytes",
                self.max_response_bytes,
                1,
                1 << 30,
            ),
            (
                "limits.maxConcurrentRuns",
                self.max_concurrent_runs.into(),
                1,
                10_000,
            ),
        ];
        ranges
            .into_iter()
            .try_for_each(|(key, value, lo, hi)| in_range(key, value, lo, hi))
    }
}
