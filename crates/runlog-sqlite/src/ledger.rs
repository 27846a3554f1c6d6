//! Budgets and idempotency keys in the run log's file. Every operation is
//! one `BEGIN IMMEDIATE` transaction: SQLite lets one writer in at a time
//! across every process of the machine, so a reservation's check and its
//! addition cannot interleave with another's.

use super::{SqliteRunLog, storage};
use callai_engine::BoxFuture;
use callai_engine::budget::{
    KeyClaim, KeyState, Ledger, Reservation, ReserveRequest, Reserved, Spend, StoredAnswer, Window,
    WindowState, first_misfit,
};
use callai_engine::events::now_ms;
use callai_engine::runlog::RunLogError;
use rusqlite::{OptionalExtension, Transaction, TransactionBehavior, params};

/// Reads a window row, its columns in [`window_of`]'s order. Every
/// statement here is a constant, prepared once per connection
/// (`prepare_cached`): a reservation is on the path of every budgeted call.
const READ_WINDOW: &str = "SELECT spent_requests, spent_output, spent_input,
         reserved_requests, reserved_output, reserved_input
     FROM budget_windows WHERE tenant = ?1 AND window_ms = ?2";

/// Adds to a window's spent and reserved amounts (made if absent).
const ADD_TO_WINDOW: &str = "INSERT INTO budget_windows (tenant, window_ms,
         spent_requests, spent_output, spent_input, reserved_requests, reserved_output, reserved_input)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
     ON CONFLICT (tenant, window_ms) DO UPDATE SET
         spent_requests = spent_requests + ?3, spent_output = spent_output + ?4,
         spent_input = spent_input + ?5, reserved_requests = reserved_requests + ?6,
         reserved_output = reserved_output + ?7, reserved_input = reserved_input + ?8
     RETURNING spent_requests, spent_output, spent_input,
         reserved_requests, reserved_output, reserved_input";

const INSERT_RESERVATION: &str = "INSERT INTO budget_reservations
         (tenant, window_ms, requests, output, input, owner, expires_ms)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id";

const DELETE_RESERVATION: &str = "DELETE FROM budget_reservations WHERE id = ?1
     RETURNING window_ms, requests, output, input";

const RELEASE_LAPSED: &str = "DELETE FROM budget_reservations WHERE tenant = ?1 AND expires_ms < ?2
     RETURNING window_ms, requests, output, input";

fn window_of(window_ms: u64, row: &rusqlite::Row<'_>) -> rusqlite::Result<WindowState> {
    let n = |i: usize| row.get::<_, i64>(i).map(|v| v.max(0) as u64);
    Ok(WindowState {
        window_ms,
        spent: Spend {
            requests: n(0)?,
            output_tokens: n(1)?,
            input_tokens: n(2)?,
        },
        reserved: Spend {
            requests: n(3)?,
            output_tokens: n(4)?,
            input_tokens: n(5)?,
        },
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
    spent: [i64; 3],
    reserved: [i64; 3],
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
                    reserved[0],
                    reserved[1],
                    reserved[2]
                ],
                |r| window_of(window_ms, r),
            )
        })
        .map_err(storage)
}

fn signed(s: &Spend) -> [i64; 3] {
    [s.requests, s.output_tokens, s.input_tokens].map(|v| v.min(i64::MAX as u64) as i64)
}

/// Releases the tenant's reservations that lapsed before `now` (their hosts
/// died or stalled past the call's wall time and a lease).
fn release_lapsed(tx: &Transaction<'_>, tenant: &str, now: u64) -> Result<(), RunLogError> {
    let mut gone = tx.prepare_cached(RELEASE_LAPSED).map_err(storage)?;
    let lapsed: Vec<(i64, [i64; 3])> = gone
        .query_map(params![tenant, now as i64], |r| {
            Ok((r.get(0)?, [r.get(1)?, r.get(2)?, r.get(3)?]))
        })
        .map_err(storage)?
        .collect::<Result<_, _>>()
        .map_err(storage)?;
    for (window_ms, held) in lapsed {
        add_to_window(tx, tenant, window_ms as u64, [0; 3], held.map(|v| -v))?;
    }
    Ok(())
}

fn immediate(conn: &mut rusqlite::Connection) -> Result<Transaction<'_>, RunLogError> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(storage)
}

impl Ledger for SqliteRunLog {
    fn reserve<'a>(
        &'a self,
        request: &'a ReserveRequest<'a>,
    ) -> BoxFuture<'a, Result<Reserved, RunLogError>> {
        let (tenant, owner) = (request.tenant.to_owned(), request.owner.to_owned());
        let (window, limits, need, ttl) =
            (request.window, request.limits, request.need, request.ttl);
        self.blocking(move |conn, _| {
            let now = now_ms();
            let window_ms = window.start_ms(now);
            let tx = immediate(conn)?;
            release_lapsed(&tx, &tenant, now)?;
            let state = read_window(&tx, &tenant, window_ms)?;
            if let Some(refused) = first_misfit(&limits, &state, &need) {
                return Ok(refused);
            }
            let state = add_to_window(&tx, &tenant, window_ms, [0; 3], signed(&need))?;
            let [requests, output, input] = signed(&need);
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
                            owner,
                            (now + ttl.as_millis() as u64) as i64
                        ],
                        |r| r.get(0),
                    )
                })
                .map_err(storage)?;
            tx.commit().map_err(storage)?;
            Ok(Reserved::Admitted(Reservation { id, window_ms }, state))
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
            // The window the reservation was made in, as its row says; the
            // handle's copy when it has lapsed (and was released already).
            let held: Option<(i64, [i64; 3])> = tx
                .prepare_cached(DELETE_RESERVATION)
                .and_then(|mut s| {
                    s.query_row([reservation.id], |r| {
                        Ok((r.get(0)?, [r.get(1)?, r.get(2)?, r.get(3)?]))
                    })
                    .optional()
                })
                .map_err(storage)?;
            let (window_ms, released) = match held {
                Some((window_ms, held)) => (window_ms.max(0) as u64, held.map(|v| -v)),
                None => (reservation.window_ms, [0; 3]),
            };
            let state = add_to_window(&tx, &tenant, window_ms, signed(&spent), released)?;
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
            release_lapsed(&tx, &tenant, now)?;
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
