//! Who may start now, who waits, who is turned away: `limits.maxConcurrentRuns`
//! runs and calls at once, `[server] maxQueuedRuns` more waiting for a
//! slot, and past that a refusal (`overloaded`). On shutdown the door
//! closes and whoever still waits is told so.

use crate::error::GatewayError;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// The gate in front of every run and every `/v1/call`.
#[derive(Debug)]
pub struct Admission {
    slots: Arc<Semaphore>,
    /// Admitted and not yet finished: running plus waiting.
    admitted: Arc<AtomicUsize>,
    slot_count: usize,
    capacity: usize,
    draining: AtomicBool,
    /// Cancelled when the grace period of a shutdown ends: whatever is
    /// still running or waiting stops.
    stop: CancellationToken,
}

/// A place in the queue, or a slot once [`Ticket::start`] returns. Dropping
/// it gives the place back.
#[derive(Debug)]
pub struct Ticket {
    admitted: Arc<AtomicUsize>,
    slots: Arc<Semaphore>,
    permit: Option<OwnedSemaphorePermit>,
}

impl Admission {
    /// `running` at once, `queued` more waiting.
    pub fn new(running: usize, queued: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(running)),
            admitted: Arc::new(AtomicUsize::new(0)),
            slot_count: running,
            capacity: running + queued,
            draining: AtomicBool::new(false),
            stop: CancellationToken::new(),
        }
    }

    /// A ticket, or why there is none (full, or shutting down: both a
    /// `503` with `Retry-After` at the HTTP edge).
    pub fn admit(&self) -> Result<Ticket, GatewayError> {
        if self.draining.load(Ordering::SeqCst) {
            return Err(GatewayError::ShuttingDown(
                "this host is shutting down and takes no new work".into(),
            ));
        }
        let taken = self
            .admitted
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.capacity).then_some(n + 1)
            });
        match taken {
            Ok(_) => Ok(Ticket {
                admitted: self.admitted.clone(),
                slots: self.slots.clone(),
                permit: None,
            }),
            Err(n) => Err(GatewayError::Overloaded(format!(
                "{n} runs are running or queued, as many as this host takes \
                 (limits.maxConcurrentRuns + server.maxQueuedRuns)"
            ))),
        }
    }

    /// Running and waiting now.
    pub fn admitted(&self) -> usize {
        self.admitted.load(Ordering::SeqCst)
    }

    /// Running now (holding a slot).
    pub fn running(&self) -> usize {
        self.slot_count - self.slots.available_permits()
    }

    /// Closes the door: every later [`Admission::admit`] is refused.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Whether the door is closed.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Ends the grace period: runs still going are told to stop.
    pub fn stop_all(&self) {
        self.stop.cancel();
    }

    /// Completes when [`Admission::stop_all`] is called.
    pub fn stopped(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.stop.cancelled()
    }

    /// A token cancelled by [`Admission::stop_all`].
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }
}

impl Ticket {
    /// Waits for a slot.
    pub async fn start(&mut self) {
        if self.permit.is_none() {
            let permit = self
                .slots
                .clone()
                .acquire_owned()
                .await
                .expect("the slot semaphore is never closed");
            self.permit = Some(permit);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admitted.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn past_running_and_queued_the_gate_is_full() {
        let gate = Admission::new(2, 1);
        let mut a = gate.admit().unwrap();
        let mut b = gate.admit().unwrap();
        let mut c = gate.admit().unwrap();
        let e = gate.admit().unwrap_err();
        assert!(matches!(e, GatewayError::Overloaded(_)), "{e}");
        a.start().await;
        b.start().await;
        assert_eq!(gate.running(), 2);
        // The third waits for a slot until one is given back.
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(20), c.start()).await;
        assert!(waiting.is_err());
        drop(a);
        c.start().await;
        assert_eq!((gate.running(), gate.admitted()), (2, 2));
        let d = gate.admit().unwrap();
        drop((b, c, d));
        assert_eq!((gate.running(), gate.admitted()), (0, 0));
    }

    #[test]
    fn a_draining_gate_admits_no_one() {
        let gate = Admission::new(1, 1);
        gate.drain();
        let e = gate.admit().unwrap_err();
        assert!(matches!(e, GatewayError::ShuttingDown(_)), "{e}");
        assert_eq!(gate.admitted(), 0);
    }
}
