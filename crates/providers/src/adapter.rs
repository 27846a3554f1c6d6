//! An HTTP provider: one wire format (OpenAI-compatible, Anthropic) behind
//! the common [`Provider`] plumbing.

use super::events::{StreamRedaction, Streamed};
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
    /// The request body for one attempt, as JSON bytes; `model` when the
    /// request names none. Serialized straight from the request (the schema
    /// is borrowed, never copied into a JSON tree per attempt).
    fn body(model: &str, request: &ProviderRequest, delivery: Delivery) -> Vec<u8>;
    /// Reads a success response.
    fn reply(response: &Value) -> Result<ProviderReply, ProviderFailure>;
    /// A response as [`WireFormat::reply`] reads it, before any event.
    fn stream_start() -> Value;
    /// Folds one streamed event into the response `acc` builds up; the text
    /// it adds, if any.
    fn fold_event(acc: &mut Value, event: &Value) -> Result<Option<String>, ProviderFailure>;
}

/// Whether an attempt asks for its answer whole or as server-sent events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// One JSON body.
    Whole,
    /// A stream of events.
    Streamed,
}

/// A provider speaking wire format `W`.
pub struct HttpProvider<W> {
    http: HttpClient,
    /// The endpoint, parsed once: the URL every attempt goes to.
    endpoint: reqwest::Url,
    /// The auth (and version) headers every attempt carries.
    headers: Vec<(&'static str, String)>,
    model: String,
    native: bool,
    wire: PhantomData<W>,
}

impl<W: WireFormat> HttpProvider<W> {
    /// A provider at `base_url` (e.g. `https://api.openai.com/v1`); an
    /// error names a base URL that does not parse.
    pub fn new(
        http: HttpClient,
        base_url: &str,
        model: &str,
        native: bool,
    ) -> Result<Self, String> {
        let base_url = base_url.trim_end_matches('/');
        let endpoint = reqwest::Url::parse(&format!("{base_url}{}", W::PATH))
            .map_err(|e| format!("baseUrl {base_url:?} is not a URL: {e}"))?;
        Ok(Self {
            headers: W::headers(http.key()),
            http,
            endpoint,
            model: model.to_owned(),
            native,
            wire: PhantomData,
        })
    }

    /// The headers every attempt carries, borrowed.
    fn headers(&self) -> Vec<(&str, &str)> {
        self.headers.iter().map(|(k, v)| (*k, v.as_str())).collect()
    }
}

impl<W> fmt::Debug for HttpProvider<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpProvider")
            .field("endpoint", &self.endpoint.as_str())
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
            let headers = self.headers();
            let body = W::body(&self.model, request, Delivery::Whole);
            self.http
                .attempt(
                    &self.endpoint,
                    &headers,
                    body,
                    request,
                    W::NATIVE_TERMS,
                    W::reply,
                )
                .await
        })
    }

    fn complete_streaming<'a>(
        &'a self,
        request: &'a ProviderRequest,
        deltas: &'a (dyn Fn(&str) + Send + Sync),
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderFailure>> {
        Box::pin(async move {
            let headers = self.headers();
            let body = W::body(&self.model, request, Delivery::Streamed);
            let mut acc = W::stream_start();
            let mut redaction = StreamRedaction::new(self.http.redactor());
            let streamed = {
                let mut on_event = |event: &Value| {
                    if let Some(text) = W::fold_event(&mut acc, event)?
                        && let Some(out) = redaction.push(&text)
                    {
                        deltas(&out);
                    }
                    Ok(())
                };
                self.http
                    .post_events(&self.endpoint, &headers, body, &mut on_event)
                    .await?
            };
            let (status, response, streamed_text) = match streamed {
                Streamed::Events(status) => (status, acc, true),
                // The server did not stream: its whole answer is one piece.
                Streamed::Whole(status, whole) => (status, whole, false),
            };
            let mut reply = W::reply(&response).map_err(|mut f| {
                f.status = f.status.or(Some(status));
                f
            })?;
            reply.status = Some(status);
            if let std::borrow::Cow::Owned(clean) = self.http.redact(&reply.content) {
                reply.content = clean;
            }
            match redaction.finish() {
                Some(rest) if streamed_text => deltas(&rest),
                _ if !streamed_text => deltas(&reply.content),
                _ => {}
            }
            Ok(reply)
        })
    }
}
