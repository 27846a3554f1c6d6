//! The two bodies a connection wraps: a request body that must arrive by
//! its deadline (`bodyTimeoutMs`, the whole body, however it trickles), and
//! an answer body that keeps its connection busy until it is written.
//!
//! tower-http's `TimeoutBody` restarts its clock at every frame, so a body
//! sent one byte a second never times out under it; the deadline here is
//! for the whole body.

use super::activity::BusyGuard;
use axum::body::{Body, Bytes, HttpBody};
use http_body::{Frame, SizeHint};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Sleep;

/// The request body did not arrive within `[server] bodyTimeoutMs`.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the request body did not arrive within server.bodyTimeoutMs ({0} ms)")]
pub struct BodyTimedOut(pub u64);

/// Whether `error`, or an error it wraps, is a [`BodyTimedOut`].
pub fn is_body_timeout(error: &(dyn std::error::Error + 'static)) -> Option<BodyTimedOut> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(t) = e.downcast_ref::<BodyTimedOut>() {
            return Some(*t);
        }
        next = e.source();
    }
    None
}

/// A request body with a deadline for all of it.
pub struct DeadlineBody<B> {
    inner: B,
    timeout: Duration,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl<B> std::fmt::Debug for DeadlineBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeadlineBody")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl<B> DeadlineBody<B> {
    /// `inner`, which must end within `timeout` of now.
    pub fn new(inner: B, timeout: Duration) -> Self {
        Self {
            inner,
            timeout,
            deadline: Some(Box::pin(tokio::time::sleep(timeout))),
        }
    }
}

impl<B> HttpBody for DeadlineBody<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::BoxError>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if let Some(deadline) = self.deadline.as_mut()
            && deadline.as_mut().poll(cx).is_ready()
        {
            self.deadline = None;
            let ms = u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX);
            return Poll::Ready(Some(Err(BodyTimedOut(ms).into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// An answer body that holds its connection busy until it is dropped.
#[derive(Debug)]
pub struct WatchedBody {
    inner: Body,
    _busy: BusyGuard,
}

impl WatchedBody {
    /// `inner`, the connection busy until it is written or dropped.
    pub fn new(inner: Body, busy: BusyGuard) -> Self {
        Self { inner, _busy: busy }
    }
}

impl HttpBody for WatchedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
