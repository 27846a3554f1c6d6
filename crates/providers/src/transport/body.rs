//! A response body as the pool hands it out: read until the request's
//! deadline (a body still coming then fails as timed out, as reqwest's
//! whole-request timeout did), holding its connection's place: an HTTP/2
//! stream counted in flight until the body ends or is dropped, an
//! HTTP/1.1 connection given back to the pool once read to its end (and
//! closed when dropped before).

use super::conn::{Body, H2Conn};
use super::pool::Pool;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use http_body::{Body as _, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::client::conn::http1;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Sleep;

/// What a response holds of its connection.
pub(crate) enum Slot {
    /// A stream of a shared HTTP/2 connection.
    H2(Arc<H2Conn>),
    /// A whole HTTP/1.1 connection; `done` once its body was read.
    H1 {
        send: Option<http1::SendRequest<Body>>,
        pool: Arc<Pool>,
        done: bool,
    },
}

impl Drop for Slot {
    fn drop(&mut self) {
        match self {
            Self::H2(conn) => conn.stream_ended(),
            Self::H1 { send, pool, done } => pool.h1_ended(send.take(), *done),
        }
    }
}

/// A provider's response as the pool hands it out: its head, and its body
/// read a chunk at a time. The pool's own type, not a `reqwest::Response`
/// (which parses a placeholder URL for every response built from hyper's).
pub(crate) struct Response {
    head: http::response::Parts,
    body: Tracked,
}

impl Response {
    pub(crate) fn new(head: http::response::Parts, body: Tracked) -> Self {
        Self { head, body }
    }

    /// The response's status.
    pub(crate) fn status(&self) -> StatusCode {
        self.head.status
    }

    /// The response's headers.
    pub(crate) fn headers(&self) -> &HeaderMap {
        &self.head.headers
    }

    /// The body's length, when the response gave it.
    pub(crate) fn content_length(&self) -> Option<u64> {
        self.body.size_hint().exact()
    }

    /// The body's next piece of data; `None` at its end (trailers skipped).
    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, BodyFailed> {
        while let Some(frame) = self.body.frame().await {
            if let Ok(data) = frame.map_err(BodyFailed)?.into_data() {
                return Ok(Some(data));
            }
        }
        Ok(None)
    }
}

/// Why a response's body was not read to its end: the connection failed or
/// the request's deadline passed first.
#[derive(Debug)]
pub(crate) struct BodyFailed(BoxError);

impl BodyFailed {
    /// The deadline passed before the body ended.
    pub(crate) fn is_timeout(&self) -> bool {
        self.0
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::TimedOut)
    }
}

impl std::fmt::Display for BodyFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A response's body with its deadline and its connection's place.
pub(crate) struct Tracked {
    inner: Incoming,
    deadline: Pin<Box<Sleep>>,
    timeout: Duration,
    slot: Option<Slot>,
}

impl Tracked {
    pub(crate) fn new(
        inner: Incoming,
        deadline: tokio::time::Instant,
        timeout: Duration,
        slot: Slot,
    ) -> Self {
        Self {
            inner,
            deadline: Box::pin(tokio::time::sleep_until(deadline)),
            timeout,
            slot: Some(slot),
        }
    }

    /// The body has ended: its connection's place is given up (an HTTP/1.1
    /// connection goes back to the pool).
    fn ended(&mut self) {
        if let Some(Slot::H1 { done, .. }) = &mut self.slot {
            *done = true;
        }
        self.slot = None;
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.slot.is_some() && self.deadline.as_mut().poll(cx).is_ready() {
            self.slot = None;
            let late = std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "the response did not end within {} ms",
                    self.timeout.as_millis()
                ),
            );
            return Poll::Ready(Some(Err(Box::new(late))));
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(None) => {
                self.ended();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                self.slot = None;
                Poll::Ready(Some(Err(Box::new(e))))
            }
            Poll::Ready(Some(Ok(frame))) => {
                if self.inner.is_end_stream() {
                    self.ended();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
