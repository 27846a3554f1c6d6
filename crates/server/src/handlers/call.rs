//! `POST /v1/call`: ctx.callAI as a service, for hosts whose nodes are not
//! wasm. The call goes through the gateway's one call path, so it meets
//! the same engine, limits, events, metrics and traces as a pack's call.

use crate::body::{ApiJson, CallBodyJson};
use crate::cache_mark::{CacheMiss, cache_word};
use crate::call_headers::CallHeaders;
use crate::error::ApiError;
use crate::headers;
use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use callai_engine::cost::Cost;
use callai_engine::events::Event;
use callai_engine::wire::CallResult;
use callai_gateway::Gateway;
use callai_gateway::call::{CallPlan, Settled};
use callai_gateway::tenants::Caller;
use futures_util::future::{self, Either};
use serde::Serialize;
use std::sync::Arc;

/// `POST /v1/call`'s answer: `{"result", "events"?, "cost"?}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct CallAnswer {
    /// The wire result, `attempts` included.
    result: CallResult,
    /// The call's events, when the caller asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    events: Option<Vec<Event>>,
    /// What it cost, when a price is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    cost: Option<Cost>,
}

/// `POST /v1/call`.
///
/// Not an `async fn`: the call is planned before its future is made, so
/// that future keeps beside the gateway's only what it captured (the plan,
/// which an async block cannot give up), not also the body, the headers and
/// the plan's draft. An `async fn` keeps its arguments, and locals held
/// across an `.await`, for as long as it runs (rust-lang/rust#62958), and
/// this one runs as long as the provider takes: 9,152 -> 7,880 bytes a call
/// in flight, by `-Zprint-type-sizes`.
pub fn post_call(
    State(gateway): State<Arc<Gateway>>,
    Extension(caller): Extension<Caller>,
    miss: Option<Extension<CacheMiss>>,
    sent: CallHeaders,
    ApiJson(body): ApiJson<CallBodyJson>,
) -> impl Future<Output = Result<Response, ApiError>> + Send {
    let planned = body.planned(&caller.0.host).map(|mut planned| {
        planned.trace_parent = sent.trace_parent;
        let id = planned.id.clone();
        let plan = CallPlan::new(&caller, planned).map(|mut plan| {
            plan.cache = cache_word(miss);
            plan
        });
        (id, plan)
    });
    async move {
        let (id, plan) = planned?;
        // The plan goes whole into the call's future before it is awaited:
        // awaited in a `match` arm, the plan's binding was kept beside it.
        let call = plan.map_or_else(
            |e| Either::Left(future::ready(Err(e))),
            |plan| Either::Right(gateway.call(&caller, plan, None)),
        );
        let settled = match call.await {
            Ok(settled) => settled,
            Err(e) => {
                let mut response = ApiError::from(e).into_response();
                headers::call_id(response.headers_mut(), &id);
                return Ok(response);
            }
        };
        Ok(answer(settled, &id))
    }
}

/// The answer of a call that ran to its end: its result, or its error, and
/// the `x-callai-*` headers of both.
fn answer(settled: Settled, id: &str) -> Response {
    let attempts = settled.outcome.as_ref().ok().and_then(|r| r.attempts);
    let Settled {
        outcome,
        events,
        charged,
    } = settled;
    let (mut response, error) = match outcome {
        Ok(result) => {
            let answer = CallAnswer {
                result,
                events,
                cost: charged.cost.clone(),
            };
            (axum::Json(answer).into_response(), None)
        }
        Err(error) => {
            let e = ApiError::from_call(&error);
            let body = axum::Json(e.body(events));
            ((e.status(), body).into_response(), Some(e))
        }
    };
    // Into the answer's own header map: no map of their own merged in.
    let map = response.headers_mut();
    if let Some(attempts) = &attempts {
        headers::attempts(map, attempts);
    }
    headers::charged(map, &charged);
    headers::call_id(map, id);
    if let Some(e) = error {
        e.add_headers(response.headers_mut());
        // For the log line, which says the error's code.
        response.extensions_mut().insert(e);
    }
    response
}
