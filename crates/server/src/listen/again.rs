//! A connection's future that wakes its own task while it runs is polled
//! again at once, instead of being handed back to tokio.
//!
//! hyper's HTTP/1.1 server runs a connection and its handler in one task,
//! and wakes that task from inside its own poll: the handler taking a
//! request body's chunk wakes the body's sender, which is the connection
//! itself. tokio answers a task woken while it runs by putting it back on
//! its run queue as a yield, and a yield wakes a parked worker to look for
//! work: a futex wake-up and two context switches on the other core, once a
//! request, for nothing (measured with uprobes on tokio's `yield_now` and
//! `sched:sched_switch`, one call in flight). Polling the future again
//! here does what the yield would have, without the other core.
//!
//! Wakes from elsewhere (the socket's readiness, a provider's answer) are
//! passed on as they come; one that comes while the future is being polled
//! is seen by the re-poll, never lost (see [`Flag::wake_by_ref`]). After
//! [`AGAIN`] polls in a row, or once the task's cooperative budget is
//! spent, the wake is passed on: a future that keeps waking itself still
//! yields to the others.

use futures_util::task::AtomicWaker;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::task::{Context, Poll, Wake, Waker};

/// The most polls in a row before a self-wake goes to tokio as a yield.
const AGAIN: usize = 8;

/// `F`, polled again while it wakes itself during its poll.
pub struct PollAgain<F> {
    inner: Pin<Box<F>>,
    flag: Arc<Flag>,
    waker: Waker,
}

impl<F> std::fmt::Debug for PollAgain<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollAgain").finish_non_exhaustive()
    }
}

impl<F: Future> PollAgain<F> {
    /// `inner`, boxed (it runs as long as its connection).
    pub fn new(inner: F) -> Self {
        let flag = Arc::new(Flag::default());
        Self {
            inner: Box::pin(inner),
            waker: Waker::from(flag.clone()),
            flag,
        }
    }
}

/// Whether the future is being polled, and whether it was woken meanwhile.
#[derive(Debug, Default)]
struct Flag {
    polling: AtomicBool,
    woken: AtomicBool,
    /// The task's own waker.
    outer: AtomicWaker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    /// While the future is polled, the wake is left for the poller to see
    /// when it ends; a wake that finds the poll over is passed on, by
    /// whichever of the two takes the flag back (both `swap` it, in
    /// sequentially consistent order, so one of them sees the other's
    /// store).
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, SeqCst);
        if !self.polling.load(SeqCst) && self.woken.swap(false, SeqCst) {
            self.outer.wake();
        }
    }
}

impl<F: Future> Future for PollAgain<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        this.flag.outer.register(cx.waker());
        let mut inner_cx = Context::from_waker(&this.waker);
        for _ in 0..AGAIN {
            this.flag.polling.store(true, SeqCst);
            let polled = this.inner.as_mut().poll(&mut inner_cx);
            this.flag.polling.store(false, SeqCst);
            if polled.is_ready() {
                return polled;
            }
            if !this.flag.woken.swap(false, SeqCst) {
                return Poll::Pending;
            }
            // Out of tokio's budget, it would only wake itself again.
            if !tokio::task::coop::has_budget_remaining() {
                break;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::atomic::Ordering::Relaxed;

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Relaxed);
        }
    }

    /// Wakes itself in each of its first `wakes` polls, then is ready with
    /// the number of polls it had.
    struct SelfWaking {
        wakes: usize,
        polls: usize,
    }

    fn self_waking(wakes: usize) -> PollAgain<SelfWaking> {
        PollAgain::new(SelfWaking { wakes, polls: 0 })
    }

    impl Future for SelfWaking {
        type Output = usize;

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            self.polls += 1;
            if self.polls > self.wakes {
                return Poll::Ready(self.polls);
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    fn counted() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count::default());
        (count.clone(), Waker::from(count))
    }

    #[test]
    fn a_future_that_wakes_itself_is_polled_again_without_waking_its_task() {
        let (count, waker) = counted();
        let mut cx = Context::from_waker(&waker);
        let mut again = self_waking(3);
        assert_eq!(Pin::new(&mut again).poll(&mut cx), Poll::Ready(4));
        assert_eq!(count.0.load(Relaxed), 0);
    }

    #[test]
    fn past_its_polls_in_a_row_the_wake_goes_to_the_task() {
        let (count, waker) = counted();
        let mut cx = Context::from_waker(&waker);
        let mut again = self_waking(100);
        assert!(Pin::new(&mut again).poll(&mut cx).is_pending());
        assert_eq!(again.inner.polls, AGAIN);
        assert_eq!(count.0.load(Relaxed), 1, "yielded once");
    }

    #[test]
    fn a_wake_after_the_poll_reaches_the_task_even_from_another_thread() {
        let (count, waker) = counted();
        let mut cx = Context::from_waker(&waker);
        // Pending with no wake of its own: it waits for one from outside.
        let slot = Arc::new(std::sync::Mutex::new(None::<Waker>));
        let kept = slot.clone();
        let mut again = PollAgain::new(std::future::poll_fn(move |cx| {
            *kept.lock().unwrap() = Some(cx.waker().clone());
            Poll::<()>::Pending
        }));
        assert!(Pin::new(&mut again).poll(&mut cx).is_pending());
        assert_eq!(count.0.load(Relaxed), 0);
        let inner = slot.lock().unwrap().take().unwrap();
        std::thread::spawn(move || inner.wake()).join().unwrap();
        assert_eq!(count.0.load(Relaxed), 1);
    }
}
