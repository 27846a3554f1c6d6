//! The two bodies a connection wraps: a request body that must arrive by
//! its deadline (`bodyTimeoutMs`, the whole body, however it trickles; once
//! the server begins to shut down, within [`AT_SHUTDOWN`] at most), and an
//! answer body that keeps its connection busy until it is written.
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
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// How long a request body still arriving when the server begins to shut
/// down has to end: a half-sent body does not hold the shutdown for its
/// whole grace period.
pub const AT_SHUTDOWN: Duration = Duration::from_secs(3);

/// The request body did not arrive in time.
#[derive(Debug, Clone, Copy, thiserror::Error)]
pub enum BodyTimedOut {
    /// Within `[server] bodyTimeoutMs` (its ms).
    #[error("the request body did not arrive within server.bodyTimeoutMs ({0} ms)")]
    Deadline(u64),
    /// Within [`AT_SHUTDOWN`] of the server beginning to shut down.
    #[error(
        "this host is shutting down, and the request body did not arrive within {} s of it",
        AT_SHUTDOWN.as_secs()
    )]
    Shutdown,
}

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
    /// Completes when the server begins to shut down (then the deadline
    /// comes within [`AT_SHUTDOWN`]); `None` once it has.
    draining: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
    /// Why the deadline is the one it is.
    cut: BodyTimedOut,
}

impl<B> std::fmt::Debug for DeadlineBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeadlineBody")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl<B> DeadlineBody<B> {
    /// `inner`, which must end within `timeout` of now, and within
    /// [`AT_SHUTDOWN`] of `draining` being cancelled.
    pub fn new(inner: B, timeout: Duration, draining: &CancellationToken) -> Self {
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        Self {
            inner,
            timeout,
            deadline: Some(Box::pin(tokio::time::sleep(timeout))),
            draining: Some(Box::pin(draining.clone().cancelled_owned())),
            cut: BodyTimedOut::Deadline(ms),
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
        if let Some(draining) = self.draining.as_mut()
            && draining.as_mut().poll(cx).is_ready()
        {
            self.draining = None;
            let soon = tokio::time::Instant::now() + AT_SHUTDOWN;
            if let Some(deadline) = self.deadline.as_mut()
                && soon < deadline.deadline()
            {
                deadline.as_mut().reset(soon);
                self.cut = BodyTimedOut::Shutdown;
            }
        }
        if let Some(deadline) = self.deadline.as_mut()
            && deadline.as_mut().poll(cx).is_ready()
        {
            self.deadline = None;
            return Poll::Ready(Some(Err(self.cut.into())));
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
