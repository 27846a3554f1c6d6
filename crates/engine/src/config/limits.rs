//! `[limits]`: the bounds on everything an untrusted pack, or a provider
//! the host does not control, can make the host spend.

use super::{ConfigError, in_range};
use serde::{Deserialize, Serialize};

/// `[limits]`: what one run of an untrusted pack may use, and what the host
/// reads from a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Limits {
    /// Linear memory per run.
    pub memory_bytes: u64,
    /// Wall-clock time per run, provider waits and host work included.
    pub wall_ms: u64,
    /// Fuel per run: a bound on the wasm instructions it may execute.
    pub fuel: u64,
    /// ctx.callAI calls per run.
    pub max_calls_per_run: u32,
    /// The largest request a pack may send, counted on its wire JSON.
    pub max_request_bytes: u64,
    /// The largest reply text a provider may return.
    pub max_response_bytes: u64,
    /// The largest response body the host reads from a provider; the rest
    /// is never read.
    pub max_provider_body_bytes: u64,
    /// Log text a run may leave (`pack.log` events); past it, lines are
    /// counted and dropped.
    pub max_log_bytes: u64,
    /// Log lines a run may leave.
    pub max_log_lines: u32,
    /// The most work one reply's schema check may take, in rule
    /// applications, judged from the schema before any reply arrives: a
    /// schema whose cost could pass it is refused with `validation_error`
    /// on `responseSchema`.
    pub max_schema_work: u64,
    /// What the schemas kept compiled for reuse may hold in memory, over
    /// every run and call (each charged what a compiled schema was
    /// measured to hold, not its text); one caller's new schemas evict its
    /// own first.
    pub schema_cache_bytes: u64,
    /// Runs at once; more wait for a slot (the pooling allocator's size).
    pub max_concurrent_runs: u32,
    /// The largest image a message may carry inline (a `data:` URL's
    /// bytes, decoded); refused with `limit_exceeded` naming the image.
    pub max_image_bytes: u64,
    /// The most images one request may carry, over all its messages;
    /// refused with `limit_exceeded` naming `messages`.
    pub max_images: u32,
    /// The most tools one request may offer; refused with
    /// `limit_exceeded` naming `tools`.
    pub max_tools: u32,
    /// How long a call of `serve` may wait for room in its caller's rate
    /// limits (`[[tenants.NAME.limits]]`, a key's `limits`) before it is
    /// refused; 0: refused at once (`429` with `Retry-After`).
    pub queue_ms: u64,
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
            max_provider_body_bytes: 16 << 20,
            max_log_bytes: 1 << 20,
            max_log_lines: 10_000,
            max_schema_work: 1_000_000,
            schema_cache_bytes: 64 << 20,
            max_concurrent_runs: 1000,
            max_image_bytes: 5 << 20,
            max_images: 100,
            max_tools: 128,
            queue_ms: 0,
        }
    }
}

impl Limits {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let ranges: [(&str, u64, u64, u64); 16] = [
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
                "limits.maxProviderBodyBytes",
                self.max_provider_body_bytes,
                1024,
                1 << 30,
            ),
            ("limits.maxLogBytes", self.max_log_bytes, 0, 1 << 30),
            (
                "limits.maxLogLines",
                self.max_log_lines.into(),
                0,
                10_000_000,
            ),
            ("limits.maxSchemaWork", self.max_schema_work, 1, 1 << 40),
            (
                "limits.schemaCacheBytes",
                self.schema_cache_bytes,
                0,
                1 << 30,
            ),
            (
                "limits.maxConcurrentRuns",
                self.max_concurrent_runs.into(),
                1,
                10_000,
            ),
            ("limits.maxImageBytes", self.max_image_bytes, 1, 1 << 30),
            ("limits.maxImages", self.max_images.into(), 1, 10_000),
            ("limits.maxTools", self.max_tools.into(), 1, 10_000),
            ("limits.queueMs", self.queue_ms, 0, 600_000),
        ];
        ranges
            .into_iter()
            .try_for_each(|(key, value, lo, hi)| in_range(key, value, lo, hi))
    }
}
