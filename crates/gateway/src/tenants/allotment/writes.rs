//! The database writes of an allotment's chunks, in the order they were
//! decided.
//!
//! A trim or a settle is decided under the chunks' lock and written after
//! it. Written by whoever decided it, two writes of one chunk could reach
//! the database out of order: a chunk's settle (which releases all the
//! chunk holds in the database) before a trim decided earlier, whose
//! charge then lands on room the settle already gave to other
//! reservations, taking the window past its limits. So every write is
//! queued under the lock that decided it, and one writer at a time
//! empties the queue front to back. The writer runs as a task of its own:
//! a call that goes away mid-write (its client gone) does not cut a write
//! in two.

use super::chunk::Write;
use super::share::Allotment;
use callai_engine::BoxFuture;
use std::time::Duration;

/// How often a database settle or trim that failed is tried again.
const SETTLE_TRIES: u32 = 3;

impl Allotment {
    /// Writes what is queued, in order; done when the queue is empty
    /// (every write queued before the call included).
    pub(super) fn drain(&self) -> BoxFuture<'static, ()> {
        let Some(me) = self.me.upgrade() else {
            return Box::pin(async {});
        };
        let drain = async move {
            let _writer = me.writer.lock().await;
            loop {
                let next = me.lock().queue.pop_front();
                let Some(write) = next else {
                    return;
                };
                me.write(write).await;
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let task = runtime.spawn(drain);
                Box::pin(async move {
                    let _ = task.await;
                })
            }
            Err(_) => Box::pin(drain),
        }
    }

    /// Does `write` in the database, tried again a few times. A trim that
    /// fails leaves its charge with the chunk, to go with its next write,
    /// or with the chunk's settle when that is queued already.
    async fn write(&self, write: Write) {
        let Some(ledger) = self.log.ledger() else {
            return;
        };
        let mut error = None;
        for attempt in 0..SETTLE_TRIES {
            let done = match &write {
                Write::Trim(r, charge, hold) => {
                    ledger.trim(&self.account, *r, *charge, *hold).await
                }
                Write::Settle(r, spent) => ledger.settle(&self.account, *r, *spent).await,
            };
            match done {
                Ok(state) => {
                    self.remember(state);
                    return;
                }
                Err(e) => error = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
        }
        let error = error.map(|e| e.to_string()).unwrap_or_default();
        match write {
            Write::Trim(r, charge, _) => {
                let mut chunks = self.lock();
                if let Some(i) = chunks.index(r.id) {
                    let c = &mut chunks.chunks[i];
                    c.spent = c.spent.plus(charge);
                    c.dirty = true;
                } else if let Some(Write::Settle(_, spent)) = chunks
                    .queue
                    .iter_mut()
                    .find(|w| matches!(w, Write::Settle(s, _) if s.id == r.id))
                {
                    *spent = spent.plus(charge);
                }
                eprintln!(
                    "callai serve: cannot trim a budget chunk of tenant {:?}: {error}; tried again later",
                    self.tenant
                );
            }
            Write::Settle(_, spent) => eprintln!(
                "callai serve: cannot charge tenant {:?} {spent:?}: {error}; its reservation is \
                 charged in full when it lapses",
                self.tenant
            ),
        }
    }

    /// Settles every chunk at once, calls in flight or not (a host shutting
    /// down, once its calls have ended).
    pub async fn flush(&self) {
        {
            let mut chunks = self.lock();
            let all = std::mem::take(&mut chunks.chunks);
            for chunk in all {
                chunks
                    .queue
                    .push_back(Write::Settle(chunk.reservation, chunk.spent));
            }
        }
        self.drain().await;
    }
}
