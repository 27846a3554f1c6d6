//! Responses kept in the run log because their caller asked (`store` on the
//! Responses API): each under its tenant and id, with the conversation it
//! ended (for `previous_response_id` to go on from), the input items as the
//! caller sent them, and the response as it was answered. Pruned with the
//! rest of the log (`[runlog] keepDays`).

use super::RunLogError;
use crate::provider::BoxFuture;

/// One kept response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// The response's id (the call's).
    pub id: String,
    /// The tenant that made it; only it reads or deletes it.
    pub tenant: String,
    /// When it was kept, in ms since the Unix epoch.
    pub created_ms: u64,
    /// The conversation up to and with the response's output, as JSON (the
    /// engine's messages).
    pub conversation: String,
    /// The request's input items, as JSON, as the caller sent them.
    pub input_items: String,
    /// The response, as JSON, as it was answered.
    pub response: String,
}

/// Where kept responses live.
pub trait ResponseLog: Send + Sync {
    /// Keeps `response` (replacing one of the same tenant and id).
    fn put_response<'a>(
        &'a self,
        response: &'a StoredResponse,
    ) -> BoxFuture<'a, Result<(), RunLogError>>;

    /// The response `id` of `tenant`, if it is kept.
    fn get_response<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<StoredResponse>, RunLogError>>;

    /// Deletes the response `id` of `tenant`; whether there was one.
    fn delete_response<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<bool, RunLogError>>;
}
