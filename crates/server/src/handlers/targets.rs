//! `GET /v1/targets`: each provider target's health as its circuit
//! breaker sees it (the viewer's providers page): its state, its
//! unavailable answers in a row, its requests and failures, and the last
//! failure's message. A tenant sees the targets of the providers it may
//! reach; the admin every one.

use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use callai_engine::breaker::{BreakerState, TargetHealth};
use callai_gateway::Gateway;
use callai_gateway::tenants::Caller;
use serde::Serialize;
use std::sync::Arc;

/// `GET /v1/targets`' answer: `{"data": [...]}`.
#[derive(Serialize)]
struct TargetList {
    data: Vec<Target>,
}

/// One target, as the answer says it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Target {
    provider: String,
    model: String,
    /// `closed`, `open` or `half_open`.
    state: &'static str,
    /// For an open target: how long until one call tries it first again.
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_in_ms: Option<u64>,
    consecutive_failures: u32,
    requests: u64,
    unavailable: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<String>,
}

impl From<TargetHealth> for Target {
    fn from(t: TargetHealth) -> Self {
        let retry_in_ms = match t.state {
            BreakerState::Open { retry_in } => {
                Some(u64::try_from(retry_in.as_millis()).unwrap_or(u64::MAX))
            }
            _ => None,
        };
        Self {
            provider: t.provider,
            model: t.model,
            state: t.state.as_str(),
            retry_in_ms,
            consecutive_failures: t.consecutive_failures,
            requests: t.requests,
            unavailable: t.unavailable,
            last_error: t.last_error,
        }
    }
}

/// `GET /v1/targets`.
pub async fn targets(
    State(gateway): State<Arc<Gateway>>,
    Extension(caller): Extension<Caller>,
) -> Response {
    let reachable = caller.0.host.allowed_providers();
    let data = gateway
        .host
        .target_health()
        .into_iter()
        .filter(|t| caller.is_admin() || reachable.contains(&t.provider.as_str()))
        .map(Target::from)
        .collect();
    axum::Json(TargetList { data }).into_response()
}
