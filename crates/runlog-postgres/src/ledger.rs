//! Budgets (and, through `keys.rs`, idempotency keys) on PostgreSQL, shared by every host on the
//! database. A reservation is one transaction that locks its window's row
//! (`FOR UPDATE`): concurrent reservations on one window queue on that
//! lock, and each decides what fits against the row as the previous one
//! left it, so no interleaving takes a window past its limits. The
//! arithmetic (what a chunk is granted, what a trim, a settle or a lapse
//! does to the window) is the engine's, shared with the SQLite ledger.
//! Times are the server's clock, as leases are.

use crate::PostgresRunLog;
use crate::pool::Conn;
use callai_engine::BoxFuture;
use callai_engine::budget::{
    KeyClaim, KeyState, Ledger, Reservation, ReserveRequest, Reserved, Spend, StoredAnswer, Window,
    WindowChange, WindowState, adjustment, grant, signed, trimmed,
};
use callai_engine::runlog::RunLogError;
use std::sync::LazyLock;
use tokio_postgres::{GenericClient, Row};

/// Now on the server, in ms since the Unix epoch.
pub(crate) const NOW_MS: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

/// The window columns every statement returns, after the window's start.
const COLUMNS: &str = "spent_requests, spent_output, spent_input, spent_cost, \
     reserved_requests, reserved_output, reserved_input, reserved_cost";

/// A week, in ms: lapsed reservations no host settled within it are
/// forgotten (what they held stays charged).
const WEEK_MS: i64 = 7 * 24 * 3_600_000;

/// How often a reservation that two transactions' locks deadlocked on is
/// tried again before it fails.
pub(crate) const TRIES: usize = 3;

/// A window from a row of (window_ms, the eight [`COLUMNS`]), NULLs as 0.
fn window_of(row: &Row) -> WindowState {
    let n = |i: usize| row.get::<_, Option<i64>>(i).unwrap_or(0).max(0) as u64;
    WindowState {
        window_ms: n(0),
        spent: Spend::from_amounts(std::array::from_fn(|i| n(1 + i))),
        reserved: Spend::from_amounts(std::array::from_fn(|i| n(5 + i))),
    }
}

fn amounts(s: &Spend) -> [i64; 4] {
    s.amounts().map(signed)
}

/// A reservation's row: its window, what it holds, whether it lapsed.
fn held_of(row: &Row) -> (u64, Spend, bool) {
    let n = |i: usize| row.get::<_, i64>(i).max(0) as u64;
    let held = Spend::from_amounts(std::array::from_fn(|i| n(1 + i)));
    (n(0), held, row.get(5))
}

/// Whether `e` is a deadlock or a serialization failure, worth a retry.
fn is_retryable(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    e.code().is_some_and(|c| {
        *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::T_R_SERIALIZATION_FAILURE
    })
}

/// Whether a chunk (a reservation of several calls, which may hold room no
/// call holds yet) is in the window.
const PENDING: &str = "SELECT EXISTS (SELECT 1 FROM callai_budget_reservations
     WHERE tenant = $1 AND window_ms = $2 AND calls > 1 AND NOT lapsed)";

/// Charges the tenant's reservations that lapsed (their hosts died or
/// stalled past a call's wall time and a lease): what each held moves from
/// reserved to spent; they stay, to be settled if their host comes back,
/// for a week ([`WEEK_MS`], `$2`), then are forgotten. One statement.
static LAPSE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH forgotten AS (
             DELETE FROM callai_budget_reservations
             WHERE tenant = $1 AND lapsed AND expires_ms < {NOW_MS} - $2),
         gone AS (
             UPDATE callai_budget_reservations SET lapsed = true
             WHERE tenant = $1 AND NOT lapsed AND expires_ms < {NOW_MS}
             RETURNING window_ms, requests, output, input, cost),
         sums AS (
             SELECT window_ms, sum(requests)::bigint AS r, sum(output)::bigint AS o,
                    sum(input)::bigint AS i, sum(cost)::bigint AS c
             FROM gone GROUP BY window_ms)
         UPDATE callai_budget_windows b SET
             spent_requests = b.spent_requests + sums.r,
             spent_output = b.spent_output + sums.o,
             spent_input = b.spent_input + sums.i,
             spent_cost = b.spent_cost + sums.c,
             reserved_requests = b.reserved_requests - sums.r,
             reserved_output = b.reserved_output - sums.o,
             reserved_input = b.reserved_input - sums.i,
             reserved_cost = b.reserved_cost - sums.c
         FROM sums WHERE b.tenant = $1 AND b.window_ms = sums.window_ms"
    )
});

/// The tenant's current window (`$2`: its length in ms, 0 for a lifetime
/// one), made if absent and locked until the transaction ends, as it
/// stands: a no-op update takes the lock and returns the row.
static LOCK_WINDOW: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH now AS (SELECT {NOW_MS} AS ms)
         INSERT INTO callai_budget_windows AS b (tenant, window_ms)
         SELECT $1, CASE WHEN $2::bigint = 0 THEN 0 ELSE ms - ms % $2::bigint END FROM now
         ON CONFLICT (tenant, window_ms) DO UPDATE SET tenant = b.tenant
         RETURNING b.window_ms, {COLUMNS}"
    )
});

/// Holds what a reservation was granted in its window and records it.
static ADMIT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH w AS (
             UPDATE callai_budget_windows SET
                 reserved_requests = reserved_requests + $3,
                 reserved_output = reserved_output + $4,
                 reserved_input = reserved_input + $5,
                 reserved_cost = reserved_cost + $6
             WHERE tenant = $1 AND window_ms = $2
             RETURNING window_ms, {COLUMNS}),
         r AS (
             INSERT INTO callai_budget_reservations
                 (tenant, window_ms, requests, output, input, cost, owner, expires_ms, calls)
             VALUES ($1, $2, $3, $4, $5, $6, $7, {NOW_MS} + $8, $9)
             RETURNING id)
         SELECT w.window_ms, {COLUMNS}, r.id FROM w, r"
    )
});

impl PostgresRunLog {
    /// Charges the tenant's lapsed reservations ([`LAPSE`]).
    async fn lapse(&self, tenant: &str) -> Result<(), RunLogError> {
        let conn = self.conn().await?;
        conn.execute(LAPSE.as_str(), &[&tenant, &WEEK_MS])
            .await
            .map_err(self.storage())?;
        Ok(())
    }

    async fn read_window(&self, tenant: &str, window: Window) -> Result<WindowState, RunLogError> {
        let conn = self.conn().await?;
        let sql = format!(
            "WITH w AS (SELECT CASE WHEN $2::bigint = 0 THEN 0 ELSE ms - ms % $2::bigint END
                        AS start FROM (SELECT {NOW_MS} AS ms) now)
             SELECT w.start, {COLUMNS} FROM w LEFT JOIN callai_budget_windows b
                 ON b.tenant = $1 AND b.window_ms = w.start"
        );
        let row = conn
            .query_one(&sql, &[&tenant, &window_length(window)])
            .await
            .map_err(self.storage())?;
        Ok(window_of(&row))
    }

    /// One try at the reservation, in one transaction holding the window's
    /// row lock, in two round trips: the lapsed reservations charged, the
    /// transaction begun and the window locked, pipelined; then what was
    /// granted held and recorded, and the commit, pipelined. (Requests on
    /// one connection run in the order they are sent; a COMMIT after a
    /// statement that failed rolls back.) A failure rolls the transaction
    /// back before the connection goes back to the pool.
    async fn try_reserve(&self, request: &ReserveRequest<'_>) -> Result<Reserved, Failed> {
        let conn = self.conn().await.map_err(Failed::Log)?;
        let result = reserve_on(&conn, request).await;
        if result.is_err() {
            let _ = conn.batch_execute("ROLLBACK").await;
        }
        result
    }

    /// Settles (`hold` none: the row deleted) or trims a reservation, in
    /// one transaction.
    async fn change(
        &self,
        tenant: &str,
        reservation: Reservation,
        charge: Spend,
        hold: Option<Spend>,
    ) -> Result<WindowState, RunLogError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await.map_err(self.storage())?;
        let read = match hold {
            None => {
                "DELETE FROM callai_budget_reservations WHERE id = $1 AND tenant = $2
                 RETURNING window_ms, requests, output, input, cost, lapsed"
            }
            Some(_) => {
                "SELECT window_ms, requests, output, input, cost, lapsed
                 FROM callai_budget_reservations WHERE id = $1 AND tenant = $2 FOR UPDATE"
            }
        };
        let row = tx
            .query_opt(read, &[&reservation.id, &tenant])
            .await
            .map_err(self.storage())?;
        let (window_ms, change) = match row.as_ref().map(held_of) {
            Some((window_ms, held, lapsed)) => {
                let hold = hold.map(|hold| trimmed(held, hold));
                if let Some(hold) = hold {
                    let [r, o, i, c] = amounts(&hold);
                    tx.execute(
                        "UPDATE callai_budget_reservations SET requests = $2, output = $3,
                             input = $4, cost = $5 WHERE id = $1",
                        &[&reservation.id, &r, &o, &i, &c],
                    )
                    .await
                    .map_err(self.storage())?;
                }
                (
                    window_ms,
                    adjustment(held, lapsed, charge, hold.unwrap_or_default()),
                )
            }
            // Gone (a lapsed reservation forgotten): the charge alone.
            None => (reservation.window_ms, (amounts(&charge), [0; 4])),
        };
        let state = apply(&tx, tenant, window_ms as i64, change)
            .await
            .map_err(self.storage())?;
        tx.commit().await.map_err(self.storage())?;
        Ok(state)
    }
}

/// [`PostgresRunLog::try_reserve`]'s statements on `conn`. Each is
/// prepared first (once per connection, then cached): a statement given as
/// text is prepared in a round trip of its own, which would let a pipelined
/// COMMIT run before it.
async fn reserve_on(conn: &Conn, request: &ReserveRequest<'_>) -> Result<Reserved, Failed> {
    let length = window_length(request.window);
    let lapse = conn.0.prepare_cached(&LAPSE).await?;
    let lock = conn.0.prepare_cached(&LOCK_WINDOW).await?;
    let admit = conn.0.prepare_cached(&ADMIT).await?;
    let pending = conn.0.prepare_cached(PENDING).await?;
    let lapse_params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&request.tenant, &WEEK_MS];
    let lock_params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&request.tenant, &length];
    let (lapsed, begun, row) = tokio::join!(
        conn.execute(&lapse, &lapse_params),
        conn.batch_execute("BEGIN"),
        conn.query_one(&lock, &lock_params),
    );
    lapsed?;
    begun?;
    let state = window_of(&row?);
    let window_ms = state.window_ms as i64;
    let calls = match grant(&request.limits, &state, &request.need, request.calls) {
        Ok(calls) => calls,
        Err(Reserved::Refused {
            key,
            left,
            needed,
            room,
            ..
        }) => {
            let pending: bool = conn
                .query_one(&pending, &[&request.tenant, &window_ms])
                .await?
                .get(0);
            conn.batch_execute("COMMIT").await?;
            return Ok(Reserved::Refused {
                key,
                left,
                needed,
                room,
                pending,
            });
        }
        Err(other) => return Ok(other),
    };
    let need = request.need;
    let held = amounts(&need.times(calls));
    let ttl = request.ttl.as_millis() as i64;
    let granted = signed(calls);
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 9] = [
        &request.tenant,
        &window_ms,
        &held[0],
        &held[1],
        &held[2],
        &held[3],
        &request.owner,
        &ttl,
        &granted,
    ];
    let (row, committed) = tokio::join!(
        conn.query_one(&admit, &params),
        conn.batch_execute("COMMIT"),
    );
    let row = row?;
    committed?;
    let state = window_of(&row);
    Ok(Reserved::Admitted {
        reservation: Reservation {
            id: row.get(9),
            window_ms: state.window_ms,
        },
        calls,
        state,
    })
}

/// Why a try at a reservation failed: the database (maybe worth another
/// try), or the run log before it (no connection).
enum Failed {
    Db(tokio_postgres::Error),
    Log(RunLogError),
}

impl From<tokio_postgres::Error> for Failed {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::Db(e)
    }
}

/// Adds `change` to a window (made if absent), its state after.
async fn apply(
    tx: &impl GenericClient,
    tenant: &str,
    window_ms: i64,
    (spent, reserved): WindowChange,
) -> Result<WindowState, tokio_postgres::Error> {
    let row = tx
        .query_one(
            &format!(
                "INSERT INTO callai_budget_windows AS b (tenant, window_ms,
                     spent_requests, spent_output, spent_input, spent_cost,
                     reserved_requests, reserved_output, reserved_input, reserved_cost)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                 ON CONFLICT (tenant, window_ms) DO UPDATE SET
                     spent_requests = b.spent_requests + excluded.spent_requests,
                     spent_output = b.spent_output + excluded.spent_output,
                     spent_input = b.spent_input + excluded.spent_input,
                     spent_cost = b.spent_cost + excluded.spent_cost,
                     reserved_requests = b.reserved_requests + excluded.reserved_requests,
                     reserved_output = b.reserved_output + excluded.reserved_output,
                     reserved_input = b.reserved_input + excluded.reserved_input,
                     reserved_cost = b.reserved_cost + excluded.reserved_cost
                 RETURNING b.window_ms, {COLUMNS}"
            ),
            &[
                &tenant,
                &window_ms,
                &spent[0],
                &spent[1],
                &spent[2],
                &spent[3],
                &reserved[0],
                &reserved[1],
                &reserved[2],
                &reserved[3],
            ],
        )
        .await?;
    Ok(window_of(&row))
}

fn window_length(window: Window) -> i64 {
    window.length().map_or(0, |l| l.as_millis() as i64)
}

impl Ledger for PostgresRunLog {
    fn reserve<'a>(
        &'a self,
        request: &'a ReserveRequest<'a>,
    ) -> BoxFuture<'a, Result<Reserved, RunLogError>> {
        Box::pin(async move {
            self.lapse(request.tenant).await?;
            let mut tries = 0;
            loop {
                match self.try_reserve(request).await {
                    Ok(reserved) => return Ok(reserved),
                    Err(Failed::Db(e)) if is_retryable(&e) && tries + 1 < TRIES => tries += 1,
                    Err(Failed::Db(e)) => return Err(self.storage()(e)),
                    Err(Failed::Log(e)) => return Err(e),
                }
            }
        })
    }

    fn settle<'a>(
        &'a self,
        tenant: &'a str,
        reservation: Reservation,
        spent: Spend,
    ) -> BoxFuture<'a, Result<WindowState, RunLogError>> {
        Box::pin(self.change(tenant, reservation, spent, None))
    }

    fn trim<'a>(
        &'a self,
        tenant: &'a str,
        reservation: Reservation,
        charge: Spend,
        hold: Spend,
    ) -> BoxFuture<'a, Result<WindowState, RunLogError>> {
        Box::pin(self.change(tenant, reservation, charge, Some(hold)))
    }

    fn window<'a>(
        &'a self,
        tenant: &'a str,
        window: Window,
    ) -> BoxFuture<'a, Result<WindowState, RunLogError>> {
        Box::pin(async move {
            self.lapse(tenant).await?;
            self.read_window(tenant, window).await
        })
    }

    fn claim_key<'a>(
        &'a self,
        claim: &'a KeyClaim<'a>,
    ) -> BoxFuture<'a, Result<KeyState, RunLogError>> {
        Box::pin(self.claim_idempotency_key(claim))
    }

    fn answer_key<'a>(
        &'a self,
        tenant: &'a str,
        key: &'a str,
        answer: &'a StoredAnswer,
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        Box::pin(self.answer_idempotency_key(tenant, key, answer))
    }

    fn release_key<'a>(
        &'a self,
        tenant: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        Box::pin(self.release_idempotency_key(tenant, key))
    }
}
