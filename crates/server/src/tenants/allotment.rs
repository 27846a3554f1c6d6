//! A host's allotment of a tenant's budget: reservations in the run log's
//! database made a chunk at a time, so that a call's own reservation is a
//! few arithmetic steps in memory instead of a database transaction.
//!
//! Each chunk is one reservation in the database, of room for [`CHUNK`]
//! worst cases (or of exactly one call's, when that much is not left).
//! Calls carve their worst case out of a chunk and, when they settle, leave
//! what they really spent in it; a chunk takes no more calls once it is
//! [`MAX_AGE`] old or its window ended, and when its last call has settled
//! (or it has been idle for [`LINGER`]) it is settled in the database: its
//! calls' spend charged, the rest released. So the database's spent and
//! reserved never pass the budget (every chunk is a reservation that fit),
//! and a call that does not fit is refused before any request. A host that
//! dies holding chunks loses them as it would lose single reservations:
//! they lapse with its lease.

use super::{Plan, budget::unavailable};
use crate::metrics::{BudgetCounters, Metrics};
use callai_engine::budget::{
    Budget, Reservation, ReserveRequest, Reserved, Spend, WindowState, budget_exceeded,
};
use callai_engine::events::now_ms;
use callai_engine::wire::CallError;
use callai_engine::{BoxFuture, RunLog};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// Worst cases one chunk has room for, when that much is left: a chunk is
/// one database reservation and one charge for this many calls. Near the
/// limit a chunk takes half of what is left, down to one call's worst case.
const CHUNK: u64 = 256;
/// A chunk older than this takes no more calls, so spend reaches the
/// database at least this often under steady load.
const MAX_AGE: Duration = Duration::from_millis(500);
/// How long an idle chunk waits for its next call before it is settled.
const LINGER: Duration = Duration::from_millis(20);
/// How often a database settle that failed is tried again.
const SETTLE_TRIES: u32 = 3;

/// One reservation in the database, shared by the calls carved from it.
#[derive(Debug)]
struct Chunk {
    reservation: Reservation,
    size: Spend,
    /// The worst cases of the calls in flight.
    carved: Spend,
    /// What its settled calls spent (not yet charged in the database).
    spent: Spend,
    in_flight: u32,
    opened: Instant,
    /// Takes new calls.
    open: bool,
    /// Since when no call of it has been in flight.
    idle_since: Option<Instant>,
}

impl Chunk {
    fn fits(&self, worst: &Spend, window_ms: u64) -> bool {
        let free = self.free();
        self.open
            && self.reservation.window_ms == window_ms
            && self.opened.elapsed() < MAX_AGE
            && free.requests >= worst.requests
            && free.output_tokens >= worst.output_tokens
            && free.input_tokens >= worst.input_tokens
    }

    fn free(&self) -> Spend {
        Spend {
            requests: self
                .size
                .requests
                .saturating_sub(self.carved.requests + self.spent.requests),
            output_tokens: self
                .size
                .output_tokens
                .saturating_sub(self.carved.output_tokens + self.spent.output_tokens),
            input_tokens: self
                .size
                .input_tokens
                .saturating_sub(self.carved.input_tokens + self.spent.input_tokens),
        }
    }
}

fn add(a: Spend, b: Spend) -> Spend {
    Spend {
        requests: a.requests + b.requests,
        output_tokens: a.output_tokens + b.output_tokens,
        input_tokens: a.input_tokens + b.input_tokens,
    }
}

fn sub(a: Spend, b: Spend) -> Spend {
    Spend {
        requests: a.requests.saturating_sub(b.requests),
        output_tokens: a.output_tokens.saturating_sub(b.output_tokens),
        input_tokens: a.input_tokens.saturating_sub(b.input_tokens),
    }
}

fn times(a: Spend, n: u64) -> Spend {
    Spend {
        requests: a.requests.saturating_mul(n),
        output_tokens: a.output_tokens.saturating_mul(n),
        input_tokens: a.input_tokens.saturating_mul(n),
    }
}

#[derive(Debug, Default)]
struct Chunks {
    chunks: Vec<Chunk>,
    /// Each call in flight: its chunk (by reservation id) and worst case.
    carves: HashMap<i64, (i64, Spend)>,
    next_carve: i64,
}

impl Chunks {
    fn carve(&mut self, index: usize, worst: Spend) -> Reservation {
        let chunk = &mut self.chunks[index];
        chunk.carved = add(chunk.carved, worst);
        chunk.in_flight += 1;
        chunk.idle_since = None;
        let window_ms = chunk.reservation.window_ms;
        let id = self.next_carve;
        self.next_carve += 1;
        self.carves.insert(id, (chunk.reservation.id, worst));
        Reservation { id, window_ms }
    }
}

/// This host's allotment of one tenant's budget.
pub struct Allotment {
    me: Weak<Allotment>,
    log: Arc<dyn RunLog>,
    tenant: String,
    plan: Plan,
    owner: Arc<str>,
    /// How long a chunk outlives a host that died holding it: a call's
    /// wall time and a lease.
    ttl: Duration,
    counters: BudgetCounters,
    chunks: Mutex<Chunks>,
    /// The window as the database last answered for it.
    last: Mutex<Option<WindowState>>,
}

impl std::fmt::Debug for Allotment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allotment")
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

impl Allotment {
    /// The allotment of `tenant` on `log`.
    pub fn new(
        log: Arc<dyn RunLog>,
        tenant: &str,
        plan: Plan,
        owner: &str,
        ttl: Duration,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            log,
            tenant: tenant.to_owned(),
            plan,
            owner: owner.into(),
            ttl,
            counters: metrics.budget_counters(tenant),
            chunks: Mutex::default(),
            last: Mutex::default(),
        })
    }

    /// What is left of each limited key as this host sees it: what the
    /// database last said was left, and the room in its own chunks.
    pub fn remaining(&self) -> Option<[Option<u64>; 3]> {
        let state = (*self.last.lock().unwrap_or_else(|p| p.into_inner()))?;
        let chunks = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
        let free = chunks
            .chunks
            .iter()
            .filter(|c| c.open && c.reservation.window_ms == state.window_ms)
            .fold(Spend::default(), |acc, c| add(acc, c.free()));
        let left = self.plan.limits.left(&state);
        let free = [free.requests, free.output_tokens, free.input_tokens];
        Some(std::array::from_fn(|i| left[i].map(|l| l + free[i])))
    }

    async fn reserve_in_db(&self, need: Spend) -> Result<Reserved, CallError> {
        let ledger = self
            .log
            .ledger()
            .ok_or_else(|| unavailable(&self.tenant, "the run log keeps no budgets".into()))?;
        let request = ReserveRequest {
            tenant: &self.tenant,
            window: self.plan.window,
            limits: self.plan.limits,
            need,
            owner: &self.owner,
            ttl: self.ttl,
        };
        let reserved = ledger
            .reserve(&request)
            .await
            .map_err(|e| unavailable(&self.tenant, e.to_string()))?;
        if let Reserved::Admitted(_, state) = &reserved {
            *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(*state);
        }
        Ok(reserved)
    }

    fn install(
        &self,
        reservation: Reservation,
        size: Spend,
        open: bool,
        worst: Spend,
    ) -> Reservation {
        let mut chunks = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
        chunks.chunks.push(Chunk {
            reservation,
            size,
            carved: Spend::default(),
            spent: Spend::default(),
            in_flight: 0,
            opened: Instant::now(),
            open,
            idle_since: None,
        });
        let index = chunks.chunks.len() - 1;
        let carved = chunks.carve(index, worst);
        drop(chunks);
        if open {
            self.watch(reservation.id);
        }
        carved
    }

    /// Charges a chunk's calls in the database and releases the rest.
    async fn settle_chunk(&self, chunk: Chunk) {
        let Some(ledger) = self.log.ledger() else {
            return;
        };
        let mut error = None;
        for attempt in 0..SETTLE_TRIES {
            match ledger
                .settle(&self.tenant, chunk.reservation, chunk.spent)
                .await
            {
                Ok(state) => {
                    *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(state);
                    return;
                }
                Err(e) => error = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
        }
        if let Some(e) = error {
            eprintln!(
                "callai serve: cannot charge tenant {:?} {:?}: {e}; its reservation lapses with its lease",
                self.tenant, chunk.spent
            );
        }
    }

    /// Watches open chunk `id` (one task for its whole life, not one per
    /// call): once it has been idle for [`LINGER`], or is past
    /// [`MAX_AGE`] with no call in flight, it is settled.
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
                let done = {
                    let mut chunks = me.chunks.lock().unwrap_or_else(|p| p.into_inner());
                    let Some(i) = chunks.chunks.iter().position(|c| c.reservation.id == id) else {
                        return;
                    };
                    let c = &mut chunks.chunks[i];
                    let idle = c.idle_since.is_some_and(|t| t.elapsed() >= LINGER);
                    if c.opened.elapsed() >= MAX_AGE {
                        c.open = false;
                    }
                    (c.in_flight == 0 && (idle || !c.open)).then(|| chunks.chunks.remove(i))
                };
                if let Some(chunk) = done {
                    me.settle_chunk(chunk).await;
                    return;
                }
            }
        });
    }

    /// Settles every chunk at once, calls in flight or not (a host shutting
    /// down, once its calls have ended).
    pub async fn flush(&self) {
        let all = std::mem::take(&mut self.chunks.lock().unwrap_or_else(|p| p.into_inner()).chunks);
        for chunk in all {
            self.settle_chunk(chunk).await;
        }
    }
}

impl Budget for Allotment {
    fn reserve(&self, worst: Spend) -> BoxFuture<'_, Result<Reservation, CallError>> {
        Box::pin(async move {
            let window_ms = self.plan.window.start_ms(now_ms());
            {
                let mut chunks = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(i) = chunks.chunks.iter().position(|c| c.fits(&worst, window_ms)) {
                    return Ok(chunks.carve(i, worst));
                }
            }
            // A chunk with room for several calls; when that much is not
            // left, half of what is, down to this call's alone.
            let mut calls = CHUNK;
            loop {
                let chunk = times(worst, calls);
                match self.reserve_in_db(chunk).await? {
                    Reserved::Admitted(r, _) => {
                        return Ok(self.install(r, chunk, calls > 1, worst));
                    }
                    Reserved::Refused { key, left, needed } if calls == 1 => {
                        self.counters.refused();
                        return Err(budget_exceeded(key, left, needed));
                    }
                    Reserved::Refused { left, needed, .. } => {
                        let per_call = (needed / calls).max(1);
                        calls = (left / per_call / 2).clamp(1, calls - 1);
                    }
                }
            }
        })
    }

    fn settle(&self, reservation: Reservation, spent: Spend) -> BoxFuture<'static, ()> {
        self.counters.spent(&spent);
        let done = {
            let mut chunks = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
            let Some((chunk_id, worst)) = chunks.carves.remove(&reservation.id) else {
                return Box::pin(async {});
            };
            let Some(i) = chunks
                .chunks
                .iter()
                .position(|c| c.reservation.id == chunk_id)
            else {
                return Box::pin(async {});
            };
            let chunk = &mut chunks.chunks[i];
            chunk.carved = sub(chunk.carved, worst);
            chunk.spent = add(chunk.spent, spent);
            chunk.in_flight -= 1;
            let window_ms = self.plan.window.start_ms(now_ms());
            let closed = !chunk.open
                || chunk.opened.elapsed() >= MAX_AGE
                || chunk.reservation.window_ms != window_ms;
            match (chunk.in_flight, closed) {
                (0, true) => Some(chunks.chunks.remove(i)),
                (0, false) => {
                    // Its watcher settles it if no call comes for a while.
                    chunk.idle_since = Some(Instant::now());
                    None
                }
                (_, true) => {
                    chunk.open = false;
                    None
                }
                _ => None,
            }
        };
        let Some(chunk) = done else {
            return Box::pin(async {});
        };
        let Some(me) = self.me.upgrade() else {
            return Box::pin(async {});
        };
        Box::pin(async move { me.settle_chunk(chunk).await })
    }
}
