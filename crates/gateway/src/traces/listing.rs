//! Reading traces back: one call by id (`GET /v1/calls/{id}`), and a page
//! of calls by filter, newest first (`GET /v1/calls`), from memory or the
//! run log. A trace read back from the run log is answered as the JSON it
//! was written as; one that does not read back is named, not hidden.

use super::record::CallTrace;
use super::store::{CallFilter, CallStore, Found, Listed};
use crate::error::GatewayError;
use serde::Serialize;
use serde_json::value::RawValue;
use std::sync::Arc;

/// The most calls one page holds, and what a page holds when its caller
/// names no limit.
const MAX_PAGE: usize = 500;
const DEFAULT_PAGE: usize = 50;

/// A call's trace as it is answered.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum TraceJson {
    /// Kept in memory.
    Kept(Arc<CallTrace>),
    /// Read back from the run log, as it was written.
    Logged(Box<RawValue>),
}

/// A page of calls, newest first; `next` is the `?before=` of the next.
#[derive(Debug, Serialize)]
pub struct CallPage {
    data: Vec<TraceJson>,
    next: Option<String>,
}

/// What a page of calls asks for, beside its owner.
#[derive(Debug, Default, Clone)]
pub struct PageQuery {
    /// Calls with a request to this provider.
    pub provider: Option<String>,
    /// Calls with a request for this model, or routing this model name.
    pub model: Option<String>,
    /// `call`, `chat_completions`, `messages`, `responses` or `run`.
    pub endpoint: Option<String>,
    /// The calls of this pack run.
    pub run: Option<String>,
    /// `ok`, or an error code.
    pub outcome: Option<String>,
    /// Only calls of more than one attempt.
    pub retried: bool,
    /// Only calls started at or after this RFC 3339 time.
    pub since: Option<String>,
    /// Only calls older than this one.
    pub before: Option<String>,
    /// How many (1..500; 50).
    pub limit: Option<usize>,
}

/// A trace read back from the run log, as the JSON it was written as; a
/// damaged one is an error that names it.
fn logged(id: &str, json: String) -> Result<Box<RawValue>, GatewayError> {
    RawValue::from_string(json).map_err(|e| {
        GatewayError::internal(format!(
            "run log: the trace of call {id:?} does not read back: {e}"
        ))
    })
}

/// `text`, an RFC 3339 time, in ms since the Unix epoch.
fn since_ms(text: &str) -> Result<u64, GatewayError> {
    let at: jiff::Timestamp = text.parse().map_err(|e| {
        GatewayError::invalid("since", format!("not an RFC 3339 time ({e}): {text:?}"))
    })?;
    Ok(u64::try_from(at.as_millisecond()).unwrap_or(0))
}

impl CallStore {
    /// Call `id`, when `owner` may see it (`None`: the admin, any): from
    /// memory, else from the run log. Another owner's call is not found,
    /// exactly as an id nobody holds.
    pub async fn find_call(
        &self,
        owner: Option<&str>,
        id: &str,
    ) -> Result<TraceJson, GatewayError> {
        let found = self.find(owner, id).await;
        match found.map_err(|e| GatewayError::internal(e.to_string()))? {
            Some(Found::Kept(trace)) => Ok(TraceJson::Kept(trace)),
            Some(Found::Logged(json)) => Ok(TraceJson::Logged(logged(id, json)?)),
            None => Err(GatewayError::not_found(format!("no call {id:?}"))),
        }
    }

    /// A page of `owner`'s calls (`None`: every tenant's) that `query`
    /// admits.
    pub async fn page_of(
        &self,
        owner: Option<String>,
        query: PageQuery,
    ) -> Result<CallPage, GatewayError> {
        let limit = query.limit.unwrap_or(DEFAULT_PAGE);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(GatewayError::invalid(
                "limit",
                format!("must be 1..{MAX_PAGE}, got {limit}"),
            ));
        }
        let filter = CallFilter {
            tenant: owner,
            provider: query.provider,
            model: query.model,
            endpoint: query.endpoint,
            run: query.run,
            outcome: query.outcome,
            retried: query.retried,
            since_ms: query.since.as_deref().map(since_ms).transpose()?,
        };
        let listed = self.page(&filter, query.before.as_deref(), limit).await;
        match listed.map_err(|e| GatewayError::internal(e.to_string()))? {
            Listed::Kept(page, more) => {
                let next = more
                    .then(|| page.last().map(|t| t.id.to_string()))
                    .flatten();
                let data = page.into_iter().map(TraceJson::Kept).collect();
                Ok(CallPage { data, next })
            }
            Listed::Logged(page) => {
                let next = page
                    .more
                    .then(|| page.traces.last().map(|(id, _)| id.clone()))
                    .flatten();
                let data = page
                    .traces
                    .into_iter()
                    .map(|(id, json)| logged(&id, json).map(TraceJson::Logged))
                    .collect::<Result<_, _>>()?;
                Ok(CallPage { data, next })
            }
        }
    }
}
