//! What one connection is doing, for its watchdog: idle between requests,
//! reading a request head, or busy with a request. The socket reports the
//! bytes it reads and whether its writes wait for the client, the service
//! reports a request's start and its answer's end, and the watchdog closes
//! the connection when a phase outlasts its timeout (`headerTimeoutMs` for
//! a head, `idleTimeoutMs` between requests, `writeTimeoutMs` for an
//! answer the client reads none of).
//!
//! At `maxConnections` the accept loop closes the connection idle the
//! longest to make room, as nginx reuses its keep-alive connections: an
//! idle connection has no request of its client in hand, so closing it
//! loses nothing, and idle connections cannot lock other clients out.
//!
//! hyper's own `header_read_timeout` starts when it begins waiting for a
//! head, which on a keep-alive connection is the moment the previous answer
//! ended: it would close idle connections at the header timeout, not the
//! idle one. So the phases are tracked here.
//!
//! The watchdog ([`Expiry`]) runs in the connection's own task and is
//! polled after the connection each time that task runs, so it reads what
//! the connection changed (a read, a request begun or answered, a write
//! that waits) in the same turn: those changes wake nothing. Waking the
//! task from inside its own poll would only have tokio poll it again, and
//! wake the other core to look for work, two or three times a request.
//! Only an eviction, which comes from the accept loop, wakes it.

use futures_util::task::AtomicWaker;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// The phase of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// No request: waiting for the first byte of the next one.
    Idle,
    /// Some bytes of a request head have come, not all of it.
    Head,
    /// A request is being answered (its body read, its handler run, its
    /// answer written).
    Busy,
    /// An answer is being written and the client has read none of it for
    /// a while (its socket buffer is full).
    Stalled,
}

/// The timeouts of the phases.
#[derive(Debug, Clone, Copy)]
pub struct PhaseTimeouts {
    /// The whole request head, from its first byte.
    pub header: Duration,
    /// Between requests on a keep-alive connection.
    pub idle: Duration,
    /// An answer the client reads none of.
    pub write: Duration,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    since: Instant,
    /// Since when a write of the answer has waited for the client to read,
    /// with no byte written since.
    stalled: Option<Instant>,
    /// Asked to close to make room for a new connection.
    evicted: bool,
}

/// One connection's activity, shared by its socket, its service and its
/// watchdog.
#[derive(Debug)]
pub struct Activity {
    state: Mutex<State>,
    /// The watchdog's task, woken when the connection is evicted.
    watchdog: AtomicWaker,
}

impl Activity {
    /// A connection just accepted: idle.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                phase: Phase::Idle,
                since: Instant::now(),
                stalled: None,
                evicted: false,
            }),
            watchdog: AtomicWaker::new(),
        })
    }

    fn set(&self, from: Option<Phase>, to: Phase) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if from.is_none_or(|f| state.phase == f) && state.phase != to {
            state.phase = to;
            state.since = Instant::now();
        }
    }

    /// Bytes were read: an idle connection starts a head.
    fn read_bytes(&self) {
        self.set(Some(Phase::Idle), Phase::Head);
    }

    /// A write found the client's socket full: the stall starts, unless it
    /// had.
    fn write_blocked(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.stalled.is_none() {
            state.stalled = Some(Instant::now());
        }
    }

    /// Bytes were written: the client reads.
    fn wrote(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.stalled = None;
    }

    /// A request's head is complete and its handler starts.
    pub fn begin_request(self: &Arc<Self>) -> BusyGuard {
        self.set(None, Phase::Busy);
        BusyGuard(self.clone())
    }

    fn evicted(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).evicted
    }

    /// Since when the connection has been idle, or `None` when it is not
    /// (or already asked to close).
    pub fn idle_since(&self) -> Option<Instant> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        (state.phase == Phase::Idle && !state.evicted).then_some(state.since)
    }

    /// Asks an idle connection to close; false when it is no longer idle
    /// (a request began since it was chosen) or was already asked.
    pub fn evict(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.phase != Phase::Idle || state.evicted {
            return false;
        }
        state.evicted = true;
        drop(state);
        self.watchdog.wake();
        true
    }

    /// When the current phase runs out, or `None` while busy (and
    /// writing, or not writing at all).
    fn deadline(&self, timeouts: PhaseTimeouts) -> (Phase, Option<Instant>) {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match (state.phase, state.stalled) {
            // An answer handed over whole may still be in the socket's way
            // out after its request ended: a stall counts in any phase.
            (_, Some(stalled)) => (Phase::Stalled, Some(stalled + timeouts.write)),
            (Phase::Idle, None) => (Phase::Idle, Some(state.since + timeouts.idle)),
            (Phase::Head, None) => (Phase::Head, Some(state.since + timeouts.header)),
            (phase, None) => (phase, None),
        }
    }

    /// The connection's watchdog, under `timeouts`.
    pub fn expiry(self: &Arc<Self>, timeouts: PhaseTimeouts) -> Expiry {
        Expiry {
            activity: self.clone(),
            timeouts,
            timer: None,
        }
    }
}

/// A connection's watchdog: ready with the phase that outlasted its
/// timeout, or with [`Phase::Idle`] once the connection is evicted; never
/// while the connection keeps within its timeouts. Poll it after the
/// connection, in the same task (see the module's notes).
#[derive(Debug)]
pub struct Expiry {
    activity: Arc<Activity>,
    timeouts: PhaseTimeouts,
    /// The timer of the phase it last saw, and that phase's deadline.
    timer: Option<(Pin<Box<Sleep>>, Phase, Instant)>,
}

impl Future for Expiry {
    type Output = Phase;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Phase> {
        self.activity.watchdog.register(cx.waker());
        if self.activity.evicted() {
            return Poll::Ready(Phase::Idle);
        }
        let (phase, deadline) = self.activity.deadline(self.timeouts);
        let Some(deadline) = deadline else {
            // Busy: the timer waits as it is (firing at most once, to
            // nothing) for the next deadline.
            return Poll::Pending;
        };
        let timer = match &mut self.timer {
            Some((timer, armed, at)) => {
                if (*armed, *at) != (phase, deadline) {
                    timer.as_mut().reset(deadline);
                    (*armed, *at) = (phase, deadline);
                }
                timer
            }
            none => {
                let timer = Box::pin(tokio::time::sleep_until(deadline));
                &mut none.insert((timer, phase, deadline)).0
            }
        };
        timer.as_mut().poll(cx).map(|()| phase)
    }
}

impl Activity {
    /// What a write came to: waiting (the client's socket is full), or
    /// bytes gone.
    fn watch_write(&self, poll: &Poll<std::io::Result<usize>>) {
        match poll {
            Poll::Pending => self.write_blocked(),
            Poll::Ready(Ok(n)) if *n > 0 => self.wrote(),
            Poll::Ready(_) => {}
        }
    }
}

/// Held while a request is answered; dropping it (with the answer's body)
/// makes the connection idle again.
#[derive(Debug)]
pub struct BusyGuard(Arc<Activity>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.set(Some(Phase::Busy), Phase::Idle);
    }
}

/// A socket that reports to its connection's activity the bytes it reads,
/// and whether its writes go through or wait for the client to read.
#[derive(Debug)]
pub struct WatchedIo<T> {
    inner: T,
    activity: Arc<Activity>,
}

impl<T> WatchedIo<T> {
    /// `inner`, reporting to `activity`.
    pub fn new(inner: T, activity: Arc<Activity>) -> Self {
        Self { inner, activity }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WatchedIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.read_bytes();
        }
        poll
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WatchedIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.activity.watch_write(&poll);
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.activity.watch_write(&poll);
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
