//! The accept loop: every connection bounded in number (`maxConnections`:
//! at it, the connection idle the longest is closed to make room, and past
//! the connections in the middle of a request new ones wait in the kernel's
//! backlog, never an exhausted file table), in time (`headerTimeoutMs` for
//! a request head, `bodyTimeoutMs` for its body, `idleTimeoutMs` between
//! requests, `writeTimeoutMs` for an answer its client stops reading: the
//! connection is closed, which drops the answer and cancels its call), and
//! a shutdown that always ends: draining asks each
//! connection to close after its answer, closing drops whatever is still
//! open.
//!
//! axum's own `serve` has none of these bounds and waits for every
//! connection forever on shutdown, so connections are driven by hyper here.

mod activity;
mod again;
mod bodies;
mod file_limit;
mod room;

pub use bodies::{BodyTimedOut, is_body_timeout};

use activity::{Activity, PhaseTimeouts};
use again::PollAgain;
use axum::Router;
use axum::body::{Body, HttpBody};
use bodies::{DeadlineBody, WatchedBody};
use callai_config::ServerConfig;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use room::OpenConnections;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// The bounds on every connection, from `[server]`.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// The whole request head, from its first byte.
    pub header: Duration,
    /// The whole request body, from the end of its head.
    pub body: Duration,
    /// Between requests on a keep-alive connection.
    pub idle: Duration,
    /// An answer whose client reads none of it.
    pub write: Duration,
    /// Connections open at once.
    pub max_connections: usize,
}

impl ConnectionLimits {
    /// The limits `[server]` sets.
    pub fn from_config(server: &ServerConfig) -> Self {
        Self {
            header: Duration::from_millis(server.header_timeout_ms),
            body: Duration::from_millis(server.body_timeout_ms),
            idle: Duration::from_millis(server.idle_timeout_ms),
            write: Duration::from_millis(server.write_timeout_ms),
            max_connections: server.max_connections as usize,
        }
    }

    fn phases(&self) -> PhaseTimeouts {
        PhaseTimeouts {
            header: self.header,
            idle: self.idle,
            write: self.write,
        }
    }
}

/// Where the server stands; sent to every connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// Accepting and answering.
    Serving,
    /// No new connections; each open one closes after its answer.
    Draining,
    /// Every connection still open is dropped now.
    Closing,
}

/// The send buffer of each connection (the kernel doubles it): room for
/// answers to go out at a few MB/s over a 100 ms round trip.
const SEND_BUFFER: usize = 256 << 10;

/// How often the accept loop looks again for an idle connection to close
/// while every place is held by one in the middle of a request.
const ROOM_RETRY: Duration = Duration::from_millis(50);

/// Accepts connections on `listener` and serves `app` on each until the
/// stage passes [`Stage::Serving`]; returns once every connection has ended.
///
/// A connection is accepted before it has a place: at the cap one accepted
/// connection waits while room is made (the file limit's reserve covers its
/// descriptor), and the rest wait in the backlog.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    mut stage: watch::Receiver<Stage>,
) {
    let held = file_limit::fit(limits.max_connections.max(1));
    let permits = Arc::new(Semaphore::new(held));
    let connections = TaskTracker::new();
    let mut stopping = stage.clone();
    let stopped = reached(&mut stopping, Stage::Draining);
    tokio::pin!(stopped);
    // Cancelled once the server begins to shut down: a request body still
    // arriving then has a short while to end (`bodies::AT_SHUTDOWN`).
    let draining = CancellationToken::new();
    let mut watching = stage.clone();
    let cancel = draining.clone();
    tokio::spawn(async move {
        reached(&mut watching, Stage::Draining).await;
        cancel.cancel();
    });
    let mut reported_error = false;
    let open = Arc::new(OpenConnections::default());
    'accept: loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    // Out of file descriptors or a connection reset before
                    // it was accepted: go on after a pause rather than spin.
                    if !reported_error {
                        eprintln!("callai serve: cannot accept a connection: {e}");
                        reported_error = true;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut stopped => break,
        };
        let permit = match permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => loop {
                let made_room = open.evict_longest_idle();
                let look_again = async {
                    if made_room {
                        // The evicted connection's place comes back.
                        std::future::pending::<()>().await;
                    } else {
                        tokio::time::sleep(ROOM_RETRY).await;
                    }
                };
                tokio::select! {
                    permit = permits.clone().acquire_owned() => {
                        break permit.expect("the semaphore is never closed");
                    }
                    () = look_again => {}
                    () = &mut stopped => break 'accept,
                }
            },
        };
        let _ = stream.set_nodelay(true);
        // A send buffer of its own size, not the kernel's autotuned one (on
        // loopback, megabytes): what a client that stops reading leaves
        // unsent is bounded, and its writes wait soon enough for the write
        // timeout to see it.
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(&stream, SEND_BUFFER);
        connections.spawn(PollAgain::new(connection(
            stream,
            app.clone(),
            limits,
            stage.clone(),
            draining.clone(),
            Place {
                _permit: permit,
                open: open.clone(),
            },
        )));
    }
    drop(listener);
    connections.close();
    tokio::select! {
        () = connections.wait() => {}
        () = reached(&mut stage, Stage::Closing) => connections.wait().await,
    }
}

/// Returns once the server is at `stage` or past it (or gone).
async fn reached(watch: &mut watch::Receiver<Stage>, stage: Stage) {
    let _ = watch.wait_for(|s| *s >= stage).await;
}

/// A connection's place under `maxConnections`.
struct Place {
    _permit: OwnedSemaphorePermit,
    open: Arc<OpenConnections>,
}

/// Serves one connection until the client closes it, a phase outlasts its
/// timeout, it is closed to make room, or the server closes.
async fn connection(
    stream: TcpStream,
    app: Router,
    limits: ConnectionLimits,
    mut stage: watch::Receiver<Stage>,
    draining: CancellationToken,
    place: Place,
) {
    let activity = Activity::new();
    let _listed = place.open.register(activity.clone());
    let io = TokioIo::new(activity::WatchedIo::new(stream, activity.clone()));
    let requests = activity.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let busy = requests.begin_request();
        let request = request.map(|body| {
            if body.is_end_stream() {
                Body::new(body)
            } else {
                Body::new(DeadlineBody::new(body, limits.body, &draining))
            }
        });
        let answer = app.clone().oneshot(request);
        async move {
            let response = answer.await?;
            Ok::<_, Infallible>(response.map(|body| WatchedBody::new(body, busy)))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.header_read_timeout(None);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    // The watchdog is polled after the connection, every time the task
    // runs: what the connection changed it reads in the same turn.
    let mut expired = activity.expiry(limits.phases());
    tokio::select! {
        biased;
        _ = conn.as_mut() => return,
        _ = &mut expired => return,
        () = reached(&mut stage, Stage::Draining) => {}
    }
    conn.as_mut().graceful_shutdown();
    tokio::select! {
        biased;
        _ = conn.as_mut() => {}
        _ = &mut expired => {}
        () = reached(&mut stage, Stage::Closing) => {}
    }
}
