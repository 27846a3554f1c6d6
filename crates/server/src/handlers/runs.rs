//! `POST /v1/runs`, `GET /v1/runs/{runId}` and its events: a run started
//! for its caller (answered when it ends, or `202` at once), and read back
//! in its caller's scope (the admin's, or a tenant's it names).

use super::tenant_query::{TenantParam, scope};
use crate::body::{ApiJson, RunBody};
use crate::call_headers::CallHeaders;
use crate::error::ApiError;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use callai_engine::RunKey;
use callai_gateway::Gateway;
use callai_gateway::runs::{self, Started};
use callai_gateway::tenants::Caller;
use std::sync::Arc;

/// `POST /v1/runs`.
pub async fn post_run(
    State(gateway): State<Arc<Gateway>>,
    Extension(caller): Extension<Caller>,
    sent: CallHeaders,
    ApiJson(body): ApiJson<RunBody>,
) -> Result<Response, ApiError> {
    let mut request = body.checked()?;
    request.trace_parent = sent.trace_parent;
    match runs::start(gateway, caller, request).await? {
        Started::Ended(answer) => Ok(axum::Json(answer).into_response()),
        Started::Accepted(accepted) => {
            Ok((StatusCode::ACCEPTED, axum::Json(accepted)).into_response())
        }
    }
}

/// `GET /v1/runs/{id}`: the caller's run of that id (the admin's, or a
/// tenant's with `?tenant=`); another tenant's is 404, as an id nobody holds.
pub async fn get_run(
    State(gateway): State<Arc<Gateway>>,
    Extension(caller): Extension<Caller>,
    Path(run_id): Path<String>,
    query: TenantParam,
) -> Result<Response, ApiError> {
    let scope = scope(&caller, query)?;
    let answer = gateway
        .run_status(RunKey::new(scope.tenant(), &run_id))
        .await?;
    Ok(axum::Json(answer).into_response())
}

/// `GET /v1/runs/{id}/events`, scoped as [`get_run`] is.
pub async fn get_events(
    State(gateway): State<Arc<Gateway>>,
    Extension(caller): Extension<Caller>,
    Path(run_id): Path<String>,
    query: TenantParam,
) -> Result<Response, ApiError> {
    let scope = scope(&caller, query)?;
    let answer = gateway
        .run_events(RunKey::new(scope.tenant(), &run_id))
        .await?;
    Ok(axum::Json(answer).into_response())
}
