//! `GET /v1/calls`, `GET /v1/calls/{id}` and `GET /v1/usage`: the traces
//! of recent calls and their sums per minute. A tenant sees its own calls;
//! the admin sees every tenant's (`?tenant=NAME` to keep to one). Another
//! owner's call is `404`, exactly as an id nobody holds.

use crate::error::ApiError;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Extension, Path, Query, State};
use axum::response::{IntoResponse, Response};
use callai_gateway::scope::owner;
use callai_gateway::tenants::Caller;
use callai_gateway::traces::{self, CallStore, PageQuery};
use serde::Deserialize;
use std::sync::Arc;

/// `GET /v1/calls`'s query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    tenant: Option<String>,
    provider: Option<String>,
    model: Option<String>,
    endpoint: Option<String>,
    run: Option<String>,
    outcome: Option<String>,
    /// `true`: only calls of more than one attempt.
    retried: Option<bool>,
    since: Option<String>,
    before: Option<String>,
    limit: Option<usize>,
}

/// `GET /v1/calls/{id}`'s query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OneQuery {
    tenant: Option<String>,
}

/// `GET /v1/usage`'s query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageQuery {
    /// How many minutes back, to now (1..1440; 60).
    minutes: Option<u64>,
    /// For the admin: one tenant's calls only.
    tenant: Option<String>,
}

/// A query that did not read, refused naming `query`.
fn query<T>(query: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::invalid("query", e.body_text()))?;
    Ok(query)
}

/// `GET /v1/calls/{id}`.
pub async fn get_call(
    State(calls): State<Arc<CallStore>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    q: Result<Query<OneQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    let tenant = owner(&caller, q.tenant.as_deref())?;
    let trace = calls.find_call(tenant.as_deref(), &id).await?;
    Ok(axum::Json(trace).into_response())
}

/// `GET /v1/calls`: `?limit` (1..500, 50), `?before=ID`, and the filters
/// `tenant`, `provider`, `model`, `endpoint`, `run`, `outcome`, `retried`,
/// `since`.
pub async fn list_calls(
    State(calls): State<Arc<CallStore>>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    let tenant = owner(&caller, q.tenant.as_deref())?;
    let page = PageQuery {
        provider: q.provider,
        model: q.model,
        endpoint: q.endpoint,
        run: q.run,
        outcome: q.outcome,
        retried: q.retried.unwrap_or(false),
        since: q.since,
        before: q.before,
        limit: q.limit,
    };
    let page = calls.page_of(tenant, page).await?;
    Ok(axum::Json(page).into_response())
}

/// `GET /v1/usage`: `?minutes` (1..1440, 60) back from now, `?tenant=` for
/// the admin.
pub async fn usage(
    State(calls): State<Arc<CallStore>>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<UsageQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    let tenant = owner(&caller, q.tenant.as_deref())?;
    let usage = traces::summary(&calls, tenant.as_deref(), q.minutes).await?;
    Ok(axum::Json(usage).into_response())
}
