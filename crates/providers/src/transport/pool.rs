//! The connections to one provider. HTTP/2 connections are shared: a
//! request goes on the first with a stream free (under the server's limit
//! and `maxStreamsPerConnection`), and when none has one a connection is
//! opened, up to `maxConnections`; requests that find a connection
//! opening join it as far as its streams go, so a burst opens as many
//! connections as it fills and no more. HTTP/1.1 connections carry one
//! request at a time: idle ones are reused, and past `maxConnections` a
//! request waits for one. Connections unused for `idleMs` are closed.
//! Only at `maxConnections` does an HTTP/2 request queue, on the least
//! loaded connection.

use super::conn::{self, Body, H2Conn, Ready};
use super::connect::{ConnectFailed, Connector};
use http::Uri;
use hyper::client::conn::http1;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// A connection being opened, and the requests waiting for it.
struct Opening {
    /// Requests that will try it first (its opener among them); changed
    /// under the pool's lock only.
    joined: AtomicUsize,
    /// Its outcome, set once.
    outcome: OnceLock<Result<(), ConnectFailed>>,
    done: Notify,
}

#[derive(Default)]
struct State {
    h2: Vec<Arc<H2Conn>>,
    h1_idle: Vec<(http1::SendRequest<Body>, Instant)>,
    /// HTTP/1.1 connections open, idle or carrying a request.
    h1_open: usize,
    opening: Vec<Arc<Opening>>,
    /// What the server spoke on the last connection opened.
    speaks_h2: Option<bool>,
    /// The stream limit of the last HTTP/2 connection opened.
    learned_limit: Option<usize>,
}

impl State {
    fn open(&self) -> usize {
        self.h2.len() + self.h1_open + self.opening.len()
    }
}

/// A connection leased for one request.
pub(crate) enum Lease {
    H1(http1::SendRequest<Body>),
    H2(Arc<H2Conn>),
}

/// What a request does next.
enum Next {
    Go(Lease),
    Join(Arc<Opening>),
    WaitForH1,
}

/// One provider's connections.
pub(crate) struct Pool {
    target: Uri,
    connector: Connector,
    max_connections: usize,
    max_streams: Option<usize>,
    idle: Duration,
    state: Mutex<State>,
    /// An HTTP/1.1 connection was given back or closed.
    h1_free: Notify,
    /// Whether the task closing idle connections runs.
    reaping: AtomicBool,
}

impl Pool {
    pub(crate) fn new(
        target: Uri,
        connector: Connector,
        max_connections: usize,
        max_streams: Option<usize>,
        idle: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            target,
            connector,
            max_connections,
            max_streams,
            idle,
            state: Mutex::default(),
            h1_free: Notify::new(),
            reaping: AtomicBool::new(false),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A connection for one request: a stream of an HTTP/2 one, or an idle
    /// HTTP/1.1 one, or a new one.
    pub(crate) async fn lease(self: &Arc<Self>) -> Result<Lease, ConnectFailed> {
        if !self.reaping.swap(true, Ordering::Relaxed) {
            reaper(self);
        }
        loop {
            match self.next() {
                Next::Go(Lease::H1(mut send)) => {
                    if send.ready().await.is_ok() {
                        return Ok(Lease::H1(send));
                    }
                    self.h1_ended(None, false);
                }
                Next::Go(lease) => return Ok(lease),
                Next::Join(opening) => {
                    let done = opening.done.notified();
                    tokio::pin!(done);
                    done.as_mut().enable();
                    if opening.outcome.get().is_none() {
                        done.await;
                    }
                    if let Some(Err(e)) = opening.outcome.get() {
                        return Err(e.clone());
                    }
                }
                Next::WaitForH1 => {
                    let freed = self.h1_free.notified();
                    tokio::pin!(freed);
                    freed.as_mut().enable();
                    if !self.h1_room() {
                        freed.await;
                    }
                }
            }
        }
    }

    /// Whether an HTTP/1.1 request would find a connection now.
    fn h1_room(&self) -> bool {
        let state = self.state();
        !state.h1_idle.is_empty() || state.open() < self.max_connections
    }

    /// Decides, under the lock, where a request goes.
    fn next(self: &Arc<Self>) -> Next {
        let mut state = self.state();
        state.h2.retain(|c| !c.is_retired());
        let cap = self.max_streams;
        let free = state
            .h2
            .iter()
            .find(|c| c.in_flight.load(Ordering::Acquire) < c.limit(cap));
        if let Some(conn) = free {
            conn.in_flight.fetch_add(1, Ordering::AcqRel);
            return Next::Go(Lease::H2(conn.clone()));
        }
        while let Some((send, _)) = state.h1_idle.pop() {
            if !send.is_closed() {
                return Next::Go(Lease::H1(send));
            }
            state.h1_open -= 1;
        }
        let room = match state.speaks_h2 {
            Some(false) => 1,
            _ => {
                let limit = state.learned_limit.unwrap_or(100);
                cap.map_or(limit, |c| c.min(limit))
            }
        };
        let joinable = state
            .opening
            .iter()
            .find(|o| o.joined.load(Ordering::Relaxed) < room);
        if let Some(opening) = joinable {
            opening.joined.fetch_add(1, Ordering::Relaxed);
            return Next::Join(opening.clone());
        }
        if state.open() < self.max_connections {
            let opening = Arc::new(Opening {
                joined: AtomicUsize::new(1),
                outcome: OnceLock::new(),
                done: Notify::new(),
            });
            state.opening.push(opening.clone());
            drop(state);
            let pool = self.clone();
            let opened = opening.clone();
            tokio::spawn(async move {
                let outcome = pool.open_one().await;
                pool.settle(&opened, outcome);
            });
            return Next::Join(opening);
        }
        let least = state
            .h2
            .iter()
            .min_by_key(|c| c.in_flight.load(Ordering::Acquire));
        match least {
            Some(conn) => {
                conn.in_flight.fetch_add(1, Ordering::AcqRel);
                Next::Go(Lease::H2(conn.clone()))
            }
            None => Next::WaitForH1,
        }
    }

    async fn open_one(&self) -> Result<Ready, ConnectFailed> {
        let started = Instant::now();
        let opened = self.connector.open(&self.target).await?;
        conn::start(opened, started.elapsed()).await
    }

    /// A connection opened (or did not): it joins the pool, and the
    /// requests waiting on it try again.
    fn settle(&self, opening: &Arc<Opening>, outcome: Result<Ready, ConnectFailed>) {
        let mut state = self.state();
        state.opening.retain(|o| !Arc::ptr_eq(o, opening));
        let result = match outcome {
            Ok(Ready::H2(conn)) => {
                state.speaks_h2 = Some(true);
                state.learned_limit = Some(conn.limit(None));
                state.h2.push(conn);
                Ok(())
            }
            Ok(Ready::H1(send)) => {
                state.speaks_h2 = Some(false);
                state.h1_open += 1;
                state.h1_idle.push((send, Instant::now()));
                Ok(())
            }
            Err(e) => Err(e),
        };
        drop(state);
        let _ = opening.outcome.set(result);
        opening.done.notify_waiters();
        self.h1_free.notify_waiters();
    }

    /// An HTTP/1.1 request ended: its connection goes back to the pool
    /// when its response was read whole, else it is closed.
    pub(crate) fn h1_ended(&self, send: Option<http1::SendRequest<Body>>, done: bool) {
        let mut state = self.state();
        match send {
            Some(send) if done && !send.is_closed() => {
                state.h1_idle.push((send, Instant::now()));
            }
            _ => state.h1_open = state.h1_open.saturating_sub(1),
        }
        drop(state);
        self.h1_free.notify_one();
    }

    /// Closes the connections unused for `idleMs`.
    fn reap(&self) {
        let idle = self.idle;
        let mut state = self.state();
        state.h2.retain(|c| !c.is_retired() && !c.idle_for(idle));
        let before = state.h1_idle.len();
        state
            .h1_idle
            .retain(|(send, since)| !send.is_closed() && since.elapsed() < idle);
        let closed = before - state.h1_idle.len();
        state.h1_open -= closed;
        drop(state);
        if closed > 0 {
            self.h1_free.notify_waiters();
        }
    }

    /// Connections open now, by protocol, and the HTTP/2 streams in flight.
    pub(crate) fn counts(&self) -> (usize, usize, usize) {
        let state = self.state();
        let streams = state
            .h2
            .iter()
            .map(|c| c.in_flight.load(Ordering::Relaxed))
            .sum();
        (state.h1_open, state.h2.len(), streams)
    }
}

/// Closes idle connections every half `idleMs` while the pool lives (a
/// weak reference: the task ends with the pool).
fn reaper(pool: &Arc<Pool>) {
    let weak = Arc::downgrade(pool);
    let every = (pool.idle / 2).max(Duration::from_millis(10));
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            match weak.upgrade() {
                Some(pool) => pool.reap(),
                None => return,
            }
        }
    });
}
