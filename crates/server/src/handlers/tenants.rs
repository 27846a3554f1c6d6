//! `GET /v1/budget` and `GET /v1/tenants`: a caller's budget in its
//! current window, as the run log keeps it; every tenant's, for the admin.

use crate::error::ApiError;
use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use callai_gateway::Gateway;
use callai_gateway::tenants::{Caller, budget_answer};
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;

/// `GET /v1/budget`.
pub async fn budget(
    State(gateway): State<Arc<Gateway>>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    let answer = budget_answer(gateway.runlog.as_ref(), &caller).await?;
    Ok(axum::Json(answer).into_response())
}

/// `GET /v1/tenants`' answer: `{"data": [...]}`.
#[derive(Serialize)]
struct TenantList {
    data: Vec<Value>,
}

/// `GET /v1/tenants`: every tenant's budget in its current window, for
/// the admin; a tenant's own, for a tenant.
pub async fn tenants(
    State(gateway): State<Arc<Gateway>>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    let log = gateway.runlog.as_ref();
    let mut data = Vec::new();
    if caller.is_admin() {
        for tenant in gateway.tenants.all() {
            data.push(budget_answer(log, &Caller(tenant.clone())).await?);
        }
    } else {
        data.push(budget_answer(log, &caller).await?);
    }
    Ok(axum::Json(TenantList { data }).into_response())
}
