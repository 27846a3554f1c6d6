//! A drop-in call run through the engine: its result with what it charged
//! (the caller's budget, its cost), or its failure.

use crate::error::ApiError;
use crate::headers;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use callai_engine::DeltaSink;
use callai_engine::wire::CallResult;
use callai_gateway::Gateway;
use callai_gateway::call::{CallPlan, Charged, Settled};
use callai_gateway::tenants::Caller;
use futures_util::FutureExt;

/// A call that did not answer: the error, with the caller's budget
/// headers when it has a budget.
#[derive(Debug)]
pub struct CallFailure {
    /// The host's error (the drop-in's layer gives it the API's shape).
    pub error: ApiError,
    /// The `x-callai-budget-remaining-*` headers.
    pub headers: HeaderMap,
}

impl From<ApiError> for CallFailure {
    fn from(error: ApiError) -> Self {
        Self {
            error,
            headers: HeaderMap::new(),
        }
    }
}

impl IntoResponse for CallFailure {
    fn into_response(self) -> Response {
        (self.headers, self.error).into_response()
    }
}

/// A call's result, and what it charged.
pub type Answered = (CallResult, Charged);

/// Runs a planned call through the gateway, its text streamed to `deltas`
/// when given; the result with what it charged, or the failure with its
/// budget and cost headers.
///
/// Not an `async fn`: the plan goes into the gateway's future at once, and
/// what is left is a plain map of its outcome. An `async fn` keeps its
/// arguments for as long as it runs beside the future they were moved into
/// (rust-lang/rust#62958): a second plan for every call in flight.
// The closure returns what the `async fn` returned (clippy does not look at
// an `async fn`'s result, and counts a closure's): `CallFailure` is not boxed,
// a call's failure allocates no more than it did.
#[allow(clippy::result_large_err)]
pub fn run<'a>(
    gateway: &'a Gateway,
    caller: &'a Caller,
    plan: CallPlan,
    deltas: Option<DeltaSink>,
) -> impl Future<Output = Result<Answered, CallFailure>> + Send + 'a {
    gateway.call(caller, plan, deltas).map(|settled| {
        let Settled {
            outcome, charged, ..
        } = settled.map_err(ApiError::from)?;
        match outcome {
            Ok(result) => Ok((result, charged)),
            Err(e) => {
                let mut map = HeaderMap::new();
                headers::charged(&mut map, &charged);
                Err(CallFailure {
                    error: ApiError::from_call(&e),
                    headers: map,
                })
            }
        }
    })
}
