//! The host config file that `callai run` and `callai serve` take: every
//! section, each defined and checked by the crate that reads it, composed
//! here into one TOML file; and the run log it names, opened. Every key is
//! optional; an unknown key or a value out of range is an error naming the
//! key, at start-up.
//!
//! | section | owner |
//! |---|---|
//! | `[retry]`, `[callAccounting]`, `[policy]`, `[mock]`, `[defaults]`, `[limits]` | callai-engine ([`HostConfig`], declared there once) |
//! | `[providers.NAME]` | callai-providers |
//! | `[telemetry]` | callai-telemetry |
//! | `[server]`, `[runlog]`, `[cache]`, `[tenants.NAME]`, `[pricing]`, `[log]`, `[responseCache]` | callai-gateway, the domain of `callai serve` |
//!
//! Beside the file, the host's prices ([`PriceList`]: each provider's
//! `prices` and the `[pricing] file`), which `serve` and `callai run` price
//! every attempt at.
//!
//! ```
//! let config = callai_config::Config::from_toml("[limits]\nwallMs = 5000\n")?;
//! assert_eq!(config.host.limits.wall_ms, 5000);
//! # Ok::<(), callai_engine::config::ConfigError>(())
//! ```

#![warn(missing_docs)]

mod locate;
mod money;
mod open_log;
mod prices;
mod resolved;

pub use callai_gateway::config::{
    BudgetConfig, CacheConfig, LogConfig, LogFormat, PricingConfig, ResponseCacheConfig,
    ResponseCacheMode, RunLogConfig, ServerConfig, TenantConfig, TenantsConfig, is_tenant_name,
    parse_listen,
};
pub use locate::{located, located_in_file, position};
pub use money::money_notes;
pub use open_log::{OpenLog, open_runlog};
pub use prices::PriceList;
pub use resolved::ResolvedConfig;

use callai_engine::config::{ConfigError, checked, parse_toml, read_sections, read_toml};
use callai_engine::{HostBuilder, HostConfig, Providers};
use callai_providers::ProvidersConfig;
use callai_telemetry::TelemetryConfig;
use serde::Deserialize;
use serde::de::MapAccess;
use std::path::Path;
use std::sync::LazyLock;

/// The whole config file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    /// The engine's sections: `[retry]`, `[callAccounting]`, `[policy]`,
    /// `[mock]`, `[defaults]`, `[limits]`.
    pub host: HostConfig,
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
    /// `[pricing]`
    pub pricing: PricingConfig,
    /// `[log]`
    pub log: LogConfig,
    /// `[responseCache]`
    pub response_cache: ResponseCacheConfig,
}

impl Config {
    /// Parses and checks a config from TOML text.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        checked(parse_toml(text), Self::validate)
    }

    /// Reads and checks a config from a TOML file; an error names it, and
    /// the line and column of the key it is about.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let mut config: Self = read_toml(path)?;
        Self::validate(&config).map_err(|e| located_in_file(e, path))?;
        // A price list named relative to the config is beside it.
        if let Some(file) = &mut config.pricing.file
            && file.is_relative()
            && let Some(dir) = path.parent()
        {
            *file = dir.join(&*file);
        }
        Ok(config)
    }

    /// Checks every section, each with its owner's rules.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.host.validate()?;
        callai_providers::validate(&self.providers)?;
        self.telemetry.validate()?;
        self.server.validate()?;
        self.cache.validate()?;
        self.response_cache.validate()?;
        let ceiling = self.host.retry.provider_max_tokens;
        callai_gateway::config::validate_tenants(&self.tenants, ceiling)?;
        self.pricing.validate()?;
        for (name, section) in &self.providers {
            if let Some(prices) = &section.prices {
                let key = |k: &str| format!("providers.{name}.prices.{k}");
                self.pricing.check_price(&key("input"), prices.input)?;
                self.pricing.check_price(&key("output"), prices.output)?;
                if let Some(written) = prices.cache_write {
                    self.pricing.check_price(&key("cacheWrite"), written)?;
                }
                if let Some(cached) = prices.cached_input {
                    self.pricing.check_price(&key("cachedInput"), cached)?;
                }
            }
        }
        self.runlog.validate()
    }

    /// Starts the `[providers.NAME]` sections' providers, reading their API
    /// keys through `env`.
    pub fn start_providers(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Providers, ConfigError> {
        callai_providers::start(&self.providers, env, &self.host.limits)
    }

    /// A host builder for this config with its providers started (API keys
    /// read through `env`); add the mock or an embedder's own providers,
    /// then `build`.
    pub fn host_builder(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<HostBuilder, ConfigError> {
        Ok(callai_engine::Host::builder(self.host.clone()).providers(self.start_providers(env)?))
    }
}

/// The sections this crate's callers own, after the engine's.
const OWN_SECTIONS: [&str; 9] = [
    "providers",
    "telemetry",
    "server",
    "runlog",
    "cache",
    "tenants",
    "pricing",
    "log",
    "responseCache",
];

/// Every section, in the order an unknown one's refusal lists them.
static SECTIONS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    HostConfig::SECTIONS
        .iter()
        .chain(&OWN_SECTIONS)
        .copied()
        .collect()
});

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Config;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a config file")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Config, A::Error> {
                let mut config = Config::default();
                let Config {
                    host,
                    providers,
                    telemetry,
                    server,
                    runlog,
                    cache,
                    tenants,
                    pricing,
                    log,
                    response_cache,
                } = &mut config;
                let sections: &'static [&'static str] = &SECTIONS;
                read_sections(map, sections, host, |key, map| {
                    match key {
                        "providers" => *providers = map.next_value()?,
                        "telemetry" => *telemetry = map.next_value()?,
                        "server" => *server = map.next_value()?,
                        "runlog" => *runlog = map.next_value()?,
                        "cache" => *cache = map.next_value()?,
                        "tenants" => *tenants = map.next_value()?,
                        "pricing" => *pricing = map.next_value()?,
                        "log" => *log = map.next_value()?,
                        "responseCache" => *response_cache = map.next_value()?,
                        other => unreachable!("{other} is in SECTIONS"),
                    }
                    Ok(())
                })?;
                Ok(config)
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests;
