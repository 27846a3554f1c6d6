//! A drop-in call run through the engine: its result with the caller's
//! budget headers and the `x-callai-*` headers of its attempts, or its
//! failure.

use crate::body::CallBody;
use crate::call::{self, Settled};

use crate::calls::Cost;
use crate::error::ApiError;
use crate::state::AppState;
use crate::tenants::Caller;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use callai_engine::DeltaSink;
use callai_engine::wire::CallResult;

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

/// A call's result, the headers of the caller's budget and of what it
/// cost, and that cost.
pub type Answered = (CallResult, HeaderMap, Option<Cost>);

/// Runs a prepared call through the engine, its text streamed to `deltas`
/// when given; the result with the caller's budget and cost headers.
pub async fn run(
    state: &AppState,
    caller: &Caller,
    call: CallBody,
    deltas: Option<DeltaSink>,
) -> Result<Answered, CallFailure> {
    let settled: Settled = call::settle(state, caller, call, deltas).await?;
    let mut headers = settled.budget_headers();
    call::add_cost(&mut headers, settled.cost.as_ref());
    match settled.outcome {
        Ok(result) => Ok((result, headers, settled.cost)),
        Err(e) => Err(CallFailure {
            error: ApiError::from_call(&e),
            headers,
        }),
    }
}
