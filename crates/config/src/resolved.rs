//! The config as a host runs it: every section, every key with its value,
//! the defaults filled in (a provider's from its kind), in the file's own
//! spelling; what `callai config check` prints.

use crate::{CacheConfig, Config, RunLogConfig, ServerConfig, TenantsConfig};
use callai_engine::config::{
    CallAccounting, ConfigError, DefaultsConfig, Limits, MockConfig, ModelRoute, PolicyConfig,
    RetryConfig,
};
use callai_providers::ProviderSettings;
use callai_telemetry::TelemetryConfig;
use serde::Serialize;
use std::collections::BTreeMap;

/// Every section of a [`Config`] with its defaults filled in; serialize it
/// (as TOML) to see what a host reads.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedConfig<'a> {
    /// `[retry]`
    pub retry: &'a RetryConfig,
    /// `[callAccounting]`
    pub call_accounting: &'a CallAccounting,
    /// `[policy]`
    pub policy: &'a PolicyConfig,
    /// `[mock]`
    pub mock: &'a MockConfig,
    /// `[defaults]`
    pub defaults: &'a DefaultsConfig,
    /// `[limits]`
    pub limits: &'a Limits,
    /// `[models.NAME]`: model names routed to their targets.
    pub models: &'a BTreeMap<String, ModelRoute>,
    /// `[providers.NAME]`, each with its kind's defaults.
    pub providers: BTreeMap<&'a str, ProviderSettings>,
    /// `[telemetry]`
    pub telemetry: &'a TelemetryConfig,
    /// `[server]`
    pub server: &'a ServerConfig,
    /// `[runlog]`
    pub runlog: &'a RunLogConfig,
    /// `[cache]`
    pub cache: &'a CacheConfig,
    /// `[tenants.NAME]`
    pub tenants: &'a TenantsConfig,
    /// `[pricing]`
    pub pricing: &'a crate::PricingConfig,
    /// `[log]`
    pub log: &'a crate::LogConfig,
    /// `[responseCache]`
    pub response_cache: &'a crate::ResponseCacheConfig,
}

impl Config {
    /// The config with its defaults filled in, or the error naming the
    /// provider section whose kind cannot be told.
    pub fn resolved(&self) -> Result<ResolvedConfig<'_>, ConfigError> {
        let providers = self
            .providers
            .iter()
            .map(|(name, section)| Ok((name.as_str(), section.settings(name)?)))
            .collect::<Result<_, ConfigError>>()?;
        let host = &self.host;
        Ok(ResolvedConfig {
            retry: &host.retry,
            call_accounting: &host.call_accounting,
            policy: &host.policy,
            mock: &host.mock,
            defaults: &host.defaults,
            limits: &host.limits,
            models: &host.models,
            providers,
            telemetry: &self.telemetry,
            server: &self.server,
            runlog: &self.runlog,
            cache: &self.cache,
            tenants: &self.tenants,
            pricing: &self.pricing,
            log: &self.log,
            response_cache: &self.response_cache,
        })
    }

    /// Every environment variable the config names, with the key that
    /// names it: providers' API keys, the admin's, the metrics scraper's
    /// and the tenants' tokens.
    pub fn variables(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (name, section) in &self.providers {
            if let Ok(settings) = section.settings(name)
                && !settings.api_key_env.is_empty()
            {
                out.push((format!("providers.{name}.apiKeyEnv"), settings.api_key_env));
            }
        }
        for (key, name) in [
            ("server.tokenEnv", &self.server.token_env),
            ("server.metricsTokenEnv", &self.server.metrics_token_env),
        ] {
            if !name.is_empty() {
                out.push((key.to_owned(), name.clone()));
            }
        }
        for (name, tenant) in &self.tenants {
            out.push((format!("tenants.{name}.tokenEnv"), tenant.token_env.clone()));
        }
        out
    }
}
