//! Budgets and idempotency keys on PostgreSQL, shared by every host on the
//! database. A reservation is one statement: an upsert of the window row
//! whose `DO UPDATE ... WHERE` adds the call's worst case only if it fits
//! beside what is spent and reserved. Concurrent reservations on one window
//! queue on its row lock, and each re-checks the condition against the row
//! as the previous one left it (READ COMMITTED's re-evaluation of an
//! updated row), so no interleaving takes a window past its limits. Times
//! are the server's clock, as leases are.

use crate::PostgresRunLog;
use callai_engine::BoxFuture;
use callai_engine::budget::{
    KeyClaim, KeyState, Ledger, Reservation, ReserveRequest, Reserved, Spend, StoredAnswer, Window,
    WindowState, first_misfit,
};
use callai_engine::runlog::RunLogError;
use tokio_postgres::Row;

/// Now on the server, in ms since the Unix epoch.
const NOW_MS: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

/// The window columns every statement returns, after the window's start.
const COLUMNS: &str = "spent_requests, spent_output, spent_input, \
     reserved_requests, reserved_output, reserved_input";

/// A window from a row of (window_ms, the six [`COLUMNS`]), NULLs as 0.
fn window_of(row: &Row) -> WindowState {
    let n = |i: usize| row.get::<_, Option<i64>>(i).unwrap_or(0).max(0) as u64;
    WindowState {
        window_ms: n(0),
        spent: Spend {
            requests: n(1),
            output_tokens: n(2),
            input_tokens: n(3),
        },
        reserved: Spend {
            requests: n(4),
            output_tokens: n(5),
            input_tokens: n(6),
        },
    }
}

fn signed(value: u64) -> i64 {
    value.min(i64::MAX as u64) as i64
}

fn window_length(window: Window) -> i64 {
    window.length().map_or(0, |l| l.as_millis() as i64)
}

impl PostgresRunLog {
    /// Releases the tenant's reservations that lapsed (their hosts died or
    /// stalled past the call's wall time and a lease).
    async fn release_lapsed(&self, tenant: &str) -> Result<(), RunLogError> {
        let conn = self.conn().await?;
        let sql = format!(
            "WITH gone AS (
                 DELETE FROM callai_budget_reservations
                 WHERE tenant = $1 AND expires_ms < {NOW_MS}
                 RETURNING window_ms, requests, output, input),
             sums AS (
                 SELECT window_ms, sum(requests)::bigint AS r, sum(output)::bigint AS o,
                        sum(input)::bigint AS i
                 FROM gone GROUP BY window_ms)
             UPDATE callai_budget_windows b SET
                 reserved_requests = b.reserved_requests - sums.r,
                 reserved_output = b.reserved_output - sums.o,
                 reserved_input = b.reserved_input - sums.i
             FROM sums WHERE b.tenant = $1 AND b.window_ms = sums.window_ms"
        );
        conn.execute(&sql, &[&tenant])
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

    /// One try at the reservation: the window and the reservation when it
    /// fit, none when it did not.
    async fn try_reserve(
        &self,
        request: &ReserveRequest<'_>,
    ) -> Result<Option<(Reservation, WindowState)>, RunLogError> {
        let conn = self.conn().await?;
        let sql = format!(
            "WITH w AS (SELECT CASE WHEN $2::bigint = 0 THEN 0 ELSE ms - ms % $2::bigint END
                        AS start FROM (SELECT {NOW_MS} AS ms) now),
             ins AS (
                 INSERT INTO callai_budget_windows AS b
                     (tenant, window_ms, reserved_requests, reserved_output, reserved_input)
                 SELECT $1, w.start, $3, $4, $5 FROM w
                 WHERE ($6::bigint IS NULL OR $3 <= $6) AND ($7::bigint IS NULL OR $4 <= $7)
                   AND ($8::bigint IS NULL OR $5 <= $8)
                 ON CONFLICT (tenant, window_ms) DO UPDATE SET
                     reserved_requests = b.reserved_requests + excluded.reserved_requests,
                     reserved_output = b.reserved_output + excluded.reserved_output,
                     reserved_input = b.reserved_input + excluded.reserved_input
                 WHERE ($6::bigint IS NULL OR b.spent_requests + b.reserved_requests + $3 <= $6)
                   AND ($7::bigint IS NULL OR b.spent_output + b.reserved_output + $4 <= $7)
                   AND ($8::bigint IS NULL OR b.spent_input + b.reserved_input + $5 <= $8)
                 RETURNING b.window_ms, {COLUMNS}),
             res AS (
                 INSERT INTO callai_budget_reservations
                     (tenant, window_ms, requests, output, input, owner, expires_ms)
                 SELECT $1, ins.window_ms, $3, $4, $5, $9, {NOW_MS} + $10 FROM ins
                 RETURNING id)
             SELECT ins.window_ms, {COLUMNS}, res.id FROM ins, res"
        );
        let (need, limits) = (request.need, request.limits);
        let row = conn
            .query_opt(
                &sql,
                &[
                    &request.tenant,
                    &window_length(request.window),
                    &signed(need.requests),
                    &signed(need.output_tokens),
                    &signed(need.input_tokens),
                    &limits.requests.map(signed),
                    &limits.output_tokens.map(signed),
                    &limits.input_tokens.map(signed),
                    &request.owner,
                    &(request.ttl.as_millis() as i64),
                ],
            )
            .await
            .map_err(self.storage())?;
        Ok(row.map(|row| {
            let state = window_of(&row);
            let reservation = Reservation {
                id: row.get(7),
                window_ms: state.window_ms,
            };
            (reservation, state)
        }))
    }
}

/// How often a reservation that found no room but whose window, read
/// again, has room (calls settled in between) is tried again.
const TRIES: usize = 3;

impl Ledger for PostgresRunLog {
    fn reserve<'a>(
        &'a self,
        request: &'a ReserveRequest<'a>,
    ) -> BoxFuture<'a, Result<Reserved, RunLogError>> {
        Box::pin(async move {
            self.release_lapsed(request.tenant).await?;
            for _ in 0..TRIES {
                if let Some((reservation, state)) = self.try_reserve(request).await? {
                    return Ok(Reserved::Admitted(reservation, state));
                }
                let state = self.read_window(request.tenant, request.window).await?;
                if let Some(refused) = first_misfit(&request.limits, &state, &request.need) {
                    return Ok(refused);
                }
            }
            // Still no room after room was seen each time: the window is
            // that busy; refuse on what was last read as the tightest key.
            let state = self.read_window(request.tenant, request.window).await?;
            let left = request.limits.left(&state);
            let need = request.need.by_key();
            let (i, _) = (0..3)
                .filter_map(|i| left[i].map(|l| (i, l)))
                .min_by_key(|(_, l)| *l)
                .unwrap_or((0, 0));
            Ok(Reserved::Refused {
                key: need[i].0,
                left: left[i].unwrap_or(0),
                needed: need[i].1,
            })
        })
    }

    fn settle<'a>(
        &'a self,
        tenant: &'a str,
        reservation: Reservation,
        spent: Spend,
    ) -> BoxFuture<'a, Result<WindowState, RunLogError>> {
        // Charged to the window the reservation's row names (the handle's
        // copy when it lapsed and was released already).
        Box::pin(async move {
            let conn = self.conn().await?;
            let sql = format!(
                "WITH r AS (DELETE FROM callai_budget_reservations WHERE id = $1
                            RETURNING window_ms, requests, output, input)
                 INSERT INTO callai_budget_windows AS b
                     (tenant, window_ms, spent_requests, spent_output, spent_input)
                 VALUES ($2, COALESCE((SELECT window_ms FROM r), $3), $4, $5, $6)
                 ON CONFLICT (tenant, window_ms) DO UPDATE SET
                     spent_requests = b.spent_requests + excluded.spent_requests,
                     spent_output = b.spent_output + excluded.spent_output,
                     spent_input = b.spent_input + excluded.spent_input,
                     reserved_requests = b.reserved_requests - COALESCE((SELECT requests FROM r), 0),
                     reserved_output = b.reserved_output - COALESCE((SELECT output FROM r), 0),
                     reserved_input = b.reserved_input - COALESCE((SELECT input FROM r), 0)
                 RETURNING b.window_ms, {COLUMNS}"
            );
            let row = conn
                .query_one(
                    &sql,
                    &[
                        &reservation.id,
                        &tenant,
                        &(reservation.window_ms as i64),
                        &signed(spent.requests),
                        &signed(spent.output_tokens),
                        &signed(spent.input_tokens),
                    ],
                )
                .await
                .map_err(self.storage())?;
            Ok(window_of(&row))
        })
    }

    fn window<'a>(
        &'a self,
        tenant: &'a str,
        window: Window,
    ) -> BoxFuture<'a, Result<WindowState, RunLogError>> {
        Box::pin(async move {
            self.release_lapsed(tenant).await?;
            self.read_window(tenant, window).await
        })
    }

    fn claim_key<'a>(
        &'a self,
        claim: &'a KeyClaim<'a>,
    ) -> BoxFuture<'a, Result<KeyState, RunLogError>> {
        Box::pin(async move {
            let conn = self.conn().await?;
            let ttl = claim.ttl.as_millis() as i64;
            let keep = claim.keep.as_millis() as i64;
            let claim_sql = format!(
                "INSERT INTO callai_idempotency_keys AS k
                     (tenant, key, request_sha256, state, owner, until_ms, keep_ms)
                 VALUES ($1, $2, $3, 'running', $4, {NOW_MS} + $5, $6)
                 ON CONFLICT (tenant, key) DO UPDATE SET
                     request_sha256 = excluded.request_sha256, state = 'running',
                     owner = excluded.owner, until_ms = excluded.until_ms,
                     keep_ms = excluded.keep_ms, status = NULL, headers = NULL, body = NULL
                 WHERE k.until_ms < {NOW_MS}
                 RETURNING 1"
            );
            for _ in 0..TRIES {
                let claimed = conn
                    .query_opt(
                        &claim_sql,
                        &[
                            &claim.tenant,
                            &claim.key,
                            &claim.request_sha256,
                            &claim.owner,
                            &ttl,
                            &keep,
                        ],
                    )
                    .await
                    .map_err(self.storage())?;
                if claimed.is_some() {
                    return Ok(KeyState::Claimed);
                }
                let row = conn
                    .query_opt(
                        "SELECT request_sha256, state, status, headers, body
                         FROM callai_idempotency_keys WHERE tenant = $1 AND key = $2",
                        &[&claim.tenant, &claim.key],
                    )
                    .await
                    .map_err(self.storage())?;
                // Gone between the two statements (released): claim again.
                let Some(row) = row else { continue };
                let (sha, state): (String, String) = (row.get(0), row.get(1));
                if sha != claim.request_sha256 {
                    return Ok(KeyState::Mismatch);
                }
                if state == "running" {
                    return Ok(KeyState::Running);
                }
                let status: Option<i32> = row.get(2);
                let headers: Option<String> = row.get(3);
                let headers =
                    serde_json::from_str(headers.as_deref().unwrap_or("[]")).map_err(|e| {
                        RunLogError::Storage(format!(
                            "idempotency key {:?}: its headers: {e}",
                            claim.key
                        ))
                    })?;
                return Ok(KeyState::Answered(StoredAnswer {
                    status: status.map_or(500, |s| s as u16),
                    headers,
                    body: row.get::<_, Option<Vec<u8>>>(4).unwrap_or_default(),
                }));
            }
            Ok(KeyState::Running)
        })
    }

    fn answer_key<'a>(
        &'a self,
        tenant: &'a str,
        key: &'a str,
        answer: &'a StoredAnswer,
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        Box::pin(async move {
            let conn = self.conn().await?;
            let headers = serde_json::to_string(&answer.headers).expect("strings serialize");
            let sql = format!(
                "UPDATE callai_idempotency_keys SET state = 'done', status = $3, headers = $4,
                     body = $5, until_ms = {NOW_MS} + keep_ms
                 WHERE tenant = $1 AND key = $2"
            );
            conn.execute(
                &sql,
                &[
                    &tenant,
                    &key,
                    &i32::from(answer.status),
                    &headers,
                    &answer.body,
                ],
            )
            .await
            .map_err(self.storage())?;
            Ok(())
        })
    }

    fn release_key<'a>(
        &'a self,
        tenant: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), RunLogError>> {
        Box::pin(async move {
            let conn = self.conn().await?;
            conn.execute(
                "DELETE FROM callai_idempotency_keys
                 WHERE tenant = $1 AND key = $2 AND state = 'running'",
                &[&tenant, &key],
            )
            .await
            .map_err(self.storage())?;
            Ok(())
        })
    }
}
