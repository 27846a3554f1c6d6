//! The engine's sections of the host config (TOML, every key optional):
//! `[retry]`, `[callAccounting]`, `[policy]`, `[mock]`, `[defaults]`,
//! `[limits]` and `[models.NAME]`. An unknown key or a value out of range is an error naming the
//! key, at start-up. The other sections belong to the crates that read them
//! (`[providers.NAME]` to callai-providers, `[server]` and `[runlog]` to
//! callai-config, `[telemetry]` to callai-telemetry); callai-config
//! composes the whole file.

mod limits;
mod models;

pub use callai_wire::CallAccounting;
pub use limits::Limits;
pub use models::{MAX_TARGETS, ModelKind, ModelRoute, TargetName, is_family, route_of};

use serde::de::{DeserializeOwned, MapAccess};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// `[retry]`: the host's own retry behaviour (RFC 0032, 0033).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Transient failures (408, 429, 5xx, timeouts) wait up to
    /// `backoffBaseMs * 2^n`, with full jitter, capped at `backoffMaxMs`.
    pub backoff_base_ms: u64,
    /// The cap of a backoff wait.
    pub backoff_max_ms: u64,
    /// A provider's `retry-after` is honoured up to this; asked for more,
    /// the host gives up instead.
    pub max_retry_after_ms: u64,
    /// Unavailable answers in a row (a refused connection, a timeout, 408,
    /// 429, 5xx) after which a chain's target is tried after its others
    /// (0..1000; 0: never). See [`crate::breaker`].
    pub circuit_breaker_failures: u32,
    /// How long an open target is tried last before one call tries it
    /// first again.
    pub circuit_breaker_cool_down_ms: u64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            max_retry_attempts: 3,
            truncation_budget_multiplier: 2,
            default_max_tokens: 4000,
            provider_max_tokens: 64000,
            nl_fallback: true,
            backoff_base_ms: 500,
            backoff_max_ms: 8000,
            max_retry_after_ms: 60_000,
            circuit_breaker_failures: 5,
            circuit_breaker_cool_down_ms: 30_000,
        }
    }
}

/// `[policy]`: what the host refuses before any request is sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PolicyConfig {
    /// Unset: every provider is allowed.
    pub allowed_providers: Option<Vec<String>>,
    /// What a JSON request's top-level field the spec does not define gets.
    pub unknown_request_fields: UnknownFields,
    /// Whether a request may offer tools (advertised as
    /// `aiProviders.toolCalls`); when false, one that does is refused
    /// naming `tools`.
    pub tool_calls: bool,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            allowed_providers: None,
            unknown_request_fields: UnknownFields::default(),
            tool_calls: true,
        }
    }
}

/// `[policy] unknownRequestFields`: the RFC lets a host ignore a field it
/// does not know, but a misspelt one (`response_schema`) changes the call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnknownFields {
    /// Ignored, and named in a `request.unknownFields` event (and a warning
    /// on `callai run`'s stderr), with the field it looks like.
    #[default]
    Warn,
    /// Refused with `validation_error` naming the field.
    Refuse,
    /// Ignored, silently.
    Ignore,
}

/// `[mock]`: the built-in mock provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    /// How the mock answers structured calls: `native`, or in the prompt.
    pub fn structured_output(&self) -> callai_wire::StructuredOutput {
        callai_wire::StructuredOutput::native_if(self.native)
    }

    /// `latencyMs` as a duration.
    pub fn latency(&self) -> Duration {
        Duration::from_millis(self.latency_ms)
    }
}

/// `[defaults]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// The engine's part of the host config: its sections, declared here once
/// ([`HostConfig::SECTIONS`], [`HostConfig::read_section`]) for this
/// struct and for any config file that holds them among its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    /// `[limits]`
    pub limits: Limits,
    /// `[models.NAME]`: model names routed to their targets.
    pub models: BTreeMap<String, ModelRoute>,
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

/// A [`ConfigError::Invalid`] naming `key`.
pub fn invalid(key: &str, message: String) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        message,
    }
}

/// Checks that `value` of `key` lies in `lo..=hi`.
pub fn in_range(key: &str, value: u64, lo: u64, hi: u64) -> Result<(), ConfigError> {
    if (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(invalid(key, format!("must be {lo}..{hi}, got {value}")))
    }
}

/// Parses TOML text as a `T` (sections with `deny_unknown_fields`): toml's
/// message names the unknown or mistyped key, its line and column, and
/// points at it.
pub fn parse_toml<T: DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string().trim().into()))
}

/// Reads the TOML file at `path` as a `T`; a parse error names the file.
pub fn read_toml<T: DeserializeOwned>(path: &Path) -> Result<T, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    parse_toml(&text).map_err(|e| match e {
        ConfigError::Parse(message) => ConfigError::Parse(format!("{}: {message}", path.display())),
        e => e,
    })
}

/// `parsed`, once `validate` has passed it.
pub fn checked<T>(
    parsed: Result<T, ConfigError>,
    validate: impl FnOnce(&T) -> Result<(), ConfigError>,
) -> Result<T, ConfigError> {
    let config = parsed?;
    validate(&config)?;
    Ok(config)
}

impl HostConfig {
    /// The engine's sections, as a config file names them.
    pub const SECTIONS: [&'static str; 7] = [
        "retry",
        "callAccounting",
        "policy",
        "mock",
        "defaults",
        "limits",
        "models",
    ];

    /// Reads section `key` from `map` (whose next value it is) when it is
    /// one of the engine's; `false`, reading nothing, when it is not.
    pub fn read_section<'de, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
    ) -> Result<bool, A::Error> {
        match key {
            "retry" => self.retry = map.next_value()?,
            "callAccounting" => self.call_accounting = map.next_value()?,
            "policy" => self.policy = map.next_value()?,
            "mock" => self.mock = map.next_value()?,
            "defaults" => self.defaults = map.next_value()?,
            "limits" => self.limits = map.next_value()?,
            "models" => self.models = map.next_value()?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Parses and checks the engine's sections from TOML text (a whole
    /// config file, every section, is `callai_config::Config`).
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        checked(parse_toml(text), Self::validate)
    }

    /// Range and consistency checks of the config on its own. Which
    /// providers exist is known only when a [`crate::Host`] is built (an
    /// embedder may register its own), so `defaults.provider`,
    /// `policy.allowedProviders` and each route's targets are checked there.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let r = &self.retry;
        in_range("retry.maxRetryAttempts", r.max_retry_attempts.into(), 1, 16)?;
        in_range(
            "retry.truncationBudgetMultiplier",
            r.truncation_budget_multiplier.into(),
            1,
            8,
        )?;
        in_range(
            "retry.providerMaxTokens",
            r.provider_max_tokens.into(),
            1,
            u32::MAX.into(),
        )?;
        in_range(
            "retry.defaultMaxTokens",
            r.default_max_tokens.into(),
            1,
            r.provider_max_tokens.into(),
        )?;
        in_range("retry.backoffBaseMs", r.backoff_base_ms, 0, 600_000)?;
        in_range(
            "retry.backoffMaxMs",
            r.backoff_max_ms,
            r.backoff_base_ms,
            600_000,
        )?;
        in_range("retry.maxRetryAfterMs", r.max_retry_after_ms, 0, 3_600_000)?;
        in_range(
            "retry.circuitBreakerFailures",
            r.circuit_breaker_failures.into(),
            0,
            1000,
        )?;
        in_range(
            "retry.circuitBreakerCoolDownMs",
            r.circuit_breaker_cool_down_ms,
            1,
            3_600_000,
        )?;
        self.limits.validate()?;
        models::validate_all(&self.models)?;
        in_range("mock.latencyMs", self.mock.latency_ms, 0, 600_000)
    }

    /// Whether the policy lets a request reach `provider`.
    pub fn provider_allowed(&self, provider: &str) -> bool {
        self.policy
            .allowed_providers
            .as_ref()
            .is_none_or(|allowed| allowed.iter().any(|p| p == provider))
    }
}

/// A config file's sections: `sections` (in the order an unknown one's
/// refusal lists them), each read by `read` when it is not the engine's.
/// The key is read with a seed that refuses an unknown section itself, so
/// that the refusal points at the key (TOML's span), as serde's derive does.
pub fn read_sections<'de, A, F>(
    mut map: A,
    sections: &'static [&'static str],
    host: &mut HostConfig,
    mut read: F,
) -> Result<(), A::Error>
where
    A: MapAccess<'de>,
    F: FnMut(&str, &mut A) -> Result<(), A::Error>,
{
    while let Some(key) = map.next_key_seed(SectionName(sections))? {
        if !host.read_section(&key, &mut map)? {
            read(&key, &mut map)?;
        }
    }
    Ok(())
}

/// A section's name, one of a known list.
struct SectionName(&'static [&'static str]);

impl<'de> serde::de::DeserializeSeed<'de> for SectionName {
    type Value = String;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl serde::de::Visitor<'_> for SectionName {
    type Value = String;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a section name")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<String, E> {
        if self.0.contains(&v) {
            Ok(v.to_owned())
        } else {
            Err(E::unknown_field(v, self.0))
        }
    }
}

impl<'de> Deserialize<'de> for HostConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = HostConfig;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("the engine's config sections")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<HostConfig, A::Error> {
                let mut host = HostConfig::default();
                read_sections(map, &HostConfig::SECTIONS, &mut host, |key, _| {
                    unreachable!("{key} is an engine's section")
                })?;
                Ok(host)
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests;
