//! The callAI component runtime: a wasmtime host for callAI packs.
//!
//! A pack's node asks its host for a model completion with `ctx.callAI`.
//! Behind that one call the host may send several provider requests; this
//! crate runs them through a retry engine that counts every one of them and
//! reports the count to the pack (RFC 0248 `attempts`), honours a per-call
//! `retry` policy, and emits the RFC 0032 reliability events.
//!
//! The layers:
//! - [`engine`]: the retry engine, plain Rust, no wasm.
//! - [`Provider`]: what the engine calls; [`MockProvider`] is built in.
//! - [`PackRuntime`] / [`Pack`]: the wasmtime component host that runs a
//!   pack node on a fresh instance per run.
//!
//! ```
//! use callai_host::{CallRequest, Engine, EventLog, HostConfig, MockProvider, MockScript, Providers};
//! use std::sync::Arc;
//!
//! let config = Arc::new(HostConfig::default());
//! let mock = MockProvider::new(MockScript::replies([("Hello!", 3)]), true);
//! let engine = Engine::new(config, Providers::new().with(Arc::new(mock)));
//! let request = CallRequest::from_json(
//!     r#"{"messages": [{"role": "user", "content": "hi"}], "retry": {"maxAttempts": 1}}"#,
//!     true,
//! ).unwrap();
//!
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
//! let result = rt.block_on(engine.call("demo.node", &request, &EventLog::new())).unwrap();
//! assert_eq!(result.content.as_deref(), Some("Hello!"));
//! assert_eq!(result.attempts.unwrap().count, 1);
//! ```

#[cfg(feature = "bundled-examples")]
pub mod bundled;
pub mod config;
pub mod conformance;
pub mod engine;
pub mod error;
pub mod events;
pub mod facet;
pub mod mock;
pub mod provider;
pub mod providers;
pub mod request;
pub mod result;
pub mod runlog;
pub mod wasm;

pub use config::{CallAccounting, ConfigError, HostConfig};
pub use engine::Engine;
pub use error::{CallError, ErrorCode};
pub use events::{Event, EventLog, EventSink};
pub use mock::{MockLogEntry, MockProvider, MockScript};
pub use provider::{Provider, ProviderFailure, ProviderReply, ProviderRequest, Providers};
pub use request::{CallRequest, Message, RetryPolicy, Role};
pub use result::{Attempts, CallResult, FinishReason, StructuredMode, Usage};
pub use runlog::{Journal, RunLog, RunLogError, SqliteRunLog};
pub use wasm::{Pack, PackRuntime, RunError, RunOutput, RuntimeOptions};

/// The README's Rust examples, compiled as doctests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
