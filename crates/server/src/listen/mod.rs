//! The accept loop: every connection bounded in number (`maxConnections`:
//! past it, new ones wait in the kernel's backlog, never an exhausted file
//! table), in time (`headerTimeoutMs` for a request head, `bodyTimeoutMs`
//! for its body, `idleTimeoutMs` between requests), and a shutdown that
//! always ends: draining asks each connection to close after its answer,
//! closing drops whatever is still open.
//!
//! axum's own `serve` has none of these bounds and waits for every
//! connection forever on shutdown, so connections are driven by hyper here.

mod activity;
mod bodies;
mod file_limit;

pub use bodies::is_body_timeout;

use crate::config::ServerConfig;
use activity::{Activity, PhaseTimeouts};
use axum::Router;
use axum::body::{Body, HttpBody};
use bodies::{DeadlineBody, WatchedBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
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
            max_connections: server.max_connections as usize,
        }
    }

    fn phases(&self) -> PhaseTimeouts {
        PhaseTimeouts {
            header: self.header,
            idle: self.idle,
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

/// Accepts connections on `listener` and serves `app` on each until the
/// stage passes [`Stage::Serving`]; returns once every connection has ended.
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
    let mut reported_error = false;
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            () = &mut stopped => break,
        };
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
        let _ = stream.set_nodelay(true);
        connections.spawn(connection(
            stream,
            app.clone(),
            limits,
            stage.clone(),
            permit,
        ));
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

/// Serves one connection until the client closes it, a phase outlasts its
/// timeout, or the server closes.
async fn connection(
    stream: TcpStream,
    app: Router,
    limits: ConnectionLimits,
    mut stage: watch::Receiver<Stage>,
    _permit: OwnedSemaphorePermit,
) {
    let activity = Activity::new();
    let io = TokioIo::new(activity::WatchedIo::new(stream, activity.clone()));
    let requests = activity.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let busy = requests.begin_request();
        let request = request.map(|body| {
            if body.is_end_stream() {
                Body::new(body)
            } else {
                Body::new(DeadlineBody::new(body, limits.body))
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
    let expired = activity.expired(limits.phases());
    tokio::pin!(expired);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = &mut expired => return,
        () = reached(&mut stage, Stage::Draining) => {}
    }
    conn.as_mut().graceful_shutdown();
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = &mut expired => {}
        () = reached(&mut stage, Stage::Closing) => {}
    }
}
