//! One caller of `serve` and what it is allowed: its name, the host its
//! calls go through (its `allowedProviders` narrowing the policy), and its
//! limits with this host's allotment of each.

use super::limited::Limited;
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
    /// Its limits (its budget first, when it has one); none: unlimited.
    pub plans: Vec<Plan>,
    /// This host's allotment of each, once the server has a run log to
    /// keep them in (a tenant with limits only).
    pub limited: OnceLock<Arc<Limited>>,
    /// The models its calls may name (an API key's `allowedModels`);
    /// none: any.
    pub allowed_models: Option<Vec<String>>,
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
