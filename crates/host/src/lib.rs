//! The callAI component runtime: a wasmtime host for callAI packs.
//!
//! A pack's node asks its host for a model completion with `ctx.callAI`.
//! Behind that one call the host may send several provider requests; this
//! crate runs them through a retry engine that counts every one of them and
//! reports the count to the pack (RFC 0248 `attempts`), honours a per-call
//! `retry` policy, and emits the RFC 0032 reliability events.
//!
//! The layers:
//! - [`Host`]: the retry engine with its config and [`Providers`], no wasm;
//!   [`MockProvider`] is built in, and any [`Provider`] can be registered.
//! - [`RunSession`]: one run's calls, limits, events and [`Journal`]
//!   (live, record, replay) over a [`RunLog`]; still no wasm.
//! - [`PackRuntime`] / [`Pack`]: the wasmtime component host that runs a
//!   pack node on a fresh instance per run; [`add_to_linker`] for embedders
//!   with their own linker.
//!
//! ```
//! use callai_host::{EventLog, Host, HostConfig, MockProvider, MockScript};
//! use callai_host::wire::CallRequest;
//!
//! let script = MockScript::from_json(r#"[
//!   {"content": "{\"scene\": \"cut", "finishReason": "length", "outputTokens": 5000},
//!   {"content": "{\"scene\": \"ok\"}", "outputTokens": 1800}
//! ]"#).unwrap();
//! let host = Host::builder(HostConfig::default())
//!     .mock(MockProvider::new(script, true))
//!     .build()?;
//! let request = CallRequest::from_json(r#"{
//!   "messages": [{"role": "user", "content": "Write a scene."}],
//!   "maxTokens": 2000,
//!   "responseSchema": {"type": "object", "required": ["scene"]}
//! }"#, true).unwrap();
//!
//! let events = EventLog::new();
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
//! let result = rt.block_on(host.call("node", &request, &events)).unwrap();
//! let attempts = result.attempts.unwrap();
//! assert_eq!((attempts.count, attempts.output_tokens), (2, Some(3800)));
//! assert_eq!(result.usage.unwrap().output_tokens, Some(1800));
//! # Ok::<(), callai_host::ConfigError>(())
//! ```

pub mod config;
mod engine;
pub mod events;
pub mod facet;
mod host;
mod mock;
pub mod observe;
mod provider;
mod providers;
pub mod runlog;
mod session;
mod wasm;

pub use callai_wire as wire;
pub use config::{ConfigError, HostConfig};
pub use engine::{Clock, Jitter, RequestReason, Sleeper, SplitMix, TokioTime};
pub use events::{Event, EventLog, EventSink};
pub use host::{CallOptions, Host, HostBuilder};
pub use mock::{
    MockFinish, MockLogEntry, MockProvider, MockReply, MockScript, ScriptEntry, ScriptError,
};
pub use provider::{
    BoxFuture, FailureKind, Provider, ProviderFailure, ProviderReply, ProviderRequest, Providers,
    StopReason, StructuredRequest,
};
pub use runlog::{RunLog, RunLogError, SqliteRunLog};
pub use session::{CallInput, Journal, RunError, RunSession};
pub use wasm::{
    CallAiCtx, CallAiView, Pack, PackRuntime, RunOptions, RunOutput, RuntimeOptions, add_to_linker,
};

/// A tokio runtime set up for running packs beside each other: all its
/// timers and I/O, and the tasks other threads wake, are looked at every
/// few task polls (tokio's default is every 61). A busy pack yields its
/// worker every millisecond; with the defaults, a run waiting on a provider
/// could wait 61 such slices for its turn.
pub fn tokio_runtime(workers: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .enable_all()
        .event_interval(4)
        .global_queue_interval(4);
    if let Some(n) = workers {
        builder.worker_threads(n);
    }
    builder.build()
}

/// Entry points for the fuzz targets and their property tests; not part of
/// the API.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::engine::recovery::{RecoveryPath, recover};
}

/// The README's Rust examples, compiled as doctests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;
