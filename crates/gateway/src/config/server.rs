//! `[server]`, `[runlog]` and `[cache]`: what `callai serve` reads (the
//! run log and the cache `callai run` too).

use callai_engine::config::{ConfigError, in_range, invalid};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;

/// `[server]`: the HTTP API of `callai serve`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ServerConfig {
    /// The address to listen on.
    pub listen: String,
    /// Names a variable holding the bearer token; empty: no token, and then
    /// the server refuses to listen on a non-loopback address.
    pub token_env: String,
    /// The largest pack upload.
    pub max_pack_bytes: u64,
    /// The largest JSON request body (`/v1/runs`, `/v1/call`).
    pub max_body_bytes: u64,
    /// Runs and calls that may wait for a slot once `limits.maxConcurrentRuns`
    /// are going; past them, `503` with `Retry-After`.
    pub max_queued_runs: u32,
    /// Finished runs kept in memory for `GET /v1/runs/{id}` when no run log
    /// is set (the oldest are forgotten first).
    pub keep_runs: u32,
    /// Call traces kept in memory for `GET /v1/calls` (the oldest are
    /// forgotten first; 0 keeps none).
    pub keep_calls: u32,
    /// The most text (`[runlog] keepText`'s prompts and answers) the
    /// traces kept in memory may hold together; past it the oldest go,
    /// however few `keepCalls` would keep.
    pub keep_text_bytes: u64,
    /// On SIGTERM, how long runs in flight may go on before they are failed
    /// and every connection still open is closed.
    pub shutdown_grace_ms: u64,
    /// The whole request head must arrive within this, from its first byte.
    pub header_timeout_ms: u64,
    /// The whole request body must arrive within this, from the end of its
    /// head; past it, `408`.
    pub body_timeout_ms: u64,
    /// A keep-alive connection with no request for this long is closed.
    pub idle_timeout_ms: u64,
    /// Connections open at once; past it, new ones wait in the backlog.
    pub max_connections: u32,
    /// Pack compilations at once; more wait for a turn.
    pub max_compiles: u32,
    /// A pack whose largest function body is over this is refused before
    /// it is compiled.
    pub max_pack_function_bytes: u64,
    /// A pack whose code (every function body of every module in it) is
    /// over this is refused before it is compiled.
    pub max_pack_code_bytes: u64,
    /// Names a variable holding a token that reads `/metrics` and nothing
    /// else (for a scraper); empty: only the admin's token reads it.
    pub metrics_token_env: String,
    /// An answer, streamed or not, whose client reads none of it for this
    /// long is cut: its call is cancelled and settled.
    pub write_timeout_ms: u64,
    /// The names a server without any token answers a browser by (besides
    /// an IP literal and `localhost`): the `Host` of a request must be one
    /// of them, so that no page whose name resolves to this server (DNS
    /// rebinding) reads its answers.
    pub allowed_hosts: Vec<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            token_env: String::new(),
            max_pack_bytes: 64 << 20,
            max_body_bytes: 16 << 20,
            max_queued_runs: 1000,
            keep_runs: 10_000,
            keep_calls: 10_000,
            keep_text_bytes: 64 << 20,
            shutdown_grace_ms: 30_000,
            header_timeout_ms: 10_000,
            body_timeout_ms: 30_000,
            idle_timeout_ms: 60_000,
            max_connections: 4096,
            max_compiles: 1,
            max_pack_function_bytes: 1 << 20,
            max_pack_code_bytes: 64 << 20,
            metrics_token_env: String::new(),
            write_timeout_ms: 30_000,
            allowed_hosts: Vec::new(),
        }
    }
}

impl ServerConfig {
    /// `listen` as an address.
    pub fn listen_addr(&self) -> Result<SocketAddr, ConfigError> {
        parse_listen(&self.listen).map_err(|m| invalid("server.listen", m))
    }

    /// `shutdownGraceMs` as a duration.
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_millis(self.shutdown_grace_ms)
    }

    /// Checks every key of `[server]`, naming the one out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.listen_addr()?;
        for (key, name) in [
            ("server.tokenEnv", &self.token_env),
            ("server.metricsTokenEnv", &self.metrics_token_env),
        ] {
            if !name.is_empty() && !is_env_name(name) {
                return Err(invalid(
                    key,
                    format!("{name:?} is not an environment variable name"),
                ));
            }
        }
        in_range("server.maxPackBytes", self.max_pack_bytes, 1024, 1 << 32)?;
        in_range("server.maxBodyBytes", self.max_body_bytes, 1024, 1 << 30)?;
        in_range(
            "server.maxQueuedRuns",
            self.max_queued_runs.into(),
            0,
            1_000_000,
        )?;
        in_range("server.keepRuns", self.keep_runs.into(), 0, 10_000_000)?;
        in_range("server.keepCalls", self.keep_calls.into(), 0, 10_000_000)?;
        in_range("server.keepTextBytes", self.keep_text_bytes, 0, 1 << 40)?;
        in_range(
            "server.shutdownGraceMs",
            self.shutdown_grace_ms,
            0,
            3_600_000,
        )?;
        in_range(
            "server.headerTimeoutMs",
            self.header_timeout_ms,
            100,
            3_600_000,
        )?;
        in_range("server.bodyTimeoutMs", self.body_timeout_ms, 100, 3_600_000)?;
        in_range("server.idleTimeoutMs", self.idle_timeout_ms, 100, 3_600_000)?;
        in_range(
            "server.maxConnections",
            self.max_connections.into(),
            1,
            1_000_000,
        )?;
        in_range("server.maxCompiles", self.max_compiles.into(), 1, 1024)?;
        in_range(
            "server.maxPackFunctionBytes",
            self.max_pack_function_bytes,
            1024,
            1 << 32,
        )?;
        in_range(
            "server.maxPackCodeBytes",
            self.max_pack_code_bytes,
            1024,
            1 << 34,
        )?;
        in_range(
            "server.writeTimeoutMs",
            self.write_timeout_ms,
            100,
            3_600_000,
        )?;
        for (i, name) in self.allowed_hosts.iter().enumerate() {
            let host_name = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
            if name.is_empty() || !name.chars().all(host_name) {
                return Err(invalid(
                    &format!("server.allowedHosts[{i}]"),
                    format!(
                        "{name:?} is not a host name (no scheme, port or path: `callai.internal`)"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// An address to listen on, `IP:PORT` (`[::1]:8080` for IPv6).
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| {
        format!("{text:?} is not an address to listen on (IP:PORT, e.g. 127.0.0.1:8080)")
    })
}

/// Whether `name` can name an environment variable: a letter or `_`, then
/// letters, digits and `_`.
pub fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `[cache]`: the compiled-component cache on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct CacheConfig {
    /// The most the cache may hold; past it the least recently used
    /// compiled packs are removed.
    pub max_bytes: u64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            max_bytes: callai_host::DEFAULT_CACHE_MAX_BYTES,
        }
    }
}

impl CacheConfig {
    /// Checks every key of `[cache]`, naming the one out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        in_range("cache.maxBytes", self.max_bytes, 0, 1 << 50)
    }
}

/// `[runlog]`: where `callai serve` records its runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct RunLogConfig {
    /// An SQLite file path or a `postgres://` URL; empty: runs are not
    /// recorded by `serve`.
    pub url: String,
    /// A durable run whose host stops renewing its lease for this long is
    /// taken over by another host.
    pub lease_ms: u64,
    /// Finished runs are deleted this many days after they ended (`serve`
    /// prunes at start-up and every hour; `callai runlog prune` on demand);
    /// 0 keeps them.
    pub keep_days: u32,
    /// The most one run may record (its calls, events and each distinct
    /// schema once); a call that would pass it fails the run, naming it.
    pub max_run_bytes: u64,
    /// How long a settled `Idempotency-Key` answers its repeats.
    pub idempotency_hours: u32,
    /// Whether a call's trace keeps its prompt and answers as text (else
    /// only their SHA-256).
    pub keep_text: bool,
}

impl Default for RunLogConfig {
    fn default() -> Self {
        Self {
            url: String::new(),
            lease_ms: 10_000,
            keep_days: 30,
            max_run_bytes: 64 << 20,
            idempotency_hours: 24,
            keep_text: false,
        }
    }
}

impl RunLogConfig {
    /// `leaseMs` as a duration.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms)
    }

    /// When finished runs become prunable: `keepDays` before `now_ms`, or
    /// `None` when they are kept.
    pub fn prune_before(&self, now_ms: u64) -> Option<u64> {
        (self.keep_days > 0).then(|| now_ms.saturating_sub(u64::from(self.keep_days) * 86_400_000))
    }

    /// Checks every key of `[runlog]`, naming the one out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        in_range("runlog.leaseMs", self.lease_ms, 100, 3_600_000)?;
        in_range("runlog.keepDays", self.keep_days.into(), 0, 36_500)?;
        in_range("runlog.maxRunBytes", self.max_run_bytes, 4096, 1 << 40)?;
        in_range(
            "runlog.idempotencyHours",
            self.idempotency_hours.into(),
            1,
            8760,
        )
    }

    /// `idempotencyHours` as a duration.
    pub fn idempotency_keep(&self) -> Duration {
        Duration::from_secs(u64::from(self.idempotency_hours) * 3600)
    }
}
