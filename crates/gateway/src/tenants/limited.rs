//! Every limit of one caller at once (its `[tenants.NAME.budget]`, its
//! `[[tenants.NAME.limits]]`): one [`Budget`] for the engine, reserving a
//! call's worst case on each limit's allotment in turn and settling the
//! call's spend on each. A call that one limit refuses gives back what the
//! others granted it, and waits for room up to `[limits] queueMs` before it
//! is refused.

use super::allotment::{Allotment, Holder};
use super::plan::Plan;
use crate::metrics::BudgetCounters;
use callai_engine::budget::{Budget, KEYS, Money, Reservation, ReserveError, Spend, Window};
use callai_engine::events::now_ms;
use callai_engine::{BoxFuture, RunLog};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How often a call waiting for room (`queueMs`) asks again when no call
/// of this host has settled (room another host's calls gave back).
const POLL: Duration = Duration::from_millis(200);

/// A reservation on each limit, in the order of the limits.
type Each = SmallVec<[Reservation; 4]>;

/// Every limit of one caller, as one budget.
pub struct Limited {
    me: Weak<Limited>,
    tenant: String,
    /// The shortest window first: a rate limit refuses before a daily
    /// budget is asked.
    parts: Vec<Arc<Allotment>>,
    /// How long a call may wait for room.
    queue: Duration,
    /// A tenant's budget counters; none for a provider's quota, which
    /// counts its own.
    counters: Option<BudgetCounters>,
    /// What its calls are charged in money, when a limit counts `cost`.
    money: Option<Money>,
    /// Each call's reservations, by the id the engine holds (with more
    /// than one limit).
    held: Mutex<HashMap<i64, Each>>,
    next: AtomicI64,
    /// Told when a call of this host settles: room may have come back.
    settled: tokio::sync::Notify,
}

impl std::fmt::Debug for Limited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limited")
            .field("tenant", &self.tenant)
            .field("limits", &self.parts.len())
            .finish_non_exhaustive()
    }
}

/// One key of a caller's tightest limit, for the `x-ratelimit-*` headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// The key (one of [`KEYS`]).
    pub key: &'static str,
    /// Its limit per window.
    pub limit: u64,
    /// What is left of it, as this host last saw the window.
    pub remaining: u64,
    /// When its window ends (ms since the Unix epoch); `None`: never.
    pub resets_at_ms: Option<u64>,
}

fn length(window: Window) -> Duration {
    window.length().unwrap_or(Duration::MAX)
}

impl Limited {
    /// `tenant`'s limits `plans` on `log`, held by `holder`; a call waits
    /// up to `queue` for room. `None` when it has no limit.
    pub fn new(
        log: &Arc<dyn RunLog>,
        tenant: &str,
        plans: &[Plan],
        holder: &Holder<'_>,
        queue: Duration,
    ) -> Option<Arc<Self>> {
        Self::joined(None, log, tenant, plans, holder, queue)
    }

    /// A provider's quota: its limits `plans` on `log`, held by `holder`;
    /// a request waits up to `queue` for room (when it may wait at all).
    /// `owner` names it in messages. `None` when it limits nothing.
    pub fn quota(
        log: &Arc<dyn RunLog>,
        owner: &str,
        plans: &[Plan],
        holder: &Holder<'_>,
        queue: Duration,
    ) -> Option<Arc<Self>> {
        let parts = Self::parts_of(None, log, owner, plans, holder)?;
        Some(Self::of(parts, owner, queue, None))
    }

    /// [`Limited::new`] on top of `base`'s limits (a key's on its
    /// tenant's: the same allotments, shared).
    pub fn joined(
        base: Option<&Limited>,
        log: &Arc<dyn RunLog>,
        tenant: &str,
        plans: &[Plan],
        holder: &Holder<'_>,
        queue: Duration,
    ) -> Option<Arc<Self>> {
        let parts = Self::parts_of(base, log, tenant, plans, holder)?;
        let counters = holder.metrics.budget_counters(tenant);
        Some(Self::of(parts, tenant, queue, Some(counters)))
    }

    /// `base`'s allotments and one for each of `plans`, the shortest
    /// window first; `None` for none.
    fn parts_of(
        base: Option<&Limited>,
        log: &Arc<dyn RunLog>,
        owner: &str,
        plans: &[Plan],
        holder: &Holder<'_>,
    ) -> Option<Vec<Arc<Allotment>>> {
        let mut parts: Vec<Arc<Allotment>> = base.map(|b| b.parts.clone()).unwrap_or_default();
        parts.extend(
            plans
                .iter()
                .map(|plan| Allotment::new(log.clone(), owner, plan.clone(), holder)),
        );
        if parts.is_empty() {
            return None;
        }
        parts.sort_by_key(|p| length(p.plan().window));
        Some(parts)
    }

    fn of(
        parts: Vec<Arc<Allotment>>,
        owner: &str,
        queue: Duration,
        counters: Option<BudgetCounters>,
    ) -> Arc<Self> {
        let money = parts
            .iter()
            .map(|p| p.plan())
            .find(|p| p.limits.cost.is_some())
            .map(|p| Money {
                currency: p.currency.clone(),
            });
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            tenant: owner.to_owned(),
            parts,
            queue,
            counters,
            money,
            held: Mutex::default(),
            next: AtomicI64::new(0),
            settled: tokio::sync::Notify::new(),
        })
    }

    /// How long a call may wait for room.
    pub fn queue(&self) -> Duration {
        self.queue
    }

    /// Each limit's allotment, the shortest window first.
    pub fn parts(&self) -> &[Arc<Allotment>] {
        &self.parts
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Each>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What is left of each limited key over every limit (the least), in
    /// the order of [`KEYS`], as this host last saw the windows; `None`
    /// before it has seen any.
    pub fn remaining(&self) -> Option<[Option<u64>; 4]> {
        let mut seen = false;
        let mut least: [Option<u64>; 4] = [None; 4];
        for part in &self.parts {
            let Some(left) = part.remaining() else {
                continue;
            };
            seen = true;
            for (least, left) in least.iter_mut().zip(left) {
                *least = match (*least, left) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
        }
        seen.then_some(least)
    }

    /// Each limited key's tightest limit (the one with the least left), as
    /// this host last saw the windows.
    pub fn rate_limits(&self) -> SmallVec<[RateLimit; 4]> {
        let now = now_ms();
        let mut tightest: [Option<RateLimit>; 4] = [None; 4];
        for part in &self.parts {
            let Some(left) = part.remaining() else {
                continue;
            };
            let plan = part.plan();
            for (i, (limit, left)) in plan.limits.amounts().into_iter().zip(left).enumerate() {
                let (Some(limit), Some(remaining)) = (limit, left) else {
                    continue;
                };
                if tightest[i].is_none_or(|t| remaining < t.remaining) {
                    tightest[i] = Some(RateLimit {
                        key: KEYS[i],
                        limit,
                        remaining,
                        resets_at_ms: plan.resets_at_ms(now),
                    });
                }
            }
        }
        tightest.into_iter().flatten().collect()
    }

    /// Settles every limit's room at once (a host shutting down).
    pub async fn flush(&self) {
        for part in &self.parts {
            part.flush().await;
        }
    }

    /// `write` (a settle's), then the calls waiting for room told: what
    /// the settle gave back is in the database by then. Without waiting
    /// calls it is `write` itself.
    fn then_tell(&self, write: BoxFuture<'static, ()>) -> BoxFuture<'static, ()> {
        if self.queue.is_zero() {
            return write;
        }
        // Room the call gave back in memory is there now.
        self.settled.notify_waiters();
        let Some(me) = self.me.upgrade() else {
            return write;
        };
        Box::pin(async move {
            write.await;
            me.settled.notify_waiters();
        })
    }

    /// Reserves `worst` on every limit, or on none.
    async fn reserve_each(&self, worst: Spend) -> Result<Reservation, ReserveError> {
        if let [one] = &self.parts[..] {
            return one.reserve(worst).await;
        }
        let mut taken = Taken {
            parts: &self.parts,
            got: Each::new(),
        };
        for part in &self.parts {
            let reservation = part.reserve(worst).await?;
            taken.got.push(reservation);
        }
        let each = std::mem::take(&mut taken.got);
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, each);
        Ok(Reservation { id, window_ms: 0 })
    }
}

/// What a call was granted so far: given back if it goes no further (a
/// later limit refused it, or the call was dropped while it waited).
struct Taken<'a> {
    parts: &'a [Arc<Allotment>],
    got: Each,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        let runtime = tokio::runtime::Handle::try_current().ok();
        for (part, reservation) in self.parts.iter().zip(self.got.drain(..)) {
            // Its room goes back in memory now; the database's writes, if
            // any, run on their own.
            let write = part.settle(reservation, Spend::default());
            if let Some(runtime) = &runtime {
                runtime.spawn(write);
            }
        }
    }
}

impl Limited {
    /// Reserves `worst` on every limit, waiting up to `queue` for room; a
    /// call larger than a whole limit is refused at once.
    pub async fn reserve_within(
        &self,
        worst: Spend,
        queue: Duration,
    ) -> Result<Reservation, ReserveError> {
        let deadline = Instant::now() + queue;
        loop {
            match self.reserve_each(worst).await {
                Err(ReserveError::Refused(refusal)) => {
                    let now = Instant::now();
                    // A call bigger than the whole limit never fits.
                    if refusal.needed <= refusal.limit && now < deadline {
                        let wait = POLL.min(deadline - now);
                        let _ = tokio::time::timeout(wait, self.settled.notified()).await;
                        continue;
                    }
                    if let Some(c) = &self.counters {
                        c.refused();
                    }
                    return Err(ReserveError::Refused(refusal));
                }
                done => return done,
            }
        }
    }
}

impl Budget for Limited {
    fn reserve(&self, worst: Spend) -> BoxFuture<'_, Result<Reservation, ReserveError>> {
        Box::pin(self.reserve_within(worst, self.queue))
    }

    fn settle(&self, reservation: Reservation, spent: Spend) -> BoxFuture<'static, ()> {
        if let Some(c) = &self.counters {
            c.spent(&spent);
        }
        if let [one] = &self.parts[..] {
            let write = one.settle(reservation, spent);
            return self.then_tell(write);
        }
        let Some(each) = self.lock().remove(&reservation.id) else {
            return Box::pin(async {});
        };
        let writes: SmallVec<[_; 4]> = self
            .parts
            .iter()
            .zip(each)
            .map(|(part, r)| part.settle(r, spent))
            .collect();
        self.then_tell(Box::pin(async move {
            for write in writes {
                write.await;
            }
        }))
    }

    fn overrun(&self, provider: &str, over: Spend) {
        if let Some(c) = &self.counters {
            c.overrun(provider);
        }
        eprintln!(
            "callai serve: provider {provider:?} reported more than tenant {:?}'s call asked for \
             ({} output and {} input tokens over its max_tokens and input bound); charged what it \
             reported. Raise [providers.{provider}] inputOverheadTokens if its hidden input grew",
            self.tenant, over.output_tokens, over.input_tokens
        );
    }

    fn money(&self) -> Option<&Money> {
        self.money.as_ref()
    }
}
