//! The request headers a call reads, taken from the request's own map:
//! the W3C `traceparent`, a client's own retry (`x-stainless-retry-count`)
//! and the per-call policy (`x-callai-max-attempts`,
//! `x-callai-grow-max-tokens`). axum's `HeaderMap` extractor clones the
//! whole map, and a handler keeps what it takes until its call ends: this
//! keeps only these.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue};
use std::convert::Infallible;

/// What a call reads of its request's headers.
#[derive(Debug, Default, Clone)]
pub struct CallHeaders {
    /// `traceparent`, when it is one (up to 128 characters).
    pub trace_parent: Option<String>,
    /// Whether the client says it sends the request again.
    pub client_retry: bool,
    /// `x-callai-max-attempts`, as sent.
    pub max_attempts: Option<HeaderValue>,
    /// `x-callai-grow-max-tokens`, as sent.
    pub grow_max_tokens: Option<HeaderValue>,
}

impl CallHeaders {
    /// What `headers` say.
    pub fn of(headers: &HeaderMap) -> Self {
        // One pass over the few headers a request has: a lookup by a
        // `&str` name parses and hashes the name each time.
        let mut read = Self::default();
        for (name, value) in headers {
            match name.as_str() {
                "traceparent" => read.trace_parent = trace_parent_of(value),
                "x-stainless-retry-count" => read.client_retry = retry_count(value),
                "x-callai-max-attempts" => read.max_attempts = Some(value.clone()),
                "x-callai-grow-max-tokens" => read.grow_max_tokens = Some(value.clone()),
                _ => {}
            }
        }
        read
    }
}

impl<S: Send + Sync> FromRequestParts<S> for CallHeaders {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        Ok(Self::of(&parts.headers))
    }
}

/// The W3C `traceparent` a caller sent (55 characters in its version 00;
/// a longer value, or one that is not text, is no parent), for `serve`'s
/// spans to go under.
fn trace_parent_of(value: &HeaderValue) -> Option<String> {
    let value = value.to_str().ok()?.trim();
    (!value.is_empty() && value.len() <= 128).then(|| value.to_owned())
}

/// Whether the request is a client's own retry: the OpenAI and Anthropic
/// SDKs say so in `x-stainless-retry-count`.
pub fn client_retry(headers: &HeaderMap) -> bool {
    headers
        .get("x-stainless-retry-count")
        .is_some_and(retry_count)
}

/// Whether a retry count says the request was sent before.
fn retry_count(value: &HeaderValue) -> bool {
    (value.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn a_call_keeps_only_the_headers_it_reads() {
        let sent = headers(&[
            (
                "traceparent",
                " 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 ",
            ),
            ("x-stainless-retry-count", "2"),
            ("x-callai-max-attempts", "3"),
            ("authorization", "Bearer sk-secret"),
        ]);
        let read = CallHeaders::of(&sent);
        assert_eq!(
            read.trace_parent.as_deref(),
            Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        );
        assert!(read.client_retry);
        assert_eq!(read.max_attempts.as_ref().unwrap(), "3");
        assert!(read.grow_max_tokens.is_none());
    }

    #[test]
    fn a_first_try_or_an_unreadable_count_is_no_client_retry() {
        for count in ["0", "x", ""] {
            assert!(!client_retry(&headers(&[(
                "x-stainless-retry-count",
                count
            )])));
        }
        assert!(!client_retry(&HeaderMap::new()));
    }

    #[test]
    fn a_traceparent_that_is_empty_or_too_long_is_none() {
        let long = "0".repeat(129).leak() as &'static str;
        let parent = |value| CallHeaders::of(&headers(&[("traceparent", value)])).trace_parent;
        assert_eq!(parent(" "), None);
        assert_eq!(parent(long), None);
    }
}
