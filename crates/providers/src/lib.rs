//! The real providers: OpenAI-compatible chat completions (OpenAI, vLLM,
//! Ollama, llama.cpp), the Anthropic Messages API and Google's Gemini API,
//! each over its own pool of HTTP/1.1 and HTTP/2 connections (hyper,
//! rustls) that grows with the calls in flight, started from the `[providers.NAME]` sections of the host config
//! and registered with a [`callai_engine::Host`] like any other
//! [`Provider`].
//!
//! ```
//! use callai_engine::{Host, HostConfig};
//! use callai_providers::ProvidersConfig;
//!
//! let sections: ProvidersConfig = toml::from_str(r#"
//! [local]
//! kind = "openai"
//! baseUrl = "http://127.0.0.1:11434/v1"
//! apiKeyEnv = ""
//! "#).unwrap();
//! callai_providers::validate(&sections)?;
//! let config = HostConfig::default();
//! let providers = callai_providers::start(&sections, &|_| None, &config.limits)?;
//! let host = Host::builder(config).providers(providers).build()?;
//! assert!(host.allowed_providers().contains(&"local"));
//! # Ok::<(), callai_engine::ConfigError>(())
//! ```

#![warn(missing_docs)]

mod adapter;
mod anthropic;
mod auth;
mod bedrock;
mod config;
mod conversation;
mod embeddings;
mod events;
mod gemini;
mod http;
mod openai;
mod quota;
mod redact;
#[cfg(test)]
mod test_request;
mod transport;
mod upstream;
mod usage;
mod vertex;

pub use config::{
    OpenAiApi, Prices, ProviderConfig, ProviderKind, ProviderSettings, ProvidersConfig, validate,
};
pub use quota::ProviderLimits;
pub use transport::settings::{Http2, TransportSettings};
pub use upstream::{KeyHeader, MaxTokensField};
pub use vertex::VertexConfig;

use adapter::HttpProvider;
use anthropic::AnthropicWire;
use http::{ApiKey, HttpClient};
use openai::OpenAiWire;
use transport::Transport;

use callai_engine::config::{ConfigError, Limits, invalid};
use callai_engine::{Provider, Providers};
use std::sync::Arc;
use std::time::Duration;

/// A Gemini model on Vertex AI, whose embeddings go to `:predict`.
type VertexWire = gemini::GeminiWire<vertex::embeddings::VertexEmbeddings>;

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

/// Starts the provider of every section, reading their keys with `env` (the
/// process environment is `&|name| std::env::var(name).ok()`); none reads a
/// response body over `limits.maxProviderBodyBytes`. A section whose key
/// variable is unset is an error naming its `apiKeyEnv`.
pub fn start(
    sections: &ProvidersConfig,
    env: &dyn Fn(&str) -> Option<String>,
    limits: &Limits,
) -> Result<Providers, ConfigError> {
    let mut providers = Providers::new();
    for (name, section) in sections {
        let settings = section.settings(name)?;
        let provider = start_one(&settings, env, limits.max_provider_body_bytes)?;
        providers.insert(settings.name, provider);
    }
    Ok(providers)
}

/// Starts the provider of one section, reading its key with `env`; it reads
/// no response body over `max_body` bytes.
fn start_one(
    s: &ProviderSettings,
    env: &dyn Fn(&str) -> Option<String>,
    max_body: u64,
) -> Result<Arc<dyn Provider>, ConfigError> {
    let timeout = Duration::from_millis(s.timeout_ms);
    let key = key(s, env)?;
    upstream::check(
        &s.name,
        &s.headers,
        &s.query,
        &s.extra_body,
        key.as_ref().map(ApiKey::expose),
    )?;
    let url = |message| invalid(&format!("providers.{}.baseUrl", s.name), message);
    let base = url::Url::parse(&s.base_url).map_err(|e| url(e.to_string()))?;
    let transport = Transport::new(&s.name, &s.transport, &base, env, timeout)?;
    let bearer = key.is_some();
    let http = HttpClient::new(transport, key, timeout, max_body);
    let extras = upstream::Upstream {
        max_tokens_field: s.max_tokens_field,
        extra_body: s.extra_body.clone(),
    };
    // Vertex AI serves Gemini's paths under the project's publisher.
    let base_url = match &s.vertex {
        Some(vertex) => format!(
            "{}{}",
            s.base_url.trim_end_matches('/'),
            vertex.publisher_path()
        ),
        None => s.base_url.clone(),
    };
    let endpoint = adapter::Endpoint {
        base_url: &base_url,
        headers: &s.headers,
        query: &s.query,
        key_header: s.key_header,
    };
    let made = Made {
        http,
        endpoint,
        settings: s,
        extras,
    };
    match s.kind {
        ProviderKind::Openai if s.api == OpenAiApi::Responses => {
            made.of::<openai::ResponsesWire>(None)
        }
        ProviderKind::Openai => made.of::<OpenAiWire>(None),
        ProviderKind::Anthropic => made.of::<AnthropicWire>(None),
        ProviderKind::Bedrock => {
            // A Bedrock API key is a bearer header; without one, SigV4.
            let signer = match (bearer, &s.region) {
                (false, Some(region)) => {
                    let keys = bedrock::credentials::Keys::choose(s.profile.as_deref(), env)
                        .map_err(|why| invalid(&format!("providers.{}", s.name), why))?;
                    let signer = bedrock::sign::Signer::new(region, keys);
                    Some(Box::new(signer) as Box<dyn auth::Authorize>)
                }
                _ => None,
            };
            made.of::<bedrock::BedrockWire>(signer)
        }
        ProviderKind::Gemini => match &s.vertex {
            Some(v) => {
                let tokens = vertex::Tokens::start(&s.name, v, &s.transport, env, timeout)?;
                made.of::<VertexWire>(Some(Box::new(tokens)))
            }
            None => made.of::<gemini::GeminiWire>(None),
        },
    }
}

/// What every provider of a section is made with.
struct Made<'a> {
    http: HttpClient,
    endpoint: adapter::Endpoint<'a>,
    settings: &'a ProviderSettings,
    extras: upstream::Upstream,
}

impl Made<'_> {
    /// The provider of wire format `W`, its requests authorized by `auth`
    /// when they need more than a key.
    fn of<W: adapter::WireFormat>(
        self,
        auth: Option<Box<dyn auth::Authorize>>,
    ) -> Result<Arc<dyn Provider>, ConfigError> {
        let s = self.settings;
        let url = |message| invalid(&format!("providers.{}.baseUrl", s.name), message);
        let provider = HttpProvider::<W>::new(self.http, self.endpoint, &s.model, s.native)
            .map_err(url)?
            .with_input_overhead(s.input_overhead_tokens)
            .with_vision(s.vision)
            .with_upstream(self.extras)
            .with_auth(auth);
        Ok(Arc::new(provider))
    }
}
