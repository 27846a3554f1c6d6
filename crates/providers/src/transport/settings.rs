//! The keys of `[providers.NAME]` about how its server is reached: the
//! CA it is trusted through (`caFile`), this host's certificate for mutual
//! TLS (`clientCert`, `clientKey`), a CONNECT proxy (`proxy`,
//! `proxyAuthEnv`), the HTTP version (`http2`) and the connection pool
//! (`maxConnections`, `maxStreamsPerConnection`, `idleMs`). Checked at
//! start-up, each error naming its key.

use crate::config::ProviderConfig;
use callai_engine::config::{ConfigError, invalid};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// `http2`: which HTTP version a provider is spoken to in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Http2 {
    /// HTTP/2 where TLS negotiates it (ALPN), HTTP/1.1 otherwise and over
    /// plain `http://`.
    #[default]
    Auto,
    /// HTTP/2 only: negotiated over TLS, spoken at once (prior knowledge)
    /// over plain `http://`.
    Always,
    /// HTTP/1.1 only.
    Never,
}

/// The most connections to one provider when `maxConnections` is absent.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// How long an unused connection stays open when `idleMs` is absent.
pub const DEFAULT_IDLE_MS: u64 = 90_000;

/// A provider's connection settings, defaults filled in.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TransportSettings {
    /// PEM certificates trusted for this provider only, beside the
    /// system's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// This host's certificate chain (PEM), for mutual TLS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_cert: Option<PathBuf>,
    /// Its private key (PEM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_key: Option<PathBuf>,
    /// The CONNECT proxy (`http://` or `https://`) requests go through;
    /// `HTTPS_PROXY`, `HTTP_PROXY` and `NO_PROXY` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    /// The variable holding the proxy's `user:password`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_auth_env: Option<String>,
    /// The HTTP version.
    pub http2: Http2,
    /// The most connections open to the provider at once.
    pub max_connections: usize,
    /// The most streams sent on one HTTP/2 connection, when lower than
    /// the server's own limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_streams_per_connection: Option<usize>,
    /// How long an unused connection stays open, in milliseconds.
    pub idle_ms: u64,
}

impl Default for TransportSettings {
    fn default() -> Self {
        Self {
            ca_file: None,
            client_cert: None,
            client_key: None,
            proxy: None,
            proxy_auth_env: None,
            http2: Http2::Auto,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_streams_per_connection: None,
            idle_ms: DEFAULT_IDLE_MS,
        }
    }
}

impl TransportSettings {
    /// How long an unused connection stays open.
    pub fn idle(&self) -> Duration {
        Duration::from_millis(self.idle_ms)
    }
}

impl ProviderConfig {
    /// The section's connection settings, defaults filled in.
    pub(crate) fn transport(&self) -> TransportSettings {
        let defaults = TransportSettings::default();
        TransportSettings {
            ca_file: self.ca_file.clone(),
            client_cert: self.client_cert.clone(),
            client_key: self.client_key.clone(),
            proxy: self.proxy.clone(),
            proxy_auth_env: self.proxy_auth_env.clone(),
            http2: self.http2.unwrap_or_default(),
            max_connections: self.max_connections.unwrap_or(defaults.max_connections),
            max_streams_per_connection: self.max_streams_per_connection,
            idle_ms: self.idle_ms.unwrap_or(defaults.idle_ms),
        }
    }
}

/// Checks what can be checked before a file is read: the pool's numbers,
/// the proxy's URL (no credentials in it: they go in `proxyAuthEnv`), a
/// client certificate given with its key.
pub(crate) fn check(name: &str, s: &TransportSettings) -> Result<(), ConfigError> {
    let key = |k: &str| format!("providers.{name}.{k}");
    if !(1..=100_000).contains(&s.max_connections) {
        return Err(invalid(
            &key("maxConnections"),
            format!("must be 1..100000, got {}", s.max_connections),
        ));
    }
    if let Some(n) = s.max_streams_per_connection
        && !(1..=100_000).contains(&n)
    {
        return Err(invalid(
            &key("maxStreamsPerConnection"),
            format!("must be 1..100000, got {n}"),
        ));
    }
    if !(1..=86_400_000).contains(&s.idle_ms) {
        return Err(invalid(
            &key("idleMs"),
            format!("must be 1..86400000, got {}", s.idle_ms),
        ));
    }
    match (&s.client_cert, &s.client_key) {
        (Some(_), None) => {
            return Err(invalid(
                &key("clientKey"),
                "is required with clientCert (the certificate's private key, PEM)".into(),
            ));
        }
        (None, Some(_)) => {
            return Err(invalid(
                &key("clientCert"),
                "is required with clientKey (the certificate chain, PEM)".into(),
            ));
        }
        _ => {}
    }
    if let Some(proxy) = &s.proxy {
        check_proxy(&key("proxy"), proxy)?;
    }
    Ok(())
}

/// A proxy URL: `http://` or `https://`, a host, no credentials.
fn check_proxy(key: &str, proxy: &str) -> Result<(), ConfigError> {
    let url = url::Url::parse(proxy)
        .map_err(|e| invalid(key, format!("is not a URL ({e}): {proxy:?}")))?;
    if !matches!(url.scheme(), "http" | "https") || !url.has_host() {
        return Err(invalid(
            key,
            format!("must be an http:// or https:// proxy URL, got {proxy:?}"),
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(
            key,
            "must not hold credentials; name the variable that holds user:password in \
             proxyAuthEnv"
                .into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(toml_text: &str) -> Result<(), String> {
        let section: ProviderConfig = toml::from_str(toml_text).map_err(|e| e.to_string())?;
        check("p", &section.transport()).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_and_bad_values_name_their_key() {
        let s = ProviderConfig::default().transport();
        assert_eq!(s, TransportSettings::default());
        assert_eq!(s.max_connections, DEFAULT_MAX_CONNECTIONS);
        assert!(checked("http2 = \"always\"\nmaxConnections = 8").is_ok());
        for (text, key) in [
            ("maxConnections = 0", "maxConnections"),
            ("maxStreamsPerConnection = 0", "maxStreamsPerConnection"),
            ("idleMs = 0", "idleMs"),
            ("clientCert = \"c.pem\"", "clientKey"),
            ("clientKey = \"k.pem\"", "clientCert"),
            ("proxy = \"socks5://127.0.0.1:1080\"", "proxy"),
            ("proxy = \"http://user:pw@127.0.0.1:3128\"", "proxy"),
        ] {
            let e = checked(text).unwrap_err();
            assert!(e.contains(&format!("providers.p.{key}")), "{text}: {e}");
        }
        assert!(checked("http2 = \"sometimes\"").is_err());
    }
}
