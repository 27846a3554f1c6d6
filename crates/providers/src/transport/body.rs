//! A response body as the pool hands it out: read until the request's
//! deadline (a body still coming then fails as timed out, as reqwest's
//! whole-request timeout did), holding its connection's place: an HTTP/2
//! stream counted in flight until the body ends or is dropped, an
//! HTTP/1.1 connection given back to the pool once read to its end (and
//! closed when dropped before).

use super::conn::{Body, H2Conn};
use super::pool::Pool;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
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
