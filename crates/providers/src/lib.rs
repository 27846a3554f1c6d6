//! The real providers: OpenAI-compatible chat completions and the Anthropic
//! Messages API, started from `[providers.NAME]` sections of the host config.

mod adapter;
mod anthropic;
mod http;
mod openai;
mod redact;

use adapter::HttpProvider;
use anthropic::AnthropicWire;
use http::{ApiKey, HttpClient};
use openai::OpenAiWire;

use crate::config::{ConfigError, ProviderKind, ProviderSettings, invalid};
use crate::provider::Provider;
use std::sync::Arc;
use std::time::Duration;

/// An OpenAI-compatible chat-completions provider.
type OpenAi = HttpProvider<OpenAiWire>;
/// An Anthropic Messages API provider.
type Anthropic = HttpProvider<AnthropicWire>;

/// Reads the API key from the section's variable with `env`. An empty
/// `apiKeyEnv` means the server needs no key (a local Ollama, say); a
/// variable that is unset or empty is an error naming it.
fn key(
    s: &ProviderSettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<ApiKey>, ConfigError> {
    if s.api_key_env.is_empty() {
        return Ok(None);
    }
    match env(&s.api_key_env) {
        Some(k) if !k.is_empty() => Ok(Some(ApiKey::new(k))),
        _ => Err(invalid(
            &format!("providers.{}.apiKeyEnv", s.name),
            format!(
                "the API key variable {} is not set (set it, or apiKeyEnv = \"\" for a server without keys)",
                s.api_key_env
            ),
        )),
    }
}

/// Starts the provider of one section, reading its key with `env`; it reads
/// no response body over `max_body` bytes.
pub fn start(
    s: &ProviderSettings,
    env: &dyn Fn(&str) -> Option<String>,
    max_body: u64,
) -> Result<Arc<dyn Provider>, ConfigError> {
    let timeout = Duration::from_millis(s.timeout_ms);
    let http = HttpClient::new(key(s, env)?, timeout, max_body)
        .map_err(|message| invalid(&format!("providers.{}", s.name), message))?;
    Ok(match s.kind {
        ProviderKind::Openai => Arc::new(OpenAi::new(http, &s.base_url, &s.model, s.native)),
        ProviderKind::Anthropic => Arc::new(Anthropic::new(http, &s.base_url, &s.model, s.native)),
    })
}
