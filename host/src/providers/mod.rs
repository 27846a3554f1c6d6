//! The real providers: OpenAI-compatible chat completions and the Anthropic
//! Messages API, built from `[providers.*]` in the host config.

mod adapter;
mod anthropic;
mod http;
mod openai;

pub use adapter::{HttpProvider, WireFormat};
pub use anthropic::{ANTHROPIC_VERSION, AnthropicWire};
pub use http::{ApiKey, HttpClient};
pub use openai::OpenAiWire;

/// An OpenAI-compatible chat-completions provider.
pub type OpenAi = HttpProvider<OpenAiWire>;
/// An Anthropic Messages API provider.
pub type Anthropic = HttpProvider<AnthropicWire>;

use crate::config::{HostConfig, ProviderConfig};
use crate::provider::Provider;
use std::sync::Arc;
use std::time::Duration;

/// A provider that cannot start, naming the key or variable at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("providers.{provider}: {message}")]
pub struct SetupError {
    /// `openai` or `anthropic`.
    pub provider: String,
    /// What is wrong.
    pub message: String,
}

/// The settings of one provider, its defaults filled in.
struct Settings {
    base_url: String,
    api_key_env: String,
    model: String,
    native: bool,
    timeout: Duration,
}

fn settings(p: &ProviderConfig, base_url: &str, key_env: &str, model: &str) -> Settings {
    Settings {
        base_url: p.base_url.clone().unwrap_or_else(|| base_url.into()),
        api_key_env: p.api_key_env.clone().unwrap_or_else(|| key_env.into()),
        model: p.model.clone().unwrap_or_else(|| model.into()),
        native: p.native.unwrap_or(true),
        timeout: Duration::from_millis(p.timeout_ms.unwrap_or(60_000)),
    }
}

/// Reads the API key from the configured variable. An empty `apiKeyEnv`
/// means the server needs no key (a local Ollama, say).
fn key(
    name: &str,
    s: &Settings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<ApiKey>, SetupError> {
    if s.api_key_env.is_empty() {
        return Ok(None);
    }
    match env(&s.api_key_env) {
        Some(k) if !k.is_empty() => Ok(Some(ApiKey::new(k))),
        _ => Err(SetupError {
            provider: name.into(),
            message: format!(
                "the API key variable {} is not set (set it, or apiKeyEnv = \"\" for a server without keys)",
                s.api_key_env
            ),
        }),
    }
}

/// Starts the providers the config names, reading keys with `env`.
pub fn from_config_with(
    config: &HostConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Arc<dyn Provider>>, SetupError> {
    let mut out: Vec<Arc<dyn Provider>> = Vec::new();
    let client = |name: &str, s: &Settings| -> Result<HttpClient, SetupError> {
        HttpClient::new(key(name, s, env)?, s.timeout).map_err(|message| SetupError {
            provider: name.into(),
            message,
        })
    };
    if let Some(p) = &config.providers.openai {
        let s = settings(
            p,
            "https://api.openai.com/v1",
            "OPENAI_API_KEY",
            "gpt-4o-mini",
        );
        out.push(Arc::new(OpenAi::new(
            client("openai", &s)?,
            &s.base_url,
            &s.model,
            s.native,
        )));
    }
    if let Some(p) = &config.providers.anthropic {
        let s = settings(
            p,
            "https://api.anthropic.com/v1",
            "ANTHROPIC_API_KEY",
            "claude-sonnet-4-5",
        );
        out.push(Arc::new(Anthropic::new(
            client("anthropic", &s)?,
            &s.base_url,
            &s.model,
            s.native,
        )));
    }
    Ok(out)
}

/// Starts the providers the config names, reading keys from the environment.
pub fn from_config(config: &HostConfig) -> Result<Vec<Arc<dyn Provider>>, SetupError> {
    from_config_with(config, &|name| std::env::var(name).ok())
}
