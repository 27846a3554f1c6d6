//! One caller of `serve` and what it is allowed: its name, the host its
//! calls go through (its `allowedProviders` narrowing the policy), and its
//! budget with this host's allotment of it.

use super::allotment::Allotment;
use super::plan::Plan;
use callai_engine::Host;
use std::sync::{Arc, OnceLock};

/// The name `[server] tokenEnv`'s caller goes by (and the owner of what
/// it makes, as of everything a server without tokens makes).
pub use callai_engine::runlog::ADMIN;

/// One caller of the server.
#[derive(Debug)]
pub struct Tenant {
    /// `[tenants.NAME]`'s name, or [`ADMIN`].
    pub name: String,
    /// The host its calls go through: the server's, with its
    /// `allowedProviders` narrowing the policy.
    pub host: Host,
    /// Its budget; `None`: unlimited.
    pub plan: Option<Plan>,
    /// This host's allotment of its budget, once the server has a run log
    /// to keep it in (a tenant with a plan only).
    pub allotment: OnceLock<Arc<Allotment>>,
}

/// Who sent a request: put on every request the token check lets through.
#[derive(Debug, Clone)]
pub struct Caller(pub Arc<Tenant>);

impl Caller {
    /// The caller's name: the owner of what it makes.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// Whether it is the admin, who sees and manages everything.
    pub fn is_admin(&self) -> bool {
        self.0.name == ADMIN
    }
}
