//! An HTTP provider: one wire format (OpenAI-compatible, Anthropic) behind
//! the common [`Provider`] plumbing.

use super::http::{ApiKey, HttpClient};
use callai_engine::{BoxFuture, Provider, ProviderFailure, ProviderReply, ProviderRequest};
use serde_json::Value;
use std::fmt;
use std::marker::PhantomData;

/// What differs between providers' HTTP APIs.
pub trait WireFormat: Send + Sync + 'static {
    /// The endpoint under the base URL.
    const PATH: &'static str;
    /// Words a 400 uses when it rejects the native structured-output mechanism.
    const NATIVE_TERMS: &'static [&'static str];
    /// The auth (and version) headers.
    fn headers(key: Option<&ApiKey>) -> Vec<(&'static str, String)>;
    /// The request body for one attempt; `model` when the request names none.
    fn body(model: &str, request: &ProviderRequest) -> Value;
    /// Reads a success response.
    fn reply(response: &Value) -> Result<ProviderReply, ProviderFailure>;
}

/// A provider speaking wire format `W`.
pub struct HttpProvider<W> {
    http: HttpClient,
    base_url: String,
    model: String,
    native: bool,
    wire: PhantomData<W>,
}

impl<W: WireFormat> HttpProvider<W> {
    /// A provider at `base_url` (e.g. `https://api.openai.com/v1`).
    pub fn new(http: HttpClient, base_url: &str, model: &str, native: bool) -> Self {
        Self {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            model: model.to_owned(),
            native,
            wire: PhantomData,
        }
    }
}

impl<W> fmt::Debug for HttpProvider<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpProvider")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("native", &self.native)
            .finish_non_exhaustive()
    }
}

impl<W: WireFormat> Provider for HttpProvider<W> {
    fn default_model(&self) -> &str {
        &self.model
    }

    fn supports_native(&self) -> bool {
        self.native
    }

    fn complete<'a>(
        &'a self,
        request: &'a ProviderRequest,
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderFailure>> {
        Box::pin(async move {
            let url = format!("{}{}", self.base_url, W::PATH);
            let headers = W::headers(self.http.key());
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let body = W::body(&self.model, request);
            self.http
                .attempt(&url, &headers, &body, request, W::NATIVE_TERMS, W::reply)
                .await
        })
    }
}
