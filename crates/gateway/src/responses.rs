//! Responses kept because their caller asked (the Responses API's `store`):
//! written to the run log before the answer goes out, so that a
//! `previous_response_id` sent the moment after finds it; read and deleted
//! only by the tenant that made them (another tenant's id is unknown, as
//! runs are). Without a run log nothing is kept, and asking for a kept
//! response names the missing `[runlog] url`.

use crate::error::GatewayError;
use crate::state::Gateway;
use crate::tenants::Caller;
use callai_engine::runlog::{ResponseLog, StoredResponse};

impl Gateway {
    /// The run log's kept responses, or the refusal of `field` that names
    /// the missing `[runlog] url`.
    fn response_log(&self, field: &str) -> Result<&dyn ResponseLog, GatewayError> {
        let log = self.runlog.as_deref().and_then(|log| log.responses());
        log.ok_or_else(|| {
            GatewayError::invalid(
                field,
                "this host keeps no responses: it has no run log ([runlog] url)",
            )
        })
    }

    /// Whether responses asked to be kept are kept.
    pub fn keeps_responses(&self) -> bool {
        self.runlog
            .as_deref()
            .and_then(|log| log.responses())
            .is_some()
    }

    /// Keeps `response` for its tenant; nothing without a run log.
    pub async fn keep_response(&self, response: &StoredResponse) -> Result<(), GatewayError> {
        let Ok(log) = self.response_log("store") else {
            return Ok(());
        };
        log.put_response(response)
            .await
            .map_err(|e| GatewayError::internal(e.to_string()))
    }

    /// The response `id` kept for `caller`, `field` naming where the id
    /// came from (`previous_response_id`, the path's).
    pub async fn kept_response(
        &self,
        caller: &Caller,
        id: &str,
        field: &str,
    ) -> Result<StoredResponse, GatewayError> {
        let log = self.response_log(field)?;
        let found = (log.get_response(caller.name(), id).await)
            .map_err(|e| GatewayError::internal(e.to_string()))?;
        found.ok_or_else(|| {
            GatewayError::not_found(format!("no response {id:?} is kept on this host"))
        })
    }

    /// Deletes the response `id` kept for `caller`.
    pub async fn delete_response(&self, caller: &Caller, id: &str) -> Result<(), GatewayError> {
        let log = self.response_log("id")?;
        let deleted = (log.delete_response(caller.name(), id).await)
            .map_err(|e| GatewayError::internal(e.to_string()))?;
        match deleted {
            true => Ok(()),
            false => Err(GatewayError::not_found(format!(
                "no response {id:?} is kept on this host"
            ))),
        }
    }
}
