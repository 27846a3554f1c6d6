//! What both HTTP adapters share: one provider's [`Transport`] (its
//! connection pool: rustls, no redirects), bodies read up to a cap, the API key kept out of every text
//! that comes back, and the mapping of transport outcomes onto
//! [`ProviderFailure`].

use super::redact::Redactor;
use super::transport::{BodyFailed, Response, SendFailed, Transport};
use callai_engine::{FailureKind, ProviderFailure, ProviderReply, ProviderRequest};
use callai_wire::StructuredOutput;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

/// The headers of every request to one provider (its key, its API's
/// version, the content type), built once and cloned per request (a clone
/// shares their bytes).
pub fn request_headers(headers: &[(&'static str, String)]) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::with_capacity(headers.len() + 1);
    map.insert(
        reqwest::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for (name, value) in headers {
        let mut value = HeaderValue::from_str(value)
            .map_err(|_| format!("the {name} header's value is not one HTTP allows"))?;
        // Kept out of logs and of HTTP/2's header compression.
        value.set_sensitive(true);
        map.insert(HeaderName::from_static(name), value);
    }
    Ok(map)
}

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
const MAX_MESSAGE: usize = 200;
/// The most of an error response's body the host reads.
const MAX_ERROR_BODY: u64 = 64 << 10;

/// An HTTP client for one provider: no redirects followed (a key must not
/// follow one to another server), bodies read up to a cap, the key kept out
/// of every text that comes back.
#[derive(Debug, Clone)]
pub struct HttpClient {
    transport: Transport,
    key: Option<ApiKey>,
    redactor: Redactor,
    timeout: Duration,
    max_body: u64,
}

/// Why a body was not read whole.
pub(crate) enum Read {
    /// Longer than the cap.
    Over,
    /// The transport failed.
    Failed(BodyFailed),
}

impl HttpClient {
    /// A client whose every request goes over `transport` and times out
    /// after `timeout`, and that reads no success body over `max_body`
    /// bytes.
    pub(crate) fn new(
        transport: Transport,
        key: Option<ApiKey>,
        timeout: Duration,
        max_body: u64,
    ) -> Self {
        Self {
            redactor: Redactor::new(key.as_ref().map(ApiKey::expose)),
            transport,
            key,
            timeout,
            max_body,
        }
    }

    /// The connections open to the provider now.
    pub(crate) fn connections(&self) -> callai_engine::Connections {
        self.transport.counts()
    }

    /// The key, for the adapter's auth header.
    pub fn key(&self) -> Option<&ApiKey> {
        self.key.as_ref()
    }

    /// `text` with the key removed in every encoding [`Redactor`] knows.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.redactor.redact(text)
    }

    /// A short message for a person from a provider's error body: the
    /// `error.message` of its JSON when it has one, else its text; control
    /// characters blanked, the key removed, at most 200 characters. The raw
    /// body never leaves this module.
    fn error_message(&self, body: &[u8]) -> String {
        let text = String::from_utf8_lossy(body);
        let parsed: Option<Value> = serde_json::from_str(&text).ok();
        let message = parsed
            .as_ref()
            .and_then(|v| {
                v.pointer("/error/message")
                    .or_else(|| v.get("error").filter(|e| e.is_string()))
                    .or_else(|| v.get("message"))
            })
            .and_then(Value::as_str)
            .unwrap_or(&text);
        let blanked: String = message
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let mut short = self.redact(blanked.trim()).into_owned();
        if short.chars().count() > MAX_MESSAGE {
            short = short.chars().take(MAX_MESSAGE).collect();
            short.push('…');
        }
        short
    }

    /// POSTs `body` as JSON; a 2xx response is returned to be read, any
    /// other is the failure it means (a redirect refused, a 4xx rejected, a
    /// 408, 429 or 5xx transient with its `retry-after`).
    pub(crate) async fn post(
        &self,
        url: &reqwest::Url,
        headers: &HeaderMap,
        body: Vec<u8>,
    ) -> Result<Response, ProviderFailure> {
        let response = self
            .transport
            .post(url, headers, body.into())
            .await
            .map_err(|e| self.unsent(e))?;
        let status = response.status().as_u16();
        if (300..400).contains(&status) {
            return Err(ProviderFailure::new(
                FailureKind::Rejected,
                Some(status),
                "the provider answered with a redirect, which this host does not follow",
            ));
        }
        if !(200..300).contains(&status) {
            let retry_after = retry_after(response.headers());
            let text = match read_capped(response, MAX_ERROR_BODY, true).await {
                Ok(text) => text,
                Err(Read::Failed(e)) => return Err(self.transport(&e)),
                Err(Read::Over) => unreachable!("an error body is cut, not refused"),
            };
            let mut failure = ProviderFailure::from_status(status, self.error_message(&text));
            failure.retry_after = retry_after;
            return Err(failure);
        }
        Ok(response)
    }

    /// The most of a success body read.
    pub(crate) fn max_body(&self) -> u64 {
        self.max_body
    }

    /// The key's redactor.
    pub(crate) fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// POSTs `body` as JSON and returns the status and the answer read as
    /// an `A`, or the failure: timeouts, connection errors, 408, 429 (with
    /// its `retry-after`) and 5xx are transient; a redirect is not followed;
    /// any other status is a rejection; a 2xx body over the cap is not
    /// read, and one that is not JSON (or is cut short), or not an `A`, is
    /// transient.
    pub async fn post_json<A: DeserializeOwned>(
        &self,
        url: &reqwest::Url,
        headers: &HeaderMap,
        body: Vec<u8>,
    ) -> Result<(u16, A), ProviderFailure> {
        let response = self.post(url, headers, body).await?;
        self.read_json(response).await
    }

    /// Reads a success response's JSON body, up to the cap, as an `A`.
    pub(crate) async fn read_json<A: DeserializeOwned>(
        &self,
        response: Response,
    ) -> Result<(u16, A), ProviderFailure> {
        let status = response.status().as_u16();
        let text = match read_capped(response, self.max_body, false).await {
            Ok(text) => text,
            Err(Read::Failed(e)) => return Err(self.transport(&e)),
            Err(Read::Over) => {
                return Err(ProviderFailure::new(
                    FailureKind::TooLarge,
                    Some(status),
                    format!(
                        "limits.maxProviderBodyBytes: the provider's response is over {} bytes; the rest was not read",
                        self.max_body
                    ),
                ));
            }
        };
        let answer = serde_json::from_slice(&text).map_err(|e| {
            let what = if e.is_data() {
                "is not an answer of its API"
            } else {
                "is not valid JSON"
            };
            ProviderFailure::new(
                FailureKind::Transient,
                Some(status),
                format!("the provider's response {what} ({e})"),
            )
        })?;
        Ok((status, answer))
    }

    /// One attempt: POSTs `body` and reads the reply with `parse`, its text
    /// redacted. When the request asked for native structured output and a
    /// 400 names one of `native_terms`, the failure says the native mode was
    /// rejected.
    pub async fn attempt<A: DeserializeOwned>(
        &self,
        url: &reqwest::Url,
        headers: &HeaderMap,
        body: Vec<u8>,
        request: &ProviderRequest,
        native_terms: &[&str],
        parse: impl FnOnce(A) -> Result<ProviderReply, ProviderFailure>,
    ) -> Result<ProviderReply, ProviderFailure> {
        let native = request
            .structured
            .as_ref()
            .is_some_and(|s| s.mode == StructuredOutput::Native);
        match self.post_json(url, headers, body).await {
            Ok((status, answer)) => {
                let mut reply = parse(answer).map_err(|f| f.at(status))?;
                reply.status = Some(status);
                self.redact_reply(&mut reply);
                Ok(reply)
            }
            Err(mut f) if native && rejects_native(&f, native_terms) => {
                f.kind = FailureKind::NativeUnsupported;
                Err(f)
            }
            Err(f) => Err(f),
        }
    }

    /// Redacts a reply's text and its tool calls' arguments, and names a
    /// call that came without an id (some local servers send none): a
    /// tool's result must name the call it answers.
    pub(crate) fn redact_reply(&self, reply: &mut ProviderReply) {
        for call in reply.tool_calls.iter_mut().filter(|c| c.id.is_empty()) {
            call.id = format!("call_{:016x}", callai_engine::runlog::fresh_id());
        }
        if let Cow::Owned(clean) = self.redact(&reply.content) {
            reply.content = clean;
        }
        for call in &mut reply.tool_calls {
            if let Cow::Owned(clean) = self.redact(&call.arguments) {
                call.arguments = clean;
            }
        }
    }

    /// The failure of a request that got no response.
    fn unsent(&self, e: SendFailed) -> ProviderFailure {
        let (kind, what) = match e {
            // Nothing was sent before the connection failed: no attempt.
            SendFailed::Unreached(why) => {
                (FailureKind::Unreached, format!("could not connect: {why}"))
            }
            SendFailed::TimedOut => (
                FailureKind::Transient,
                format!("timed out after {} ms", self.timeout.as_millis()),
            ),
            SendFailed::Failed(why) => {
                (FailureKind::Transient, format!("the request failed: {why}"))
            }
        };
        ProviderFailure::new(kind, None, self.error_message(what.as_bytes()))
    }

    /// The failure of a response whose body was not read to its end: the
    /// request was sent, so an attempt, and transient.
    pub(crate) fn transport(&self, e: &BodyFailed) -> ProviderFailure {
        let what = if e.is_timeout() {
            format!("timed out after {} ms", self.timeout.as_millis())
        } else {
            "the response body was cut short".to_owned()
        };
        // hyper's text (or the deadline's) names no header; redacted all
        // the same, as every text from a provider's side is.
        let detail = self.error_message(e.to_string().as_bytes());
        ProviderFailure::new(FailureKind::Transient, None, format!("{what}: {detail}"))
    }
}

/// Reads a body up to `cap` bytes: past it, `Over` (or, when `cut`, the
/// first `cap` bytes). The rest is never read.
pub(crate) async fn read_capped(
    mut response: Response,
    cap: u64,
    cut: bool,
) -> Result<Vec<u8>, Read> {
    if !cut && response.content_length().is_some_and(|n| n > cap) {
        return Err(Read::Over);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(Read::Failed)? {
        let room = (cap as usize).saturating_sub(body.len());
        if chunk.len() > room {
            if cut {
                body.extend_from_slice(&chunk[..room]);
                return Ok(body);
            }
            return Err(Read::Over);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The wait a response asks for: `retry-after-ms` (milliseconds) or
/// `retry-after` (seconds), as a duration; a value too large for one is
/// `Duration::MAX` (longer than any host waits), a negative or unreadable
/// one (or an HTTP date) is none.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|n| !n.is_nan() && *n >= 0.0)
    };
    let seconds = number("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| number("retry-after"))?;
    Some(Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX))
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
        let base = url::Url::parse("http://127.0.0.1:1/v1").unwrap();
        let settings = crate::transport::settings::TransportSettings::default();
        let second = Duration::from_secs(1);
        let transport = Transport::new("p", &settings, &base, &|_| None, second).unwrap();
        let c = HttpClient::new(transport, Some(key), second, 1 << 20);
        assert_eq!(
            c.error_message(br#"{"error": {"message": "bad key sk-test-SECRET given"}}"#),
            "bad key [redacted] given"
        );
        let long = c.error_message("x\u{1b}[31m\n".repeat(1000).as_bytes());
        assert!(long.chars().count() <= MAX_MESSAGE + 1, "{long}");
        assert!(
            !long.contains('\u{1b}') && !long.contains('\n'),
            "control characters are blanked"
        );
    }

    #[test]
    fn retry_after_never_panics_and_never_waits_forever() {
        let wait = |pairs: &[(&'static str, &str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, HeaderValue::from_str(v).unwrap());
            }
            retry_after(&h)
        };
        assert_eq!(wait(&[("retry-after", "2")]), Some(Duration::from_secs(2)));
        assert_eq!(
            wait(&[("retry-after", "0.5")]),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            wait(&[("retry-after-ms", "250"), ("retry-after", "9")]),
            Some(Duration::from_millis(250))
        );
        for huge in ["1e20", "1e400", "inf", "18446744073709551616"] {
            assert_eq!(
                wait(&[("retry-after", huge)]),
                Some(Duration::MAX),
                "{huge}"
            );
        }
        for none in ["-1", "NaN", "soon", "Wed, 21 Oct 2015 07:28:00 GMT", ""] {
            assert_eq!(wait(&[("retry-after", none)]), None, "{none}");
        }
    }
}
