//! `[telemetry]`: OpenTelemetry traces over OTLP/HTTP, read by `callai run`
//! and `callai serve`.

use callai_engine::config::{ConfigError, invalid};
use serde::{Deserialize, Serialize};

/// `[telemetry]`: where traces go, and as which service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct TelemetryConfig {
    /// The collector's base URL (`http://127.0.0.1:4318`); traces go to
    /// `{otlpEndpoint}/v1/traces`. Unset: `OTEL_EXPORTER_OTLP_ENDPOINT`,
    /// and with neither, no traces.
    pub otlp_endpoint: Option<String>,
    /// The `service.name` resource attribute.
    pub service_name: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            otlp_endpoint: None,
            service_name: "callai".into(),
        }
    }
}

impl TelemetryConfig {
    /// Checks the endpoint's URL and the service name, naming the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(url) = &self.otlp_endpoint {
            check_http_url(url).map_err(|m| invalid("telemetry.otlpEndpoint", m))?;
        }
        if self.service_name.is_empty() {
            return Err(invalid("telemetry.serviceName", "must not be empty".into()));
        }
        Ok(())
    }
}

/// Whether `text` is an `http://` or `https://` URL with a host.
pub(crate) fn check_http_url(text: &str) -> Result<url::Url, String> {
    match url::Url::parse(text) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => Ok(url),
        _ => Err(format!("{text:?} is not an http:// or https:// URL")),
    }
}

#[cfg(test)]
mod tests {
    use super::check_http_url;

    #[test]
    fn only_http_urls_with_a_host_pass() {
        for good in ["http://127.0.0.1:4318", "https://collector.invalid/otlp"] {
            assert!(check_http_url(good).is_ok(), "{good}");
        }
        // (`http:///x` is `http://x/` to a WHATWG parser, as to a browser.)
        for bad in ["ftp://x", "http://", "127.0.0.1:4318", "", "http://a b"] {
            assert!(check_http_url(bad).is_err(), "{bad}");
        }
    }
}
