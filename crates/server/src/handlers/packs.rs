//! `GET /v1/packs`, `PUT` and `DELETE /v1/packs/{name}`: the packs a caller
//! may run, and uploads into its own namespace (the admin's: the shared
//! one, or a tenant's with `?tenant=`).

use super::tenant_query::{TenantParam, scope};
use crate::body;
use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use callai_gateway::packs::PackStore;
use callai_gateway::scope::Scope;
use callai_gateway::tenants::Caller;
use serde::Deserialize;
use std::sync::Arc;

/// `GET /v1/packs`: the packs the caller may run (its own and the shared
/// ones); the admin sees every namespace's, or one tenant's view with
/// `?tenant=`.
pub async fn list_packs(
    State(packs): State<Arc<PackStore>>,
    Extension(caller): Extension<Caller>,
    query: TenantParam,
) -> Result<Response, ApiError> {
    let named = query.as_ref().is_ok_and(|q| q.tenant.is_some());
    let scope = scope(&caller, query)?;
    let view = (!caller.is_admin() || named).then_some(scope.tenant());
    Ok(axum::Json(packs.list(view)).into_response())
}

/// `PUT /v1/packs/{name}`'s query.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PutQuery {
    node_id: Option<String>,
    tenant: Option<String>,
}

/// `PUT /v1/packs/{name}`: an upload into the caller's namespace (the
/// admin's: the shared one, or a tenant's with `?tenant=`).
pub async fn put_pack(
    State(packs): State<Arc<PackStore>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    query: Result<Query<PutQuery>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| {
        let field = if e.body_text().contains("tenant") {
            "tenant"
        } else {
            "nodeId"
        };
        ApiError::invalid(field, e.body_text())
    })?;
    let scope = Scope::of(&caller, query.tenant.as_deref())?;
    let bytes = body::bytes(body, "server.maxPackBytes")?;
    if bytes.is_empty() {
        return Err(ApiError::invalid(
            "body",
            "empty: send the component's bytes",
        ));
    }
    let info = packs
        .upload(scope.tenant(), &name, query.node_id, bytes.to_vec())
        .await?;
    Ok((StatusCode::CREATED, axum::Json(info)).into_response())
}

/// `DELETE /v1/packs/{name}`: the caller's own upload (the admin's: a
/// shared upload, or a tenant's with `?tenant=`).
pub async fn delete_pack(
    State(packs): State<Arc<PackStore>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    query: TenantParam,
) -> Result<Response, ApiError> {
    let scope = scope(&caller, query)?;
    let gone = packs.delete(scope.tenant(), &name)?;
    Ok(axum::Json(gone).into_response())
}
