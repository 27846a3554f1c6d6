//! The one path a call takes, whichever endpoint it came in by: planned
//! ([`CallPlan`]: its route resolved once, its script checked once), then
//! run by [`Gateway::call`](crate::state::Gateway::call) to a [`Settled`]
//! outcome with what it [`Charged`].

mod plan;
mod route;
mod settle;

pub use plan::{CallPlan, Planned};
pub use route::Route;
pub use settle::{Charged, DEFAULT_NODE_ID, Settled};
