//! The retry engine: one ctx.callAI call in, one result or error out, with
//! every provider request counted. No wasm in here: the wasm layer converts
//! WIT types to these and back.
//!
//! ```
//! use callai_host::{CallRequest, Engine, EventLog, HostConfig, MockProvider, MockScript, Providers};
//! use std::sync::Arc;
//!
//! let script = MockScript::from_json(r#"[
//!   {"content": "{\"scene\": \"cut", "finishReason": "length", "outputTokens": 5000},
//!   {"content": "{\"scene\": \"ok\"}", "outputTokens": 1800}
//! ]"#).unwrap();
//! let providers = Providers::new().with(Arc::new(MockProvider::new(script, true)));
//! let engine = Engine::new(Arc::new(HostConfig::default()), providers);
//! let request = CallRequest::from_json(r#"{
//!   "messages": [{"role": "user", "content": "Write a scene."}],
//!   "maxTokens": 2000,
//!   "responseSchema": {"type": "object", "required": ["scene"]}
//! }"#, true).unwrap();
//!
//! let events = EventLog::new();
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
//! let result = rt.block_on(engine.call("node", &request, &events)).unwrap();
//! let attempts = result.attempts.unwrap();
//! assert_eq!((attempts.count, attempts.output_tokens), (2, Some(3800)));
//! assert_eq!(result.usage.unwrap().output_tokens, Some(1800));
//! ```

mod attempts;
mod classify;
pub mod recovery;
mod retry;
pub mod schema;

pub use attempts::Ledger;
pub use classify::{Verdict, classify};

use crate::config::HostConfig;
use crate::error::{CallError, ErrorCode};
use crate::events::EventSink;
use crate::provider::{Provider, Providers};
use crate::request::CallRequest;
use crate::result::CallResult;
use std::sync::Arc;

/// The retry engine of one host: its config and the providers it may call.
#[derive(Clone, Debug)]
pub struct Engine {
    config: Arc<HostConfig>,
    providers: Providers,
}

impl Engine {
    /// An engine calling `providers` under `config`.
    pub fn new(config: Arc<HostConfig>, providers: Providers) -> Self {
        Self { config, providers }
    }

    /// The host config.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// The providers.
    pub fn providers(&self) -> &Providers {
        &self.providers
    }

    /// Runs one ctx.callAI call for `node_id`. The request must have been
    /// validated (`CallRequest::from_json` or `validate`); its `retry` is read
    /// only when the host advertises `retryPolicy`.
    pub async fn call(
        &self,
        node_id: &str,
        request: &CallRequest,
        events: &dyn EventSink,
    ) -> Result<CallResult, CallError> {
        let provider = self.resolve_provider(request)?;
        retry::CallLoop::new(&self.config, provider.as_ref(), node_id, request, events)?
            .run()
            .await
    }

    /// The JSON entry: parses and validates `request` (refusing a malformed
    /// `retry` when the host honours it), then calls.
    pub async fn call_json(
        &self,
        node_id: &str,
        request: &str,
        events: &dyn EventSink,
    ) -> Result<CallResult, CallError> {
        let request = CallRequest::from_json(request, self.config.call_accounting.retry_policy)?;
        self.call(node_id, &request, events).await
    }

    /// The provider a request goes to, or the refusal made before any request.
    fn resolve_provider(&self, request: &CallRequest) -> Result<&Arc<dyn Provider>, CallError> {
        let name = request
            .provider
            .as_deref()
            .unwrap_or(&self.config.defaults.provider);
        if !self.config.has_provider(name) {
            return Err(CallError::validation(
                "provider",
                format!(
                    "names {name:?}, which this host does not have (known: {:?})",
                    self.config.provider_names()
                ),
            ));
        }
        if !self.config.provider_allowed(name) {
            return Err(CallError::new(
                ErrorCode::PolicyDenied,
                format!("provider {name:?} is not allowed by this host's policy"),
            )
            .with_detail("provider", name));
        }
        self.providers.get(name).ok_or_else(|| {
            CallError::new(
                ErrorCode::ProviderUnavailable,
                format!("provider {name:?} is configured but was not started on this host"),
            )
            .with_detail("provider", name)
        })
    }
}

#[cfg(test)]
mod tests;
