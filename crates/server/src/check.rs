//! `callai config check`: what start-up checks of a config, without
//! binding a socket, opening a run log or compiling a pack.

use crate::layers::auth::{self, OpenListen};
use callai_config::{Config, PriceList, parse_listen};
use callai_engine::config::{ConfigError, invalid};
use callai_gateway::tenants::{ServerTokens, Tenants};

/// Checks `config` as `Server::bind` does before it opens
/// anything: the listen address and whether it needs a token, the admin's
/// and the metrics scraper's tokens, the providers (their keys read
/// through `env`), `defaults.provider`, and every tenant (its token, that
/// no two callers share one, its `allowedProviders`). The first error
/// names its key.
pub fn check_config(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    let listen = parse_listen(&config.server.listen).map_err(|m| invalid("server.listen", m))?;
    let admin = auth::admin_token(
        &config.server.token_env,
        listen,
        config.tenants.len(),
        OpenListen::LoopbackOnly,
        env,
    )
    .map_err(keyed)?;
    let metrics = auth::server_token(
        "server.metricsTokenEnv",
        &config.server.metrics_token_env,
        env,
    )
    .map_err(keyed)?;
    let host = config
        .host_builder(env)?
        .mock(crate::setup::mock(config))
        .build()?;
    PriceList::load(config)?;
    let tokens = ServerTokens {
        admin: admin.as_deref(),
        metrics: metrics.as_deref(),
    };
    Tenants::new(&host, tokens, &config.tenants, env)?;
    Ok(())
}

/// A start-up refusal `key: message` as the config error naming `key`.
fn keyed(refusal: String) -> ConfigError {
    match refusal.split_once(": ") {
        Some((key, message)) => invalid(key, message.to_owned()),
        None => ConfigError::Parse(refusal),
    }
}

#[cfg(test)]
mod tests {
    use super::check_config;
    use callai_config::Config;

    fn env(name: &str) -> Option<String> {
        Some(format!("value of {name}"))
    }

    #[test]
    fn what_start_up_refuses_is_refused_naming_its_key() {
        for (toml, key) in [
            ("[server]\nlisten = \"0.0.0.0:80\"\n", "server.tokenEnv"),
            ("[defaults]\nprovider = \"nope\"\n", "defaults.provider"),
            (
                "[tenants.a]\ntokenEnv = \"T\"\nallowedProviders = [\"mock\", \"nope\"]\n",
                "tenants.a.allowedProviders[1]",
            ),
            (
                "[tenants.a]\ntokenEnv = \"T\"\n[tenants.b]\ntokenEnv = \"T\"\n",
                "tenants.b.tokenEnv",
            ),
        ] {
            let config = Config::from_toml(toml).unwrap();
            let e = check_config(&config, &env).unwrap_err();
            assert_eq!(e.key(), Some(key), "{toml}: {e}");
        }
        let fine = Config::from_toml("[tenants.a]\ntokenEnv = \"T\"\n").unwrap();
        check_config(&fine, &env).unwrap();
    }
}
