//! `?tenant=`: the tenant whose things the admin means, read and turned
//! into the scope of a request (a field that is not one refused naming it).

use crate::error::ApiError;
use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use callai_gateway::scope::Scope;
use callai_gateway::tenants::Caller;
use serde::Deserialize;

/// The `?tenant=` of a request.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantQuery {
    /// The tenant whose things the admin means.
    pub tenant: Option<String>,
}

/// `?tenant=`, refused naming the field when it is not one.
pub type TenantParam = Result<Query<TenantQuery>, QueryRejection>;

/// The scope of `caller`'s request with `query`.
pub fn scope(caller: &Caller, query: TenantParam) -> Result<Scope, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::invalid("tenant", e.body_text()))?;
    Ok(Scope::of(caller, query.tenant.as_deref())?)
}
