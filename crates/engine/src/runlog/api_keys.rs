//! API keys an operator makes while the host runs (`POST /v1/keys`), kept
//! in the run log's database so that every host on it knows them: each
//! key's record (its secret only as a keyed hash), an audit list of every
//! change, and a generation that every change moves on, which hosts watch
//! to know when to read the keys again.

use super::RunLogError;
use crate::provider::BoxFuture;

/// One API key as the run log keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// Its id (`key-…`), which names it in the API; never a secret.
    pub id: String,
    /// The tenant its calls and runs belong to.
    pub tenant: String,
    /// A name for people.
    pub name: String,
    /// The HMAC-SHA256 (hex) of its secret under the database's pepper
    /// ([`ApiKeyLog::api_key_state`]): the secret itself is never kept.
    pub hash: String,
    /// The secret's first characters (`ck-AbCd`), to tell keys apart.
    pub hint: String,
    /// Its limits, allowed providers and models, and metadata: a JSON
    /// object, as the gateway writes it.
    pub settings: String,
    /// When it stops working (ms since the Unix epoch); none: never.
    pub expires_ms: Option<u64>,
    /// When it was made.
    pub created_ms: u64,
    /// When it was revoked; none: it was not.
    pub revoked_ms: Option<u64>,
    /// When a call last used it, as the hosts last wrote it.
    pub last_used_ms: Option<u64>,
}

/// One change to a key, for its audit list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyEvent {
    /// The key.
    pub key_id: String,
    /// When (ms since the Unix epoch).
    pub at_ms: u64,
    /// Who: the caller that made the change.
    pub actor: String,
    /// What: `created`, `updated`, `revoked`.
    pub action: String,
    /// The change, as a JSON object (never a secret).
    pub detail: String,
}

/// Where API keys live.
pub trait ApiKeyLog: Send + Sync {
    /// The keys' generation (moved on by every [`ApiKeyLog::put_api_key`])
    /// and the database's pepper, made from `fresh_pepper` the first time
    /// it is asked for.
    fn api_key_state<'a>(
        &'a self,
        fresh_pepper: &'a [u8; 32],
    ) -> BoxFuture<'a, Result<(u64, Vec<u8>), RunLogError>>;

    /// Keeps `key` (replacing the one of its id, but for when it was last
    /// used, which only [`ApiKeyLog::touch_api_keys`] writes), appends
    /// `event` to its audit list and moves the generation on, in one
    /// transaction. A key whose hash another key has is refused.
    fn put_api_key<'a>(
        &'a self,
        key: &'a ApiKey,
        event: &'a ApiKeyEvent,
    ) -> BoxFuture<'a, Result<(), RunLogError>>;

    /// Every key, revoked ones too, the oldest first.
    fn api_keys(&self) -> BoxFuture<'_, Result<Vec<ApiKey>, RunLogError>>;

    /// The audit list of key `id`, the oldest first.
    fn api_key_events<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<ApiKeyEvent>, RunLogError>>;

    /// Records when keys were last used (id, ms), without moving the
    /// generation on.
    fn touch_api_keys<'a>(
        &'a self,
        used: &'a [(String, u64)],
    ) -> BoxFuture<'a, Result<(), RunLogError>>;
}
