//! The host config (TOML, every key optional). An unknown key or a value out
//! of range is an error naming the key, at start-up.

mod limits;

pub use limits::Limits;

use serde::Deserialize;
use std::path::Path;

/// `[retry]`: the host's own retry behaviour (RFC 0032, 0033).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct RetryConfig {
    /// The host ceiling on provider requests per call, fallback included (1..16).
    pub max_retry_attempts: u32,
    /// Truncation retry budget factor (1..8).
    pub truncation_budget_multiplier: u32,
    /// Stands in when the caller names no maxTokens.
    pub default_max_tokens: u32,
    /// The provider ceiling; growth clamps here.
    pub provider_max_tokens: u32,
    /// Whether the natural-language-to-JSON fallback may be used.
    pub nl_fallback: bool,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            max_retry_attempts: 3,
            truncation_budget_multiplier: 2,
            default_max_tokens: 4000,
            provider_max_tokens: 64000,
            nl_fallback: true,
        }
    }
}

/// `[callAccounting]`: the RFC 0248 flags, advertised in the facet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct CallAccounting {
    /// §A: results carry `attempts`.
    pub attempts: bool,
    /// §B: the per-call `retry` is honoured.
    pub retry_policy: bool,
}

impl Default for CallAccounting {
    fn default() -> Self {
        Self {
            attempts: true,
            retry_policy: true,
        }
    }
}

/// `[policy]`: what the host refuses before any request is sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PolicyConfig {
    /// Unset: every configured provider is allowed.
    pub allowed_providers: Option<Vec<String>>,
}

/// `[mock]`: the built-in mock provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct MockConfig {
    /// False: the mock has no native structured output; prompt mode is used.
    pub native: bool,
    /// How long the mock takes to answer each request, like a real provider.
    pub latency_ms: u64,
}

impl Default for MockConfig {
    fn default() -> Self {
        Self {
            native: true,
            latency_ms: 0,
        }
    }
}

impl MockConfig {
    /// `latencyMs` as a duration.
    pub fn latency(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.latency_ms)
    }
}

/// `[defaults]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct DefaultsConfig {
    /// Used when a request names no provider.
    pub provider: String,
}

impl Default for DefaultsConfig {
    fn default() -> Self {
        Self {
            provider: "mock".into(),
        }
    }
}

/// `[providers.<name>]`: a real provider. Absent keys take the provider's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProviderConfig {
    /// API root, e.g. `https://api.openai.com/v1`.
    pub base_url: Option<String>,
    /// The environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// The default model.
    pub model: Option<String>,
    /// Native structured output; false puts the schema in the prompt.
    pub native: Option<bool>,
    /// Per-request timeout.
    pub timeout_ms: Option<u64>,
}

/// `[providers]`: the real providers this host may call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProvidersConfig {
    /// Any OpenAI-compatible chat-completions server.
    pub openai: Option<ProviderConfig>,
    /// The Anthropic Messages API.
    pub anthropic: Option<ProviderConfig>,
}

impl ProvidersConfig {
    /// The names of the configured real providers.
    pub fn names(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        if self.openai.is_some() {
            names.push("openai");
        }
        if self.anthropic.is_some() {
            names.push("anthropic");
        }
        names
    }
}

/// The whole host config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct HostConfig {
    /// `[retry]`
    pub retry: RetryConfig,
    /// `[callAccounting]`
    pub call_accounting: CallAccounting,
    /// `[policy]`
    pub policy: PolicyConfig,
    /// `[mock]`
    pub mock: MockConfig,
    /// `[defaults]`
    pub defaults: DefaultsConfig,
    /// `[providers]`
    pub providers: ProvidersConfig,
    /// `[limits]`
    pub limits: Limits,
}

/// A config that cannot be used, naming the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {message}")]
    Read {
        /// The path given.
        path: String,
        /// The I/O error.
        message: String,
    },
    /// Not TOML, an unknown key, or a value of the wrong type.
    #[error("config: {0}")]
    Parse(String),
    /// A value out of range or inconsistent with another.
    #[error("config key `{key}`: {message}")]
    Invalid {
        /// The dotted key, e.g. `retry.maxRetryAttempts`.
        key: String,
        /// What is wrong with it.
        message: String,
    },
}

impl ConfigError {
    /// The offending key, when the error names one precisely.
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::Invalid { key, .. } => Some(key),
            _ => None,
        }
    }
}

pub(crate) fn invalid(key: &str, message: String) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        message,
    }
}

fn in_range(key: &str, value: u32, lo: u32, hi: u32) -> Result<(), ConfigError> {
    if (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(invalid(key, format!("must be {lo}..{hi}, got {value}")))
    }
}

impl HostConfig {
    /// Parses and checks a config from TOML text.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        // toml's message names the unknown or mistyped key and its line.
        let config: Self =
            toml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string().trim().into()))?;
        config.validate()?;
        Ok(config)
    }

    /// Reads [`HostConfig::from_toml`] from a file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Self::from_toml(&text)
    }

    /// Range and consistency checks.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let r = &self.retry;
        in_range("retry.maxRetryAttempts", r.max_retry_attempts, 1, 16)?;
        in_range(
            "retry.truncationBudgetMultiplier",
            r.truncation_budget_multiplier,
            1,
            8,
        )?;
        in_range(
            "retry.providerMaxTokens",
            r.provider_max_tokens,
            1,
            u32::MAX,
        )?;
        in_range(
            "retry.defaultMaxTokens",
            r.default_max_tokens,
            1,
            r.provider_max_tokens,
        )?;
        self.limits.validate()?;
        if self.mock.latency_ms > 600_000 {
            return Err(invalid(
                "mock.latencyMs",
                format!("must be 0..600000, got {}", self.mock.latency_ms),
            ));
        }
        let known = self.provider_names();
        if let Some(allowed) = &self.policy.allowed_providers {
            for (i, name) in allowed.iter().enumerate() {
                if !known.contains(&name.as_str()) {
                    return Err(invalid(
                        &format!("policy.allowedProviders[{i}]"),
                        format!(
                            "names provider {name:?}, which is not configured (known: {known:?})"
                        ),
                    ));
                }
            }
        }
        let default = self.defaults.provider.as_str();
        if !known.contains(&default) {
            return Err(invalid(
                "defaults.provider",
                format!("names provider {default:?}, which is not configured (known: {known:?})"),
            ));
        }
        if !self.provider_allowed(default) {
            return Err(invalid(
                "defaults.provider",
                format!("provider {default:?} is not in policy.allowedProviders"),
            ));
        }
        for (name, p) in [
            ("openai", &self.providers.openai),
            ("anthropic", &self.providers.anthropic),
        ] {
            if let Some(ProviderConfig {
                timeout_ms: Some(0),
                ..
            }) = p
            {
                return Err(invalid(
                    &format!("providers.{name}.timeoutMs"),
                    "must be >= 1".into(),
                ));
            }
        }
        Ok(())
    }

    /// Every provider this host knows: `mock` and the configured ones.
    pub fn provider_names(&self) -> Vec<&'static str> {
        let mut names = vec!["mock"];
        names.extend(self.providers.names());
        names
    }

    /// Whether `provider` is one this host knows (without allocating).
    pub fn has_provider(&self, provider: &str) -> bool {
        match provider {
            "mock" => true,
            "openai" => self.providers.openai.is_some(),
            "anthropic" => self.providers.anthropic.is_some(),
            _ => false,
        }
    }

    /// Whether the policy lets a request reach `provider`.
    pub fn provider_allowed(&self, provider: &str) -> bool {
        self.policy
            .allowed_providers
            .as_ref()
            .is_none_or(|allowed| allowed.iter().any(|p| p == provider))
    }
}

#[cfg(test)]
mod tests;
