//! The allotment itself: its chunks, how a call's worst case is carved
//! from one (or a new one reserved), and how room goes back.

use super::chunk::{Chunk, Chunks, MAX_AGE, Rate, Write};
use crate::metrics::Metrics;
use crate::tenants::plan::Plan;
use callai_engine::budget::{
    Budget, KEYS, Refusal, Reservation, ReserveError, ReserveRequest, Reserved, Spend, WindowState,
};
use callai_engine::events::now_ms;
use callai_engine::wire::{CallError, ErrorCode};
use callai_engine::{BoxFuture, RunLog};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// The most worst cases one chunk is asked for: a chunk is one database
/// reservation and one charge for this many calls.
const CHUNK: u64 = 256;
/// How long an idle chunk waits for its next call before it is settled,
/// and how often a chunk is looked at.
const LINGER: Duration = Duration::from_millis(20);
/// How long a call that does not fit waits for other hosts' chunks to give
/// their free room back before it is refused: a chunk's life, and a few of
/// the looks that trim it.
const RECLAIM: Duration = Duration::from_millis(500 + 5 * 20);
/// How often such a call asks again.
const POLL: Duration = Duration::from_millis(25);

/// The refusal of a call whose budget could not be checked (its database
/// failed): before any request, as `budget_unavailable` (503 at the HTTP
/// edge).
fn unavailable(tenant: &str, why: String) -> CallError {
    CallError::new(
        ErrorCode::PolicyDenied,
        format!("the budget of tenant {tenant:?} could not be checked: {why}"),
    )
    .with_detail("reason", "budget_unavailable")
}

/// This host's allotment of one limit of a caller.
pub struct Allotment {
    pub(super) me: Weak<Allotment>,
    pub(super) log: Arc<dyn RunLog>,
    /// Whose limit it is, for messages.
    pub(super) tenant: String,
    /// Where the ledger keeps it ([`Plan::account`]).
    pub(super) account: Arc<str>,
    pub(super) plan: Plan,
    owner: Arc<str>,
    /// How long a chunk outlives a host that died holding it: a call's
    /// wall time and a lease.
    ttl: Duration,
    chunks: Mutex<Chunks>,
    /// One database reservation at a time; the calls that wait for it are
    /// its demand.
    refill: tokio::sync::Mutex<Rate>,
    waiting: AtomicU64,
    carved: AtomicU64,
    /// The window as the database last answered for it.
    last: Mutex<Option<WindowState>>,
    /// One writer of the queued chunk writes at a time (see `writes.rs`).
    pub(super) writer: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Allotment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allotment")
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

/// What the host holding an allotment gives it.
#[derive(Debug, Clone)]
pub struct Holder<'a> {
    /// The host's id, the owner of its reservations.
    pub owner: &'a str,
    /// How long a call may run: a chunk outlives a host that died holding
    /// it by this (and a chunk's life).
    pub ttl: Duration,
    /// Where its callers' budget counters are.
    pub metrics: Arc<Metrics>,
}

impl Allotment {
    /// The allotment of `tenant`'s `plan` on `log`, held by `holder`.
    pub fn new(log: Arc<dyn RunLog>, tenant: &str, plan: Plan, holder: &Holder<'_>) -> Arc<Self> {
        let Holder { owner, ttl, .. } = *holder;
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            log,
            tenant: tenant.to_owned(),
            account: plan.account.clone(),
            plan,
            owner: owner.into(),
            // A chunk takes calls for its life before the last of them runs
            // its wall time.
            ttl: ttl + MAX_AGE,
            chunks: Mutex::default(),
            refill: tokio::sync::Mutex::new(Rate {
                since: Instant::now(),
                carves: 0,
            }),
            waiting: AtomicU64::new(0),
            carved: AtomicU64::new(0),
            last: Mutex::default(),
            writer: tokio::sync::Mutex::new(()),
        })
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Chunks> {
        self.chunks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The limit it holds room of.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// What is left of each limited key as this host sees it: what the
    /// database last said was left, and the room in its own chunks.
    pub fn remaining(&self) -> Option<[Option<u64>; 4]> {
        let state = (*self.last.lock().unwrap_or_else(|p| p.into_inner()))?;
        let free = self
            .lock()
            .chunks
            .iter()
            .filter(|c| c.reservation.window_ms == state.window_ms)
            .fold(Spend::default(), |acc, c| acc.plus(c.free()));
        let left = self.plan.limits.left(&state);
        let free = free.amounts();
        Some(std::array::from_fn(|i| left[i].map(|l| l + free[i])))
    }

    /// Carves `worst` from an open chunk of this window that has room.
    fn carve(&self, worst: &Spend, window_ms: u64) -> Option<Reservation> {
        let mut chunks = self.lock();
        let i = chunks
            .chunks
            .iter()
            .position(|c| c.fits(worst, window_ms))?;
        self.carved.fetch_add(1, Ordering::Relaxed);
        Some(chunks.carve(i, *worst))
    }

    /// How many worst cases the next chunk asks for: the calls waiting for
    /// it, or as many as came in the last chunk's life at the rate they
    /// came, whichever is more.
    fn chunk_calls(&self, rate: &mut Rate) -> u64 {
        let carved = self.carved.swap(0, Ordering::Relaxed) + rate.carves;
        let elapsed = rate.since.elapsed().max(Duration::from_millis(1));
        let expected = (carved as u128 * MAX_AGE.as_millis() / elapsed.as_millis()) as u64;
        *rate = Rate {
            since: Instant::now(),
            carves: 0,
        };
        let waiting = self.waiting.load(Ordering::Relaxed);
        expected.max(waiting + 1).clamp(1, CHUNK)
    }

    async fn reserve_in_db(&self, need: Spend, calls: u64) -> Result<Reserved, CallError> {
        let ledger = self
            .log
            .ledger()
            .ok_or_else(|| unavailable(&self.tenant, "the run log keeps no budgets".into()))?;
        let request = ReserveRequest {
            tenant: &self.account,
            window: self.plan.window,
            limits: self.plan.limits,
            need,
            calls,
            owner: &self.owner,
            ttl: self.ttl,
        };
        let reserved = ledger
            .reserve(&request)
            .await
            .map_err(|e| unavailable(&self.tenant, e.to_string()))?;
        match &reserved {
            Reserved::Admitted { state, .. } => self.remember(*state),
            Reserved::Refused { room, .. } => {
                // What is left, as the refusal found it: the answer's
                // headers say so.
                let limits = self.plan.limits.amounts();
                let left = room.amounts();
                let spent = std::array::from_fn(|i| match (limits[i], left[i]) {
                    (Some(limit), Some(left)) => limit.saturating_sub(left),
                    _ => 0,
                });
                self.remember(WindowState {
                    window_ms: self.plan.window.start_ms(now_ms()),
                    spent: Spend::from_amounts(spent),
                    reserved: Spend::default(),
                });
            }
        }
        Ok(reserved)
    }

    pub(super) fn remember(&self, state: WindowState) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(state);
    }

    /// Installs a chunk of `calls` worst cases `worst` and carves this
    /// call's out of it. A chunk of one call takes no other.
    fn install(&self, reservation: Reservation, calls: u64, worst: Spend) -> Reservation {
        let mut chunks = self.lock();
        chunks.chunks.push(Chunk {
            reservation,
            held: worst.times(calls),
            carved: Spend::default(),
            spent: Spend::default(),
            in_flight: 0,
            opened: Instant::now(),
            open: calls > 1,
            dirty: false,
            idle_since: None,
        });
        let index = chunks.chunks.len() - 1;
        let carved = chunks.carve(index, worst);
        drop(chunks);
        if calls > 1 {
            self.watch(reservation.id);
        }
        carved
    }

    /// Gives back the room of this host's chunks in `window_ms` that no
    /// call of theirs holds: each takes no more calls and is trimmed (or
    /// settled, with no call in flight). Whether any room went back.
    async fn give_back(&self, window_ms: u64) -> bool {
        let gave = {
            let mut chunks = self.lock();
            let mut gave = false;
            let mut i = 0;
            while i < chunks.chunks.len() {
                let c = &mut chunks.chunks[i];
                if c.reservation.window_ms != window_ms || c.free() == Spend::default() {
                    i += 1;
                    continue;
                }
                c.open = false;
                gave = true;
                if c.in_flight == 0 {
                    let c = chunks.chunks.remove(i);
                    chunks
                        .queue
                        .push_back(Write::Settle(c.reservation, c.spent));
                } else {
                    let (charge, hold) = c.take_trim();
                    let trim = Write::Trim(c.reservation, charge, hold);
                    chunks.queue.push_back(trim);
                    i += 1;
                }
            }
            gave
        };
        if gave {
            self.drain().await;
        }
        gave
    }

    /// Watches open chunk `id` (one task for its whole life, not one per
    /// call): past [`MAX_AGE`] it takes no more calls and is trimmed to its
    /// calls in flight, and trimmed again as they settle; once none is in
    /// flight (and it has been idle for [`LINGER`], or is closed) it is
    /// settled.
    fn watch(&self, id: i64) {
        let Some(me) = self.me.upgrade() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(LINGER).await;
                let settled = {
                    let mut chunks = me.lock();
                    let Some(i) = chunks.index(id) else {
                        return;
                    };
                    let window_ms = me.plan.window.start_ms(now_ms());
                    let c = &mut chunks.chunks[i];
                    let closing = c.open
                        && (c.opened.elapsed() >= MAX_AGE || c.reservation.window_ms != window_ms);
                    if closing {
                        c.open = false;
                    }
                    let idle = c.idle_since.is_some_and(|t| t.elapsed() >= LINGER);
                    if c.in_flight == 0 && (idle || !c.open) {
                        let c = chunks.chunks.remove(i);
                        chunks
                            .queue
                            .push_back(Write::Settle(c.reservation, c.spent));
                        true
                    } else if !c.open && (closing || c.dirty) && c.free() != Spend::default() {
                        let (charge, hold) = c.take_trim();
                        let trim = Write::Trim(c.reservation, charge, hold);
                        chunks.queue.push_back(trim);
                        false
                    } else {
                        continue;
                    }
                };
                me.drain().await;
                if settled {
                    return;
                }
            }
        });
    }
}

impl Budget for Allotment {
    fn reserve(&self, worst: Spend) -> BoxFuture<'_, Result<Reservation, ReserveError>> {
        let worst = self.plan.counted(worst);
        Box::pin(async move {
            let deadline = Instant::now() + RECLAIM;
            loop {
                let window_ms = self.plan.window.start_ms(now_ms());
                if let Some(carved) = self.carve(&worst, window_ms) {
                    return Ok(carved);
                }
                self.waiting.fetch_add(1, Ordering::Relaxed);
                let mut rate = self.refill.lock().await;
                self.waiting.fetch_sub(1, Ordering::Relaxed);
                // Another call may have refilled while this one waited.
                if let Some(carved) = self.carve(&worst, window_ms) {
                    return Ok(carved);
                }
                let calls = self.chunk_calls(&mut rate);
                match self.reserve_in_db(worst, calls).await? {
                    Reserved::Admitted {
                        reservation, calls, ..
                    } => return Ok(self.install(reservation, calls, worst)),
                    Reserved::Refused {
                        key,
                        left,
                        needed,
                        room,
                        pending,
                    } => {
                        drop(rate);
                        // Room this host holds but no call of it does is
                        // free: given back, it is asked for again at once.
                        if self.give_back(window_ms).await {
                            continue;
                        }
                        // Another host's chunks may hold some: they give it
                        // back within their life.
                        if pending && Instant::now() < deadline {
                            tokio::time::sleep(POLL).await;
                            continue;
                        }
                        let resets_at_ms = self.plan.window.end_ms(window_ms);
                        let index = KEYS.iter().position(|k| *k == key).unwrap_or(0);
                        let limit = self.plan.limits.amounts()[index].unwrap_or(0);
                        return Err(ReserveError::Refused(Refusal {
                            key: self.plan.key_said(key),
                            left,
                            needed,
                            room,
                            resets_at_ms,
                            limit,
                            per: self.plan.window,
                        }));
                    }
                }
            }
        })
    }

    fn settle(&self, reservation: Reservation, spent: Spend) -> BoxFuture<'static, ()> {
        let spent = self.plan.counted(spent);
        let done = {
            let mut chunks = self.lock();
            let Some((chunk_id, worst)) = chunks.carves.remove(&reservation.id) else {
                return Box::pin(async {});
            };
            let Some(i) = chunks.index(chunk_id) else {
                return Box::pin(async {});
            };
            let chunk = &mut chunks.chunks[i];
            chunk.carved = chunk.carved.minus(worst);
            chunk.spent = chunk.spent.plus(spent);
            chunk.in_flight -= 1;
            chunk.dirty = true;
            let window_ms = self.plan.window.start_ms(now_ms());
            let closed = !chunk.open
                || chunk.opened.elapsed() >= MAX_AGE
                || chunk.reservation.window_ms != window_ms;
            match (chunk.in_flight, closed) {
                (0, true) => {
                    let chunk = chunks.chunks.remove(i);
                    let settle = Write::Settle(chunk.reservation, chunk.spent);
                    chunks.queue.push_back(settle);
                    Some(())
                }
                (0, false) => {
                    // Its watcher settles it if no call comes for a while.
                    chunk.idle_since = Some(Instant::now());
                    None
                }
                (_, true) => {
                    // Its watcher trims it.
                    chunk.open = false;
                    None
                }
                _ => None,
            }
        };
        match done {
            Some(()) => self.drain(),
            None => Box::pin(async {}),
        }
    }
}
