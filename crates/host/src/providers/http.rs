//! What both HTTP adapters share: one reqwest client (rustls), the API key
//! kept out of every message, and the mapping of transport outcomes onto
//! [`ProviderFailure`].

use crate::provider::{FailureKind, ProviderFailure, ProviderReply, ProviderRequest};
use callai_wire::StructuredOutput;
use serde_json::Value;
use std::fmt;
use std::time::Duration;

/// An API key: shown as `[redacted]` by `Debug`, sent only in a header.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: String) -> Self {
        Self(key)
    }

    pub(super) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

/// The longest provider text kept in an error message.
const MAX_MESSAGE: usize = 500;

/// An HTTP client for one provider.
#[derive(Debug, Clone)]
pub struct HttpClient {
    client: reqwest::Client,
    key: Option<ApiKey>,
    timeout: Duration,
}

impl HttpClient {
    /// A client whose every request times out after `timeout`.
    pub fn new(key: Option<ApiKey>, timeout: Duration) -> Result<Self, String> {
        // reqwest is built without a bundled crypto provider; use ring's.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Self {
            client,
            key,
            timeout,
        })
    }

    /// The key, for the adapter's auth header.
    pub fn key(&self) -> Option<&ApiKey> {
        self.key.as_ref()
    }

    /// Removes the key from any text that leaves this module.
    pub fn redact(&self, text: &str) -> String {
        let mut text = match &self.key {
            Some(k) if !k.0.is_empty() => text.replace(&k.0, "[redacted]"),
            _ => text.to_owned(),
        };
        if text.len() > MAX_MESSAGE {
            let cut = (0..=MAX_MESSAGE)
                .rev()
                .find(|&i| text.is_char_boundary(i))
                .unwrap_or(0);
            text.truncate(cut);
            text.push('…');
        }
        text
    }

    /// POSTs `body` as JSON and returns the parsed JSON response, or the
    /// failure: timeouts, connection errors, 429 (with `retry-after`) and 5xx
    /// are transient; other statuses are rejections; a 2xx whose body is not
    /// JSON (or is cut short) is transient.
    pub async fn post_json(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: &Value,
    ) -> Result<Value, ProviderFailure> {
        let mut request = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_string());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.map_err(|e| self.transport(&e))?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64);
        let text = response.text().await.map_err(|e| self.transport(&e))?;
        if !(200..300).contains(&status) {
            let mut failure = ProviderFailure::from_status(status, self.redact(text.trim()));
            failure.retry_after = retry_after;
            return Err(failure);
        }
        serde_json::from_str(&text).map_err(|e| {
            ProviderFailure::new(
                FailureKind::Transient,
                Some(status),
                format!("the provider's response is not valid JSON ({e})"),
            )
        })
    }

    /// One attempt: POSTs `body` and reads the reply with `parse`. When the
    /// request asked for native structured output and a 400 names one of
    /// `native_terms`, the failure says the native mode was rejected.
    pub async fn attempt(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: &Value,
        request: &ProviderRequest,
        native_terms: &[&str],
        parse: fn(&Value) -> Result<ProviderReply, ProviderFailure>,
    ) -> Result<ProviderReply, ProviderFailure> {
        let native = request
            .structured
            .as_ref()
            .is_some_and(|s| s.mode == StructuredOutput::Native);
        match self.post_json(url, headers, body).await {
            Ok(response) => parse(&response),
            Err(mut f) if native && rejects_native(&f, native_terms) => {
                f.kind = FailureKind::NativeUnsupported;
                Err(f)
            }
            Err(f) => Err(f),
        }
    }

    fn transport(&self, e: &reqwest::Error) -> ProviderFailure {
        let what = if e.is_timeout() {
            format!("timed out after {} ms", self.timeout.as_millis())
        } else if e.is_connect() {
            "could not connect".to_owned()
        } else if e.is_body() || e.is_decode() {
            "the response body was cut short".to_owned()
        } else {
            "the request failed".to_owned()
        };
        // reqwest's own text names the URL, never a header.
        let detail = self.redact(&e.to_string());
        ProviderFailure::new(FailureKind::Transient, None, format!("{what}: {detail}"))
    }
}

/// Reads a token count; absent, null or out of range is `None`.
pub fn tokens(v: Option<&Value>) -> Option<u32> {
    v?.as_u64().and_then(|n| u32::try_from(n).ok())
}

/// Whether a 400 rejects the native structured-output mechanism (the model
/// or server does not support it), naming one of `needles`.
fn rejects_native(failure: &ProviderFailure, needles: &[&str]) -> bool {
    let text = failure.message.to_ascii_lowercase();
    failure.status == Some(400) && needles.iter().any(|n| text.contains(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_never_show() {
        let key = ApiKey::new("sk-test-SECRET".into());
        assert_eq!(format!("{key:?}"), "ApiKey([redacted])");
        let c = HttpClient::new(Some(key), Duration::from_secs(1)).unwrap();
        assert_eq!(
            c.redact("bad key sk-test-SECRET given"),
            "bad key [redacted] given"
        );
        assert!(c.redact(&"x".repeat(2000)).chars().count() <= MAX_MESSAGE + 1);
    }
}
