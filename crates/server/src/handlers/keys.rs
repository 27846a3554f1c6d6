//! `/v1/keys`: API keys the admin makes, lists, reads, changes and revokes
//! while the host runs (kept in the run log; every host on it knows them
//! within a refresh), and each key's audit list. The admin's alone: a
//! tenant's token (or a key) is `403`.

use crate::body::ApiJson;
use crate::error::{ApiCode, ApiError};
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use callai_gateway::Gateway;
use callai_gateway::tenants::Caller;
use callai_gateway::tenants::keys::{KeyPatch, NewKey};
use std::sync::Arc;

fn admin_only(caller: &Caller) -> Result<(), ApiError> {
    match caller.is_admin() {
        true => Ok(()),
        false => Err(ApiError::new(
            ApiCode::Forbidden,
            "API keys are the admin's to manage: this takes [server] tokenEnv's token",
        )),
    }
}

/// `POST /v1/keys`: `201` with the key, its secret (`key`) shown once.
pub async fn create(
    State(gateway): State<Arc<Gateway>>,
    Extension(caller): Extension<Caller>,
    ApiJson(new): ApiJson<NewKey>,
) -> Result<Response, ApiError> {
    admin_only(&caller)?;
    let key = gateway.tenants.create_key(&caller, new).await?;
    Ok((StatusCode::CREATED, axum::Json(key)).into_response())
}

/// `GET /v1/keys`: every key, no secret.
pub async fn list(
    State(gateway): State<Arc<Gateway>>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    admin_only(&caller)?;
    Ok(axum::Json(gateway.tenants.list_keys().await?).into_response())
}

/// `GET /v1/keys/{id}`.
pub async fn get(
    State(gateway): State<Arc<Gateway>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    admin_only(&caller)?;
    Ok(axum::Json(gateway.tenants.key(&id).await?).into_response())
}

/// `PATCH /v1/keys/{id}`: its name, limits, allowed providers and models,
/// expiry, metadata.
pub async fn patch(
    State(gateway): State<Arc<Gateway>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    ApiJson(patch): ApiJson<KeyPatch>,
) -> Result<Response, ApiError> {
    admin_only(&caller)?;
    let key = gateway.tenants.patch_key(&caller, &id, patch).await?;
    Ok(axum::Json(key).into_response())
}

/// `DELETE /v1/keys/{id}`: revoked (`401` on every host within a refresh).
pub async fn revoke(
    State(gateway): State<Arc<Gateway>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    admin_only(&caller)?;
    Ok(axum::Json(gateway.tenants.revoke_key(&caller, &id).await?).into_response())
}

/// `GET /v1/keys/{id}/events`: who changed it, what and when.
pub async fn events(
    State(gateway): State<Arc<Gateway>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    admin_only(&caller)?;
    Ok(axum::Json(gateway.tenants.key_events(&id).await?).into_response())
}
