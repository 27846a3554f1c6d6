//! What the routes share: the gateway, and the `[server]` section the edge
//! reads (body limits, timeouts). A handler takes only the slice it needs
//! (axum's `FromRef` substates): the gateway for a call or a run, the pack
//! store for the packs, the trace store for the calls and their usage.

use axum::extract::FromRef;
use callai_gateway::Gateway;
use callai_gateway::config::ServerConfig;
use callai_gateway::packs::PackStore;
use callai_gateway::traces::CallStore;
use std::sync::Arc;

/// The routes' state.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The gateway.
    pub gateway: Arc<Gateway>,
    /// `[server]`
    pub server: Arc<ServerConfig>,
}

impl FromRef<AppState> for Arc<Gateway> {
    fn from_ref(state: &AppState) -> Self {
        state.gateway.clone()
    }
}

impl FromRef<AppState> for Arc<PackStore> {
    fn from_ref(state: &AppState) -> Self {
        state.gateway.packs.clone()
    }
}

impl FromRef<AppState> for Arc<CallStore> {
    fn from_ref(state: &AppState) -> Self {
        state.gateway.calls.clone()
    }
}
