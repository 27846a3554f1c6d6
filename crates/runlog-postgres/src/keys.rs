//! Idempotency keys on PostgreSQL: a claim is one statement that takes a
//! key no request holds (or whose holder's claim lapsed); a repeat reads
//! the key's state: its answer, another request's, or still running.

use crate::PostgresRunLog;
use crate::ledger::{NOW_MS, TRIES};
use callai_engine::budget::{KeyClaim, KeyState, StoredAnswer};
use callai_engine::runlog::RunLogError;

impl PostgresRunLog {
    /// Claims an idempotency key, or says whose it is.
    pub(crate) async fn claim_idempotency_key(
        &self,
        claim: &KeyClaim<'_>,
    ) -> Result<KeyState, RunLogError> {
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
    }

    /// Keeps a claimed key's answer, for its repeats.
    pub(crate) async fn answer_idempotency_key(
        &self,
        tenant: &str,
        key: &str,
        answer: &StoredAnswer,
    ) -> Result<(), RunLogError> {
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
    }

    /// Releases a claim whose request ended without an answer.
    pub(crate) async fn release_idempotency_key(
        &self,
        tenant: &str,
        key: &str,
    ) -> Result<(), RunLogError> {
        let conn = self.conn().await?;
        conn.execute(
            "DELETE FROM callai_idempotency_keys
             WHERE tenant = $1 AND key = $2 AND state = 'running'",
            &[&tenant, &key],
        )
        .await
        .map_err(self.storage())?;
        Ok(())
    }
}
