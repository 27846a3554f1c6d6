//! The host config file: every section, each defined and checked by the
//! crate that reads it, composed here into the one TOML file `callai run`
//! and `callai serve` take. Every key is optional; an unknown key or a value
//! out of range is an error naming the key, at start-up.
//!
//! | section | owner |
//! |---|---|
//! | `[retry]`, `[callAccounting]`, `[policy]`, `[mock]`, `[defaults]`, `[limits]` | callai-engine ([`HostConfig`]) |
//! | `[providers.NAME]` | callai-providers |
//! | `[telemetry]` | callai-telemetry |
//! | `[server]`, `[runlog]`, `[cache]`, `[tenants.NAME]` | this crate |

mod sections;

pub use crate::tenants::{BudgetConfig, TenantConfig, TenantsConfig};
pub(crate) use sections::is_env_name;
pub use sections::{CacheConfig, RunLogConfig, ServerConfig, parse_listen};

use callai_engine::config::{
    CallAccounting, ConfigError, DefaultsConfig, Limits, MockConfig, PolicyConfig, RetryConfig,
    checked, parse_toml, read_toml,
};
use callai_engine::{HostBuilder, HostConfig, Providers};
use callai_providers::ProvidersConfig;
use callai_telemetry::TelemetryConfig;
use serde::Deserialize;
use std::path::Path;

/// The whole config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {
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
    /// `[providers.NAME]`, by name.
    pub providers: ProvidersConfig,
    /// `[telemetry]`
    pub telemetry: TelemetryConfig,
    /// `[server]`
    pub server: ServerConfig,
    /// `[runlog]`
    pub runlog: RunLogConfig,
    /// `[cache]`
    pub cache: CacheConfig,
    /// `[tenants.NAME]`, by name.
    pub tenants: TenantsConfig,
}

impl Config {
    /// Parses and checks a config from TOML text.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        checked(parse_toml(text), Self::validate)
    }

    /// Reads and checks a config from a TOML file; a parse error names it.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        checked(read_toml(path), Self::validate)
    }

    /// Checks every section, each with its owner's rules.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.host().validate()?;
        callai_providers::validate(&self.providers)?;
        self.telemetry.validate()?;
        self.server.validate()?;
        self.cache.validate()?;
        crate::tenants::validate(&self.tenants)?;
        self.runlog.validate()
    }

    /// The engine's sections.
    pub fn host(&self) -> HostConfig {
        HostConfig {
            retry: self.retry.clone(),
            call_accounting: self.call_accounting,
            policy: self.policy.clone(),
            mock: self.mock,
            defaults: self.defaults.clone(),
            limits: self.limits,
        }
    }

    /// Starts the `[providers.NAME]` sections' providers, reading their API
    /// keys through `env`.
    pub fn start_providers(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Providers, ConfigError> {
        callai_providers::start(&self.providers, env, &self.limits)
    }

    /// A host builder for this config with its providers started (API keys
    /// read through `env`); add the mock or an embedder's own providers,
    /// then `build`.
    pub fn host_builder(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<HostBuilder, ConfigError> {
        Ok(callai_engine::Host::builder(self.host()).providers(self.start_providers(env)?))
    }
}

#[cfg(test)]
mod tests;
