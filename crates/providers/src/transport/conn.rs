//! One open connection's HTTP: the HTTP/1.1 or HTTP/2 handshake over a
//! stream [`super::connect`] opened, its task spawned on the runtime, and
//! for HTTP/2 the streams in flight on it and the server's limit of them
//! (`SETTINGS_MAX_CONCURRENT_STREAMS`, read as the connection runs).

use super::connect::{ConnectFailed, Io, Opened};
use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// A request's body: the JSON the adapter built.
pub(crate) type Body = Full<Bytes>;

/// The server's stream limit before its first `SETTINGS` is read: a value
/// h2 never sets itself (a `SETTINGS` without a limit makes it
/// `usize::MAX`), so that the first `SETTINGS` always changes it.
const UNKNOWN: usize = usize::MAX - 1;
/// The limit assumed of a server whose `SETTINGS` has not come (RFC 9113
/// advises at least 100).
const ASSUMED: usize = 100;

/// An HTTP/2 connection shared by many calls.
pub(crate) struct H2Conn {
    pub(crate) send: http2::SendRequest<Body>,
    /// Streams this host has open on it.
    pub(crate) in_flight: AtomicUsize,
    /// The connection, run by its [`Driver`]; read for the server's
    /// stream limit, as its latest `SETTINGS` said.
    conn: Shared,
    /// Its task ended, or the server sent `GOAWAY`: no new stream.
    retired: Arc<AtomicBool>,
    /// When its last stream ended.
    idle_since: Mutex<Instant>,
}

impl H2Conn {
    /// The most streams this host sends on it: the server's limit, or
    /// `cap` when lower.
    pub(crate) fn limit(&self, cap: Option<usize>) -> usize {
        let server = match server_limit(&self.conn) {
            UNKNOWN => ASSUMED,
            known => known,
        };
        cap.map_or(server, |c| c.min(server))
    }

    /// Whether it takes no new stream.
    pub(crate) fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Relaxed) || self.send.is_closed()
    }

    /// No new stream goes on it (the server said `GOAWAY`).
    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::Relaxed);
    }

    /// One of its streams ended.
    pub(crate) fn stream_ended(&self) {
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            *self.idle_since.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        }
    }

    /// Whether it has carried nothing for `idle`.
    pub(crate) fn idle_for(&self, idle: Duration) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
            && self
                .idle_since
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .elapsed()
                >= idle
    }
}

/// A connection ready for requests.
pub(crate) enum Ready {
    H1(http1::SendRequest<Body>),
    H2(Arc<H2Conn>),
}

/// Starts HTTP over an opened stream. An HTTP/2 connection waits for the
/// server's first `SETTINGS` (which comes within a round trip; at most
/// four times as long as the stream took to open, `opening`, between a
/// quarter of a second and two) so that its stream limit is known before
/// the pool fills it.
pub(crate) async fn start(opened: Opened, opening: Duration) -> Result<Ready, ConnectFailed> {
    if !opened.h2 {
        return h1(opened.io).await.map(Ready::H1);
    }
    let mut builder = http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .initial_max_send_streams(UNKNOWN)
        .keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(20));
    let (send, conn) = builder
        .handshake(opened.io)
        .await
        .map_err(|e| ConnectFailed(format!("the HTTP/2 handshake failed: {e}")))?;
    let conn: Shared = Arc::new(Mutex::new(Box::pin(conn)));
    let retired = Arc::new(AtomicBool::new(false));
    let ended = Arc::new(OnceLock::new());
    tokio::spawn(Driver {
        conn: conn.clone(),
        retired: retired.clone(),
        ended: ended.clone(),
    });
    // hyper runs the HTTP/2 connection in a task of its own: its limit is
    // read until the server's first SETTINGS set it (the server sends it
    // first thing; a connection that took long to open waits as long).
    let wait = (opening * 4).clamp(Duration::from_millis(250), Duration::from_secs(2));
    let started = Instant::now();
    while server_limit(&conn) == UNKNOWN
        && !retired.load(Ordering::Acquire)
        && started.elapsed() < wait
    {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // A server that ends the connection at once (it refused this host's
    // client certificate, say) is a connection that did not open.
    if retired.load(Ordering::Acquire) {
        let why = ended.get().cloned();
        return Err(ConnectFailed(why.unwrap_or_else(|| {
            "the provider closed the connection at once".to_owned()
        })));
    }
    Ok(Ready::H2(Arc::new(H2Conn {
        send,
        in_flight: AtomicUsize::new(0),
        conn,
        retired,
        idle_since: Mutex::new(Instant::now()),
    })))
}

/// An HTTP/2 connection, shared by its driver and its readers.
type Shared = Arc<Mutex<Pin<Box<http2::Connection<Io, Body, TokioExecutor>>>>>;

/// The server's stream limit on `conn`.
fn server_limit(conn: &Shared) -> usize {
    conn.lock()
        .unwrap_or_else(|p| p.into_inner())
        .current_max_send_streams()
}

async fn h1(io: Io) -> Result<http1::SendRequest<Body>, ConnectFailed> {
    let (send, conn) = http1::handshake(io)
        .await
        .map_err(|e| ConnectFailed(format!("the HTTP/1.1 handshake failed: {e}")))?;
    tokio::spawn(async move {
        // Its end (the server closed it, or it was dropped) is seen by the
        // sender; nothing waits on this.
        let _ = conn.await;
    });
    Ok(send)
}

/// Runs an HTTP/2 connection; when it ends, retires it.
struct Driver {
    conn: Shared,
    retired: Arc<AtomicBool>,
    /// Why it ended, when it failed.
    ended: Arc<OnceLock<String>>,
}

impl Future for Driver {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let done = self
            .conn
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
            .poll(cx);
        let Poll::Ready(outcome) = done else {
            return Poll::Pending;
        };
        if let Err(e) = outcome {
            let _ = self.ended.set(super::chain(&e));
        }
        self.retired.store(true, Ordering::Release);
        Poll::Ready(())
    }
}
