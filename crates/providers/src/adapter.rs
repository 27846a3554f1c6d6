//! An HTTP provider: one wire format (OpenAI-compatible, Anthropic) behind
//! the common [`Provider`] plumbing.

use super::auth::Authorize;
use super::embeddings::EmbeddingsFormat;
use super::events::{Sse, Streamed};
use super::http::{ApiKey, HttpClient};
use super::redact::StreamRedaction;
use super::upstream::{KeyHeader, Upstream};
use callai_engine::{
    BoxFuture, DeltaSink, FailureKind, Provider, ProviderFailure, ProviderReply, ProviderRequest,
};
use reqwest::header::HeaderMap;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

/// What differs between providers' HTTP APIs.
pub trait WireFormat: Send + Sync + 'static {
    /// The endpoint under the base URL.
    const PATH: &'static str;
    /// Words a 400 uses when it rejects the native structured-output mechanism.
    const NATIVE_TERMS: &'static [&'static str];
    /// Whether it takes a client's prompt-caching breakpoints
    /// (`cache_control`).
    const PROMPT_CACHE: bool = false;
    /// Whether it takes extended thinking (`thinking`) and thinking blocks.
    const THINKING: bool = false;
    /// How it serves embeddings ([`crate::embeddings::NoEmbeddings`] when
    /// it serves none).
    type Embeddings: EmbeddingsFormat;
    /// The endpoint under the base URL for `model` and `delivery`, when it
    /// names the model (Gemini's `/models/M:generateContent`), with the
    /// query parameters it adds, or why `model` can name none; `None` (the
    /// default): [`WireFormat::PATH`] for both.
    fn path_for(_model: &str, _delivery: Delivery) -> Option<Result<ModelPath, String>> {
        None
    }
    /// Whether `model` takes a reasoning effort. None does by default.
    fn takes_reasoning(_model: &str) -> bool {
        false
    }
    /// Why `request` cannot be sent to it, if it cannot (an image it takes
    /// only inline): a failure before any request. None by default.
    fn unsendable(_request: &ProviderRequest) -> Option<String> {
        None
    }
    /// The event of a streamed answer whose frame is of type `kind` (an
    /// SSE `event:`, an AWS event stream's `:event-type`) and carries
    /// `data` ([`by_data`] for a format whose data says what it is).
    fn event(kind: &str, data: &str) -> serde_json::Result<Self::Event>;
    /// The auth (and version) headers, the key in `key_header`.
    fn headers(key: Option<&ApiKey>, key_header: KeyHeader) -> Vec<(&'static str, String)>;
    /// A whole success answer, typed.
    type Answer: DeserializeOwned + Send;
    /// One event of a streamed answer, typed.
    type Event: Send;
    /// A streamed answer as far as its events went.
    type Folded: Default + Send;
    /// The request body for one attempt, as JSON bytes; `model` when the
    /// request names none. Serialized straight from the request (the schema
    /// is borrowed, never copied into a JSON tree per attempt).
    fn body(
        model: &str,
        request: &ProviderRequest,
        delivery: Delivery,
        upstream: &Upstream,
    ) -> Vec<u8>;
    /// Reads a success answer.
    fn reply(answer: Self::Answer) -> Result<ProviderReply, ProviderFailure>;
    /// Folds one streamed event in; the text it adds, if any.
    fn fold(acc: &mut Self::Folded, event: Self::Event) -> Result<Option<String>, ProviderFailure>;
    /// The stream's own end marker came (OpenAI's `[DONE]`).
    fn done(acc: &mut Self::Folded);
    /// The reply a stream made, once it ended; a failure when it was cut.
    fn finish(acc: Self::Folded) -> Result<ProviderReply, ProviderFailure>;
    /// What the reply means given the request it answers (Anthropic's
    /// native structured output is a tool call, which is the answer's JSON
    /// only when the request asked for it). Nothing by default.
    fn settle(_reply: &mut ProviderReply, _request: &ProviderRequest) {}
}

/// A tool call's arguments as the JSON object a provider's tool-use
/// block needs (`{}` for none, or for text that is not an object: a
/// conversation may carry a malformed call a model made).
pub fn object(arguments: &str) -> Cow<'_, RawValue> {
    let text = arguments.trim();
    match serde_json::from_str::<&RawValue>(text) {
        Ok(raw) if text.starts_with('{') => Cow::Borrowed(raw),
        _ => Cow::Owned(RawValue::from_string("{}".to_owned()).expect("{} is JSON")),
    }
}

/// The reply of a request for native structured output through a forced
/// tool (`tool`, as Anthropic's API and Bedrock's Converse take it): that
/// call's input is the reply's text, not a tool call.
pub fn settle_forced_tool(reply: &mut ProviderReply, request: &ProviderRequest, tool: &str) {
    let native = request
        .structured
        .as_ref()
        .is_some_and(|s| s.mode == callai_wire::StructuredOutput::Native);
    if native && let Some(i) = reply.tool_calls.iter().position(|c| c.name == tool) {
        reply.content = reply.tool_calls.remove(i).arguments;
    }
}

/// An event read from its data alone, whatever its frame's type: the
/// SSE formats' own events say what they are.
pub fn by_data<E: DeserializeOwned>(_kind: &str, data: &str) -> serde_json::Result<E> {
    serde_json::from_str(data)
}

/// An endpoint that names its model: the path under the base URL, and the
/// query parameters it adds.
pub type ModelPath = (String, &'static [(&'static str, &'static str)]);

/// Whether an attempt asks for its answer whole or as server-sent events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// One JSON body.
    Whole,
    /// A stream of events.
    Streamed,
}

/// Where a provider's requests go: its API root, and the headers and query
/// parameters its config adds.
#[derive(Debug, Clone, Copy)]
pub struct Endpoint<'a> {
    /// The API root, e.g. `https://api.openai.com/v1`.
    pub base_url: &'a str,
    /// Headers for every request.
    pub headers: &'a BTreeMap<String, String>,
    /// Query parameters for every request.
    pub query: &'a BTreeMap<String, String>,
    /// The header the key goes in.
    pub key_header: KeyHeader,
}

/// A provider speaking wire format `W`.
pub struct HttpProvider<W> {
    http: HttpClient,
    /// The API root, for a wire format whose endpoint names the model.
    base: String,
    /// The query parameters the config adds to every request.
    query: Vec<(String, String)>,
    /// The endpoint, parsed once: the URL every attempt goes to.
    endpoint: reqwest::Url,
    /// The auth (and version) headers every attempt carries.
    headers: HeaderMap,
    model: String,
    native: bool,
    /// Input tokens it adds to each request unseen.
    overhead: u64,
    /// Whether its model takes images.
    vision: bool,
    /// What its config adds to each body.
    upstream: Upstream,
    /// What authorizes each request, when that is made per request
    /// (Vertex AI's tokens, Bedrock's signatures).
    auth: Option<Box<dyn Authorize>>,
    wire: PhantomData<W>,
}

impl<W: WireFormat> HttpProvider<W> {
    /// A provider at `endpoint` (its root, e.g.
    /// `https://api.openai.com/v1`, with the headers and query parameters
    /// its config adds); an error names a base URL that does not parse.
    pub fn new(
        http: HttpClient,
        endpoint: Endpoint<'_>,
        model: &str,
        native: bool,
    ) -> Result<Self, String> {
        let base_url = endpoint.base_url.trim_end_matches('/');
        let at = |path: &str| {
            let mut url = reqwest::Url::parse(&format!("{base_url}{path}"))
                .map_err(|e| format!("baseUrl {base_url:?} is not a URL: {e}"))?;
            if !endpoint.query.is_empty() {
                url.query_pairs_mut().extend_pairs(endpoint.query);
            }
            Ok::<_, String>(url)
        };
        let url = at(W::PATH)?;
        let auth = W::headers(http.key(), endpoint.key_header);
        let mut headers = crate::http::request_headers(&auth)?;
        for (name, value) in endpoint.headers {
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("the header name {name:?} is not one HTTP allows"))?;
            let value = reqwest::header::HeaderValue::from_str(value)
                .map_err(|_| format!("the {name} header's value is not one HTTP allows"))?;
            headers.insert(name, value);
        }
        Ok(Self {
            base: base_url.to_owned(),
            query: endpoint
                .query
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            headers,
            http,
            endpoint: url,
            model: model.to_owned(),
            native,
            overhead: 0,
            vision: true,
            upstream: Upstream::default(),
            auth: None,
            wire: PhantomData,
        })
    }

    /// With what its config adds to each body (the token limit's field,
    /// `extraBody`).
    pub fn with_upstream(mut self, upstream: Upstream) -> Self {
        self.upstream = upstream;
        self
    }

    /// With `tokens` of input reserved per attempt for what the provider
    /// adds unseen.
    pub fn with_input_overhead(mut self, tokens: u64) -> Self {
        self.overhead = tokens;
        self
    }

    /// Whether its model takes images (`vision`; true unless said).
    pub fn with_vision(mut self, vision: bool) -> Self {
        self.vision = vision;
        self
    }

    /// With each request authorized by `auth` (Vertex AI's tokens,
    /// Bedrock's signatures).
    pub(crate) fn with_auth(mut self, auth: Option<Box<dyn Authorize>>) -> Self {
        self.auth = auth;
        self
    }
}

impl<W: WireFormat> HttpProvider<W> {
    /// Where an attempt of `request` delivered as `delivery` goes: the
    /// endpoint, or the one its wire format names for its model.
    fn url(
        &self,
        request: &ProviderRequest,
        delivery: Delivery,
    ) -> Result<Cow<'_, reqwest::Url>, ProviderFailure> {
        let model = request.model.as_deref().unwrap_or(&self.model);
        let Some(path) = W::path_for(model, delivery) else {
            return Ok(Cow::Borrowed(&self.endpoint));
        };
        self.at(model, path).map(Cow::Owned)
    }

    /// The URL of `path` under the API root, with the config's query
    /// parameters and the path's own; a failure, not sent, when `model`
    /// makes none.
    fn at(
        &self,
        model: &str,
        path: Result<ModelPath, String>,
    ) -> Result<reqwest::Url, ProviderFailure> {
        let (path, extra) =
            path.map_err(|why| ProviderFailure::new(FailureKind::Unanswerable, None, why))?;
        let mut url = reqwest::Url::parse(&format!("{}{path}", self.base)).map_err(|e| {
            let why = format!("the model {model:?} makes no URL: {e}");
            ProviderFailure::new(FailureKind::Unanswerable, None, why)
        })?;
        if !self.query.is_empty() || !extra.is_empty() {
            let mut pairs = url.query_pairs_mut();
            pairs.extend_pairs(&self.query);
            pairs.extend_pairs(extra);
        }
        Ok(url)
    }
}

impl<W: WireFormat> HttpProvider<W> {
    /// A failure, before any request, when `request` cannot be sent.
    fn sendable(&self, request: &ProviderRequest) -> Result<(), ProviderFailure> {
        match W::unsendable(request) {
            Some(why) => Err(ProviderFailure::new(FailureKind::Unanswerable, None, why)),
            None => Ok(()),
        }
    }

    /// The headers of a POST of `body` to `url` now: the provider's own,
    /// authorized when it authorizes each request.
    async fn headers(
        &self,
        url: &reqwest::Url,
        body: &[u8],
    ) -> Result<Cow<'_, HeaderMap>, ProviderFailure> {
        let Some(auth) = &self.auth else {
            return Ok(Cow::Borrowed(&self.headers));
        };
        let mut headers = self.headers.clone();
        auth.authorize(url, &mut headers, body).await?;
        Ok(Cow::Owned(headers))
    }

    /// Passes `result` on; a 401 or 403 tells what authorized the request.
    fn after<T>(&self, result: Result<T, ProviderFailure>) -> Result<T, ProviderFailure> {
        if let (Some(auth), Err(f)) = (&self.auth, &result)
            && let Some(status @ (401 | 403)) = f.status
        {
            auth.refused(status);
        }
        result
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

    fn input_overhead_tokens(&self) -> u64 {
        self.overhead
    }

    fn takes_images(&self) -> bool {
        self.vision
    }

    fn takes_prompt_cache(&self) -> bool {
        W::PROMPT_CACHE
    }

    fn takes_thinking(&self) -> bool {
        W::THINKING
    }

    fn takes_reasoning(&self, model: &str) -> bool {
        W::takes_reasoning(model)
    }

    fn takes_embeddings(&self) -> bool {
        W::Embeddings::SERVES
    }

    fn connections(&self) -> Option<callai_engine::Connections> {
        Some(self.http.connections())
    }

    fn embed<'a>(
        &'a self,
        request: &'a ProviderRequest,
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderFailure>> {
        Box::pin(async move {
            let unsent = |why| ProviderFailure::new(FailureKind::Unanswerable, None, why);
            let Some(embedding) = &request.embedding else {
                return Err(unsent("the request holds no embedding".into()));
            };
            let model = request.model.as_deref().unwrap_or(&self.model);
            let url = self.at(model, W::Embeddings::path(model))?;
            let body = W::Embeddings::body(model, embedding).map_err(unsent)?;
            let headers = self.headers(&url, &body).await?;
            let result = self
                .http
                .attempt(&url, &headers, body, request, &[], |answer| {
                    W::Embeddings::reply(answer, embedding)
                })
                .await;
            self.after(result)
        })
    }

    fn complete<'a>(
        &'a self,
        request: &'a ProviderRequest,
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderFailure>> {
        Box::pin(async move {
            self.sendable(request)?;
            let body = W::body(&self.model, request, Delivery::Whole, &self.upstream);
            let url = self.url(request, Delivery::Whole)?;
            let headers = self.headers(&url, &body).await?;
            let result = self
                .http
                .attempt(&url, &headers, body, request, W::NATIVE_TERMS, |answer| {
                    let mut reply = W::reply(answer)?;
                    W::settle(&mut reply, request);
                    Ok(reply)
                })
                .await;
            self.after(result)
        })
    }

    fn complete_streaming<'a>(
        &'a self,
        request: &'a ProviderRequest,
        deltas: &'a DeltaSink,
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderFailure>> {
        Box::pin(async move {
            self.sendable(request)?;
            let body = W::body(&self.model, request, Delivery::Streamed, &self.upstream);
            let url = self.url(request, Delivery::Streamed)?;
            let headers = self.headers(&url, &body).await?;
            let streamed = self.after(
                self.http
                    .post_events::<W::Answer>(&url, &headers, body)
                    .await,
            )?;
            let (status, mut reply) = match streamed {
                // The server did not stream: its whole answer is one piece.
                Streamed::Whole(status, whole) => {
                    let mut reply = W::reply(whole).map_err(|f| f.at(status))?;
                    W::settle(&mut reply, request);
                    self.http.redact_reply(&mut reply);
                    deltas.send(&reply.content);
                    (status, reply)
                }
                Streamed::Events(status, mut events) => {
                    let mut acc = W::Folded::default();
                    let mut redaction = StreamRedaction::new(self.http.redactor());
                    while let Some(event) = events.next(&self.http, W::event).await {
                        match event? {
                            Sse::Done => W::done(&mut acc),
                            Sse::Event(event) => {
                                if let Some(text) = W::fold(&mut acc, event)? {
                                    deltas.send(&redaction.push(&text));
                                    // A reader that fell behind holds the
                                    // provider's stream here.
                                    deltas.ready().await;
                                }
                            }
                        }
                    }
                    let mut reply = W::finish(acc).map_err(|f| f.at(status))?;
                    W::settle(&mut reply, request);
                    deltas.send(&redaction.finish());
                    self.http.redact_reply(&mut reply);
                    (status, reply)
                }
            };
            reply.status = Some(status);
            Ok(reply)
        })
    }
}
