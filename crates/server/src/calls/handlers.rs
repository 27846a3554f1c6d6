//! `GET /v1/calls` and `GET /v1/calls/{id}`. A tenant sees its own calls;
//! the admin sees every tenant's (`?tenant=NAME` to keep to one). Another
//! owner's call is `404`, exactly as an id nobody holds.

use super::{CallFilter, CallTrace, Found, Listed};
use crate::error::ApiError;
use crate::scope::Scope;
use crate::state::AppState;
use crate::tenants::Caller;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Extension, Path, Query, State};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::sync::Arc;

/// The most calls one page holds, and what `?limit` defaults to.
const MAX_PAGE: usize = 500;
const DEFAULT_PAGE: usize = 50;

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

/// The tenant whose calls `caller` reaches: its own; for the admin, the
/// tenant it names or (`None`) every one.
pub(super) fn owner(caller: &Caller, named: Option<&str>) -> Result<Option<String>, ApiError> {
    if caller.is_admin() && named.is_none() {
        return Ok(None);
    }
    Ok(Some(Scope::of(caller, named)?.tenant().to_owned()))
}

/// `GET /v1/calls/{id}`.
pub async fn get_call(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    query: Result<Query<OneQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::invalid("query", e.body_text()))?;
    let tenant = owner(&caller, query.tenant.as_deref())?;
    let found = state.calls.find(tenant.as_deref(), &id).await;
    match found.map_err(|e| ApiError::internal(e.to_string()))? {
        Some(Found::Kept(trace)) => Ok(axum::Json(&*trace).into_response()),
        Some(Found::Logged(json)) => Ok(axum::Json(logged(&id, &json)?).into_response()),
        None => Err(ApiError::not_found(format!("no call {id:?}"))),
    }
}

/// A trace read back from the run log, as the JSON it was written as; a
/// damaged one is an error that names it.
fn logged<'a>(id: &str, json: &'a str) -> Result<&'a RawValue, ApiError> {
    serde_json::from_str(json).map_err(|e| {
        ApiError::internal(format!(
            "run log: the trace of call {id:?} does not read back: {e}"
        ))
    })
}

/// `?since=`, an RFC 3339 time, in ms since the Unix epoch.
fn since_ms(text: &str) -> Result<u64, ApiError> {
    let at: jiff::Timestamp = text
        .parse()
        .map_err(|e| ApiError::invalid("since", format!("not an RFC 3339 time ({e}): {text:?}")))?;
    Ok(u64::try_from(at.as_millisecond()).unwrap_or(0))
}

/// A page of calls, newest first; `next` is the `?before=` of the next.
#[derive(Serialize)]
struct Page<'a, T> {
    data: Vec<T>,
    next: Option<&'a str>,
}

/// `GET /v1/calls`: `?limit` (1..500, 50), `?before=ID`, and the filters
/// `tenant`, `provider`, `model`, `endpoint`, `run`, `outcome`, `retried`,
/// `since`.
pub async fn list_calls(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::invalid("query", e.body_text()))?;
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::invalid(
            "limit",
            format!("must be 1..{MAX_PAGE}, got {limit}"),
        ));
    }
    let filter = CallFilter {
        tenant: owner(&caller, q.tenant.as_deref())?,
        provider: q.provider,
        model: q.model,
        endpoint: q.endpoint,
        run: q.run,
        outcome: q.outcome,
        retried: q.retried.unwrap_or(false),
        since_ms: q.since.as_deref().map(since_ms).transpose()?,
    };
    let listed = state.calls.page(&filter, q.before.as_deref(), limit).await;
    match listed.map_err(|e| ApiError::internal(e.to_string()))? {
        Listed::Kept(page, more) => {
            let body = Page {
                data: page.iter().map(|t| &**t).collect::<Vec<&CallTrace>>(),
                next: more.then(|| page.last().map(|t| &*t.id)).flatten(),
            };
            Ok(axum::Json(body).into_response())
        }
        Listed::Logged(page) => {
            let data = page
                .traces
                .iter()
                .map(|(id, json)| logged(id, json))
                .collect::<Result<Vec<_>, _>>()?;
            let body = Page {
                data,
                next: page
                    .more
                    .then(|| page.traces.last().map(|(id, _)| id.as_str()))
                    .flatten(),
            };
            Ok(axum::Json(body).into_response())
        }
    }
}
