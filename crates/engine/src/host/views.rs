//! Views of one host for one caller: the same engine, providers, schema
//! cache and circuit breakers, with what the caller changes (a provider of
//! its own, its share of the cache, its default `maxTokens`, its narrower
//! policy).

use super::Host;
use crate::provider::Provider;
use std::sync::Arc;

impl Host {
    /// The same host with `provider` under `name` (e.g. a mock serving one
    /// run's script).
    pub fn with_provider(&self, name: &str, provider: Arc<dyn Provider>) -> Self {
        Self {
            providers: self.providers.clone().with(name, provider),
            ..self.clone()
        }
    }

    /// The same host, its calls `owner`'s (a tenant of `serve`): the
    /// schemas they compile are charged to `owner` in the schema cache it
    /// shares with the others, so one caller's flood of new schemas evicts
    /// its own first.
    pub fn owned_by(&self, owner: &str) -> Self {
        Self {
            owner: owner.into(),
            ..self.clone()
        }
    }

    /// The same host with `max_tokens` for a call that names none (a
    /// caller's own default, as `callai serve`'s tenants may have; at most
    /// `retry.providerMaxTokens` still).
    pub fn with_default_max_tokens(&self, max_tokens: u32) -> Self {
        let mut config = (*self.config).clone();
        config.retry.default_max_tokens = max_tokens;
        Self {
            config: Arc::new(config),
            ..self.clone()
        }
    }

    /// The same host with its policy narrowed to `allowed` (a caller's own
    /// list, as `callai serve`'s tenants have): a request may name a
    /// provider only if both this host's policy and `allowed` let it.
    pub fn narrowed_to(&self, allowed: &[String]) -> Self {
        let mut config = (*self.config).clone();
        let narrowed = allowed
            .iter()
            .filter(|p| config.provider_allowed(p))
            .cloned()
            .collect();
        config.policy.allowed_providers = Some(narrowed);
        Self {
            config: Arc::new(config),
            ..self.clone()
        }
    }
}
