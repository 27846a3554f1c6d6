//! [`HostBuilder`]: a [`Host`] from its config, the built-in mock, an
//! embedder's providers, the effects the engine reads and the prices it
//! charges at.

use super::Host;
use crate::config::{ConfigError, HostConfig};
use crate::cost::PriceBook;
use crate::engine::{Clock, Effects, Jitter, Sleeper};
use crate::mock::{MockProvider, MockScript};
use crate::provider::{Provider, Providers};
use std::sync::Arc;

/// Builds a [`Host`]: the built-in mock and the providers registered with
/// it (an embedder's own, or the HTTP ones `callai-providers` starts from
/// the config's `[providers.NAME]` sections).
pub struct HostBuilder {
    config: HostConfig,
    mock: Option<MockProvider>,
    extra: Providers,
    effects: Effects,
    prices: Option<Arc<dyn PriceBook>>,
}

impl std::fmt::Debug for HostBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBuilder")
            .field("extra", &self.extra)
            .finish_non_exhaustive()
    }
}

impl HostBuilder {
    /// The mock provider to use (default: an empty script, so a request to
    /// `mock` fails at once until a script is given).
    pub fn mock(mut self, mock: MockProvider) -> Self {
        self.mock = Some(mock);
        self
    }

    /// Registers an embedder's own provider under `name`; requests, routing
    /// and `policy.allowedProviders` treat it like a configured one. It
    /// replaces a configured provider of the same name.
    pub fn provider(mut self, name: impl Into<String>, provider: Arc<dyn Provider>) -> Self {
        self.extra.insert(name, provider);
        self
    }

    /// Registers every provider of `providers` under its name, as
    /// [`HostBuilder::provider`] does one.
    pub fn providers(mut self, providers: Providers) -> Self {
        self.extra.extend(providers);
        self
    }

    /// The clock the engine reads (default: tokio's, paused in paused tests).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.effects.clock = clock;
        self
    }

    /// How the engine waits between requests (default: tokio's timer).
    pub fn sleeper(mut self, sleeper: Arc<dyn Sleeper>) -> Self {
        self.effects.sleeper = sleeper;
        self
    }

    /// Where backoff jitter comes from (default: seeded from the clock).
    pub fn jitter(mut self, jitter: Arc<dyn Jitter>) -> Self {
        self.effects.jitter = jitter;
        self
    }

    /// The prices each provider request is charged at: every request that
    /// reached a provider is priced once, at its own provider's and
    /// model's price, for the call's watchers
    /// ([`crate::observe::CallWatch::request_finished`]) and a budget in
    /// money alike (default: none, so no request has a cost and a budget
    /// in money refuses every call as unpriced).
    pub fn prices(mut self, prices: Arc<dyn PriceBook>) -> Self {
        self.prices = Some(prices);
        self
    }

    /// Checks that `defaults.provider` and `policy.allowedProviders` name
    /// providers that exist, and builds the host.
    pub fn build(self) -> Result<Host, ConfigError> {
        let config = self.config;
        let mock = self.mock.unwrap_or_else(|| {
            MockProvider::new(MockScript::default(), config.mock.structured_output())
                .with_latency(config.mock.latency())
        });
        let mut providers = Providers::new().with("mock", Arc::new(mock));
        providers.extend(self.extra);
        let mut host = Host::new(Arc::new(config), providers)?;
        host.effects = self.effects;
        host.prices = self.prices;
        Ok(host)
    }
}

impl HostBuilder {
    pub(super) fn new(config: HostConfig) -> Self {
        Self {
            config,
            mock: None,
            extra: Providers::new(),
            effects: Effects::default(),
            prices: None,
        }
    }
}
