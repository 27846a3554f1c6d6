//! The callAI retry engine: one `ctx.callAI` call in, every provider request
//! it needs sent, counted and reported (RFC 0248 `attempts`), one result or
//! error out. The pack's per-call `retry` policy narrows what the host does,
//! and the RFC 0032 reliability events are emitted as it goes.
//!
//! No wasm, no HTTP and no database in here: this is what a host that is
//! not a wasm host embeds, and what the other crates build on.
//! - [`Host`]: the engine with its [`HostConfig`] and [`Providers`];
//!   [`MockProvider`] is built in, any [`Provider`] can be registered
//!   (`callai-providers` has the OpenAI-compatible and Anthropic ones).
//! - [`RunSession`]: one run's calls, limits, events and [`Journal`]
//!   (live, record, replay) over a [`RunLog`] (`callai-runlog-sqlite`,
//!   `callai-runlog-postgres`).
//! - `callai-host` runs pack nodes (wasm components) on top of both.
//!
//! ```
//! use callai_engine::{EventLog, Host, HostConfig, MockProvider, MockScript};
//! use callai_engine::wire::{CallRequest, RetryField};
//!
//! let script = MockScript::from_json(r#"[
//!   {"content": "{\"scene\": \"cut", "finishReason": "length", "outputTokens": 5000},
//!   {"content": "{\"scene\": \"ok\"}", "outputTokens": 1800}
//! ]"#).unwrap();
//! let host = Host::builder(HostConfig::default())
//!     .mock(MockProvider::new(script, callai_wire::StructuredOutput::Native))
//!     .build()?;
//! let request = CallRequest::from_json(r#"{
//!   "messages": [{"role": "user", "content": "Write a scene."}],
//!   "maxTokens": 2000,
//!   "responseSchema": {"type": "object", "required": ["scene"]}
//! }"#, RetryField::Honoured).unwrap();
//!
//! let events = EventLog::new();
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
//! let result = rt.block_on(host.call("node", &request, &events)).unwrap();
//! let attempts = result.attempts.unwrap();
//! assert_eq!((attempts.count, attempts.output_tokens), (2, Some(3800)));
//! assert_eq!(result.usage.unwrap().output_tokens, Some(1800));
//! # Ok::<(), callai_engine::ConfigError>(())
//! ```

#![warn(missing_docs)]

pub mod breaker;
pub mod budget;
pub mod config;
pub mod cost;
mod engine;
pub mod events;
pub mod facet;
mod host;
pub mod images;
pub mod mock;
pub mod observe;
mod provider;
mod routing;
pub mod runlog;
mod session;

pub use callai_wire as wire;
pub use config::{ConfigError, HostConfig};
pub use engine::{Clock, Jitter, RequestReason, Sleeper, TokioTime};
pub use events::{Event, EventLog, EventSink};
pub use host::{CallOptions, Host, HostBuilder};
pub use mock::{MockLogEntry, MockProvider, MockScript};
pub use provider::{
    BoxFuture, Connections, DeltaSink, DeltaTarget, FailureKind, Provider, ProviderFailure,
    ProviderReply, ProviderRequest, Providers, StopReason, StructuredRequest, ToolsRequest,
};
pub use runlog::{RunKey, RunLog, RunLogError};
pub use session::{CallInput, Journal, Recording, RunError, RunSession};

/// Entry points for the fuzz targets and their property tests; not part of
/// the API.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::engine::recovery::{RecoveryPath, recover};
}
