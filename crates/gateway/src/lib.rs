//! The domain of `callai serve`, with no HTTP in it: what a gateway in
//! front of the model providers does, whichever API a request came in by.
//!
//! - [`Gateway`] holds what every endpoint shares: the host (the engine,
//!   its providers and policy), the packs, the runs and call traces this
//!   host keeps, the callers and their budgets, the gate in front of runs
//!   and calls, the metrics, the run log.
//! - [`call`] is the one path every call takes (`/v1/call` and each
//!   drop-in API): a [`CallPlan`] (its route resolved once, its script
//!   checked once), run by [`Gateway::call`] to a settled outcome and what
//!   it charged.
//! - [`runs`] starts pack runs and carries them to their end, durable ones
//!   across hosts; [`traces`] keeps each call's trace and sums usage, a
//!   failed call's [`outcome`] named as the metrics and the log say it;
//!   [`tenants`] resolves callers and holds this host's allotment of each
//!   budget; [`quotas`] holds the providers' quotas on the same ledger;
//!   [`packs`] compiles and keeps components.
//!
//! Every refusal and failure is a [`GatewayError`], which names what was
//! wrong and carries no status code: the HTTP edge (`callai-server`) gives
//! each its API's shape. Nothing here depends on axum, hyper, http or
//! tower (a test checks the dependency tree).
//!
//! ```no_run
//! # async fn demo(parts: callai_gateway::Parts, caller: callai_gateway::tenants::Caller,
//! #               request: callai_engine::wire::ParsedRequest) -> Result<(), callai_gateway::GatewayError> {
//! use callai_gateway::call::{CallPlan, Planned, Route};
//! use callai_gateway::Gateway;
//!
//! let gateway = Gateway::new(parts);
//! let route = Route::of_request(&gateway.host, request.request());
//! let plan = CallPlan::new(&caller, Planned {
//!     id: callai_gateway::ids::fresh_id("call_"),
//!     endpoint: "call",
//!     request,
//!     route,
//!     script: None,
//!     node_id: None,
//!     events: false,
//!     trace_parent: None,
//! })?;
//! let settled = gateway.call(&caller, plan, None).await?;
//! println!("{:?}", settled.outcome.map(|r| r.attempts));
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

pub mod admission;
pub mod call;
pub mod config;
pub mod discovery;
mod error;
pub mod ids;
pub mod keys;
pub mod metrics;
pub mod outcome;
pub mod packs;
pub mod quotas;
pub mod responses;
pub mod runs;
pub mod scope;
pub mod spans;
mod state;
pub mod tenants;
pub mod traces;

pub use call::CallPlan;
pub use error::GatewayError;
pub use state::{Gateway, Parts};
