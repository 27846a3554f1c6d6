//! The callers of `serve`: `[server] tokenEnv`'s (the admin, no budget) and
//! each `[tenants.NAME]`, known by its own bearer token, with the providers
//! it may reach and its limits (a budget, rate limits), of each of which
//! each host holds an allotment.
//! The HTTP edge resolves every request to its [`Caller`] before the
//! gateway sees it.

mod allotment;
mod budget;
mod caller;
mod key_callers;
pub mod keys;
mod limited;
mod plan;
mod registry;

pub use allotment::{Allotment, Holder};
pub(crate) use budget::limit_answer;
pub use budget::{TenantBudget, budget_answer};
pub use caller::{ADMIN, Caller, Tenant};
pub use limited::{Limited, RateLimit};
pub use plan::Plan;
pub use registry::{ServerTokens, Tenants};
