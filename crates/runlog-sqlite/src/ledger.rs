//! Budgets and idempotency keys in the run log's file. Every operation is
//! one `BEGIN IMMEDIATE` transaction: SQLite lets one writer in at a time
//! across every process of the machine, so a reservation's check and its
//! addition cannot interleave with another's. The arithmetic (what a
//! chunk is granted, what a trim, a settle or a lapse does to the window)
//! is the engine's, shared with the PostgreSQL ledger.

use super::{SqliteRunLog, immediate, storage};
use callai_engine::BoxFuture;
use callai_engine::budget::{
    KeyClaim, KeyState, Ledger, Reservation, ReserveRequest, Reserved, Spend, StoredAnswer, Window,
    WindowChange, WindowState, adjustment, grant, signed, trimmed,
};
use callai_engine::events::now_ms;
use callai_engine::runlog::RunLogError;
use rusqlite::{OptionalExtension, Transaction, params};

/// Reads a window row, its columns in [`window_of`]'s order. Every
/// statement here is a constant, prepared once per connection
/// (`prepare_cached`): a reservation is on the path of every budgeted call.
const READ_WINDOW: &str = "SELECT spent_requests, spent_output, spent_input, spent_cost,
         reserved_requests, reserved_output, reserved_input, reserved_cost
     FROM budget_windows WHERE tenant = ?1 AND window_ms = ?2";

/// Adds to a window's spent and reserved amounts (made if absent).
const ADD_TO_WINDOW: &str = "INSERT INTO budget_windows (tenant, window_ms,
         spent_requests, spent_output, spent_input, spent_cost,
         reserved_requests, reserved_output, reserved_input, reserved_cost)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
     ON CONFLICT (tenant, window_ms) DO UPDATE SET
         spent_requests = spent_requests + ?3, spent_output = spent_output + ?4,
         spent_input = spent_input + ?5, spent_cost = spent_cost + ?6,
         reserved_requests = reserved_requests + ?7, reserved_output = reserved_output + ?8,
         reserved_input = reserved_input + ?9, reserved_cost = reserved_cost + ?10
     RETURNING spent_requests, spent_output, spent_input, spent_cost,
         reserved_requests, reserved_output, reserved_input, reserved_cost";

const INSERT_RESERVATION: &str = "INSERT INTO budget_reservations
         (tenant, window_ms, requests, output, input, cost, owner, expires_ms, calls)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) RETURNING id";

const DELETE_RESERVATION: &str = "DELETE FROM budget_reservations WHERE id = ?1 AND tenant = ?2
     RETURNING window_ms, requests, output, input, cost, lapsed";

const READ_RESERVATION: &str = "SELECT window_ms, requests, output, input, cost, lapsed
     FROM budget_reservations WHERE id = ?1 AND tenant = ?2";

const HOLD_RESERVATION: &str = "UPDATE budget_reservations
     SET requests = ?2, output = ?3, input = ?4, cost = ?5 WHERE id = ?1";

/// Marks the tenant's reservations that lapsed before `?2` (their hosts
/// died or stalled past a call's wall time and a lease): they stay, to be
/// settled if their host comes back, and are charged.
const LAPSE: &str = "UPDATE budget_reservations SET lapsed = 1
     WHERE tenant = ?1 AND lapsed = 0 AND expires_ms < ?2
     RETURNING window_ms, requests, output, input, cost";

/// Lapsed reservations no host settled within a week are forgotten (what
/// they held stays charged).
const FORGET_LAPSED: &str = "DELETE FROM budget_reservations
     WHERE tenant = ?1 AND lapsed = 1 AND expires_ms < ?2";

/// Whether a chunk (a reservation of several calls, which may hold room
/// no call holds yet) is in the window.
const PENDING: &str = "SELECT EXISTS (SELECT 1 FROM budget_reservations
     WHERE tenant = ?1 AND window_ms = ?2 AND calls > 1 AND lapsed = 0)";

/// A week, in ms.
const WEEK_MS: u64 = 7 * 24 * 3_600_000;

fn window_of(window_ms: u64, row: &rusqlite::Row<'_>) -> rusqlite::Result<WindowState> {
    let amounts = |from: usize| -> rusqlite::Result<[i64; 4]> {
        Ok([
            row.get(from)?,
            row.get(from + 1)?,
            row.get(from + 2)?,
            row.get(from + 3)?,
        ])
    };
    Ok(WindowState {
        window_ms,
        spent: spend_of(amounts(0)?),
        reserved: spend_of(amounts(4)?),
    })
}

/// The window's state; zero when nothing was reserved in it yet.
fn read_window(
    tx: &Transaction<'_>,
    tenant: &str,
    window_ms: u64,
) -> Result<WindowState, RunLogError> {
    let state = tx
        .prepare_cached(READ_WINDOW)
        .and_then(|mut s| {
            s.query_row(params![tenant, window_ms as i64], |r| {
                window_of(window_ms, r)
            })
            .optional()
        })
        .map_err(storage)?;
    Ok(state.unwrap_or(WindowState {
        window_ms,
        ..WindowState::default()
    }))
}

/// Adds `spent` and `reserved` (either may be negative) to a window.
fn add_to_window(
    tx: &Transaction<'_>,
    tenant: &str,
    window_ms: u64,
    spent: [i64; 4],
    reserved: [i64; 4],
) -> Result<WindowState, RunLogError> {
    tx.prepare_cached(ADD_TO_WINDOW)
        .and_then(|mut s| {
            s.query_row(
                params![
                    tenant,
                    window_ms as i64,
                    spent[0],
                    spent[1],
                    spent[2],
                    spent[3],
                    reserved[0],
                    reserved[1],
                    reserved[2],
                    reserved[3]
                ],
                |r| window_of(window_ms, r),
            )
        })
        .map_err(storage)
}

fn amounts(s: &Spend) -> [i64; 4] {
    s.amounts().map(signed)
}

fn spend_of(v: [i64; 4]) -> Spend {
    Spend::from_amounts(v.map(|v| v.max(0) as u64))
}

/// Charges the tenant's reservations that lapsed before `now`: what each
/// held moves from reserved to spent.
fn lapse(tx: &Transaction<'_>, tenant: &str, now: u64) -> Result<(), RunLogError> {
    let mut lapsing = tx.prepare_cached(LAPSE).map_err(storage)?;
    let lapsed: Vec<(i64, [i64; 4])> = lapsing
        .query_map(params![tenant, now as i64], |r| {
            Ok((r.get(0)?, [r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?]))
        })
        .map_err(storage)?
        .collect::<Result<_, _>>()
        .map_err(storage)?;
    for (window_ms, held) in lapsed {
        add_to_window(tx, tenant, window_ms as u64, held, held.map(|v| -v))?;
    }
    tx.prepare_cached(FORGET_LAPSED)
        .and_then(|mut s| s.execute(params![tenant, now.saturating_sub(WEEK_MS) as i64]))
        .map_err(storage)?;
    Ok(())
}

/// A reservation's row: its window, what it holds, whether it lapsed.
type Held = (u64, Spend, bool);

fn held_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<Held> {
    let window_ms: i64 = row.get(0)?;
    let held = spend_of([row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?]);
    Ok((window_ms.max(0) as u64, held, row.get(5)?))
}

/// Applies `change` to the window of a reservation (the handle's own
/// window when its row is gone: a lapsed one forgotten).
fn apply(
    tx: &Transaction<'_>,
    tenant: &str,
    window_ms: u64,
    (spent, reserved): WindowChange,
) -> Result<WindowState, RunLogError> {
    add_to_window(tx, tenant, window_ms, spent, reserved)
}

impl Ledger for SqliteRunLog {
    fn reserve<'a>(
        &'a self,
        request: &'a ReserveRequest<'a>,
    ) -> BoxFuture<'a, Result<Reserved, RunLogError>> {
        let (tenant, owner) = (request.tenant.to_owned(), request.owner.to_owned());
        let (window, limits, need, calls, ttl) = (
            request.window,
            request.limits,
            request.need,
            request.calls,
            request.ttl,
        );
        self.blocking(move |conn, _| {
            let now = now_ms();
            let window_ms = window.start_ms(now);
            let tx = immediate(conn)?;
            lapse(&tx, &tenant, now)?;
            let state = read_window(&tx, &tenant, window_ms)?;
            let calls = match grant(&limits, &state, &need, calls) {
                Ok(calls) => calls,
                Err(Reserved::Refused {
                    key,
                    left,
                    needed,
                    room,
                    ..
                }) => {
                    let pending: bool = tx
                        .prepare_cached(PENDING)
                        .and_then(|mut s| {
                            s.query_row(params![tenant, window_ms as i64], |r| r.get(0))
                        })
                        .map_err(storage)?;
                    tx.commit().map_err(storage)?;
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
            let held = amounts(&need.times(calls));
            let state = add_to_window(&tx, &tenant, window_ms, [0; 4], held)?;
            let [requests, output, input, cost] = held;
            let id: i64 = tx
                .prepare_cached(INSERT_RESERVATION)
                .and_then(|mut s| {
                    s.query_row(
                        params![
                            tenant,
                            window_ms as i64,
                            requests,
                            output,
                            input,
                            cost,
                            owner,
                            (now + ttl.as_millis() as u64) as i64,
                            signed(calls)
                        ],
                        |r| r.get(0),
                    )
                })
                .map_err(storage)?;
            tx.commit().map_err(storage)?;
            Ok(Reserved::Admitted {
                reservation: Reservation { id, window_ms },
                calls,
                state,
            })
        })
    }

    fn settle<'a>(
        &'a self,
        tenant: &'a str,
        reservation: Reservation,
        spent: Spend,
    ) -> BoxFuture<'a, Result<WindowState, RunLogError>> {
        let tenant = tenant.to_owned();
        self.blocking(move |conn, _| {
            let tx = immediate(conn)?;
            let row: Option<Held> = tx
                .prepare_cached(DELETE_RESERVATION)
                .and_then(|mut s| {
                    s.query_row(params![reservation.id, tenant], held_of)
                        .optional()
                })
                .map_err(storage)?;
            let (window_ms, held, lapsed) =
                row.unwrap_or((reservation.window_ms, Spend::default(), false));
            let change = adjustment(held, lapsed, spent, Spend::default());
            let state = apply(&tx, &tenant, window_ms, change)?;
            tx.commit().map_err(storage)?;
            Ok(state)
        })
    }

    fn trim<'a>(
        &'a self,
        tenant: &'a str,
        reservation: Reservation,
        charge: Spend,
        hold: Spend,
    ) -> BoxFuture<'a, Result<WindowState, RunLogError>> {
        let tenant = tenant.to_owned();
        self.blocking(move |conn, _| {
            let tx = immediate(conn)?;
            let row: Option<Held> = tx
                .prepare_cached(READ_RESERVATION)
                .and_then(|mut s| {
                    s.query_row(params![reservation.id, tenant], held_of)
                        .optional()
                })
                .map_err(storage)?;
            let change = match row {
                Some((window_ms, held, lapsed)) => {
                    let hold = trimmed(held, hold);
                    let [requests, output, input, cost] = amounts(&hold);
                    tx.prepare_cached(HOLD_RESERVATION)
                        .and_then(|mut s| {
                            s.execute(params![reservation.id, requests, output, input, cost])
                        })
                        .map_err(storage)?;
                    (window_ms, adjustment(held, lapsed, charge, hold))
                }
                None => (reservation.window_ms, (amounts(&charge), [0; 4])),
            };
            let state = apply(&tx, &tenant, change.0, change.1)?;
            tx.commit().map_err(storage)?;
            Ok(state)
        })
    }

    fn window<'a>(
        &'a self,
        tenant: &'a str,
        window: Window,
    ) -> BoxFuture<'a, Result<WindowState, RunLogError>> {
        let tenant = tenant.to_owned();
        self.blocking(move |conn, _| {
            let now = now_ms();
            let tx = immediate(conn)?;
            lapse(&tx, &tenant, now)?;
            let state = read_window(&tx, &tenant, window.start_ms(now))?;
            tx.commit().map_err(storage)?;
            Ok(state)
        })
    }

    fn claim_key<'a>(
        &'a self,
        claim: &'a KeyClaim<'a>,
    ) -> BoxFuture<'a, Result<KeyState, RunLogError>> {
        let (tenant, key, sha, owner) = (
            claim.tenant.to_owned(),
            claim.key.to_owned(),
            claim.request_sha256.to_owned(),
            claim.owner.to_owned(),
        );
        let (ttl, keep) = (claim.ttl.as_millis() as i64, claim.keep.as_millis() as i64);
        self.blocking(move |conn, _| {
            let now = now_ms() as i64;
            let tx = immediate(conn)?;
            type Row = (
                String,
                String,
                i64,
                Option<u16>,
                Option<String>,
                Option<Vec<u8>>,
            );
            let row: Option<Row> = tx
                .query_row(
                    "SELECT request_sha256, state, until_ms, status, headers, body
                     FROM idempotency_keys WHERE tenant = ?1 AND key = ?2",
                    params![tenant, key],
                    |r| {
                        Ok((
                            r.get(0)?,
                            r.get(1)?,
                            r.get(2)?,
                            r.get(3)?,
                            r.get(4)?,
                            r.get(5)?,
                        ))
                    },
                )
                .optional()
                .map_err(storage)?;
            let state = match row {
                Some((_, _, until, ..)) if until < now => None,
                Some((theirs, ..)) if theirs != sha => Some(KeyState::Mismatch),
                Some((_, state, ..)) if state == "running" => Some(KeyState::Running),
                Some((_, _, _, status, headers, body)) => {
                    let headers = headers.as_deref().unwrap_or("[]");
                    let headers = serde_json::from_str(headers).map_err(|e| {
                        RunLogError::Storage(format!("idempotency key {key:?}: its headers: {e}"))
                    })?;
                    Some(KeyState::Answered(StoredAnswer {
                        status: status.unwrap_or(500),
                        headers,
                        body: body.unwrap_or_default(),
                    }))
                }
                None => None,
            };
            if let Some(state) = state {
                return Ok(state);
            }
            tx.execute(
                "INSERT INTO idempotency_keys
                     (tenant, key, request_sha256, state, owner, until_ms, keep_ms)
                 VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6)
                 ON CONFLICT (tenant, key) DO UPDATE SET
                     request_sha256 = ?3, state = 'running', owner = ?4, until_ms = ?5,
                     keep_ms = ?6, status = NULL, headers = NULL, body = NULL",
                params![tenant, key, sha, owner, now + ttl, keep],
            )
            .map_err(storage)?;
            tx.commit().map_err(storage)?;
            Ok(KeyState::Claimed)
        })
    }

    fn answer_key<'a>(
        &'a self,
        tenant: &'a str,
        key: &'a str,
        answer: &'a StoredAnswer,
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        let (tenant, key) = (tenant.to_owned(), key.to_owned());
        let headers = serde_json::to_string(&answer.headers).expect("strings serialize");
        let (status, body) = (answer.status, answer.body.clone());
        self.blocking(move |conn, _| {
            conn.execute(
                "UPDATE idempotency_keys SET state = 'done', status = ?3, headers = ?4,
                     body = ?5, until_ms = ?6 + keep_ms
                 WHERE tenant = ?1 AND key = ?2",
                params![tenant, key, status, headers, body, now_ms() as i64],
            )
            .map_err(storage)?;
            Ok(())
        })
    }

    fn release_key<'a>(
        &'a self,
        tenant: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        let (tenant, key) = (tenant.to_owned(), key.to_owned());
        self.blocking(move |conn, _| {
            conn.execute(
                "DELETE FROM idempotency_keys WHERE tenant = ?1 AND key = ?2 AND state = 'running'",
                params![tenant, key],
            )
            .map_err(storage)?;
            Ok(())
        })
    }
}
