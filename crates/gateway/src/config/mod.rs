//! The sections of the config file that `callai serve` reads, declared
//! once, here, beside the domain that reads them; `callai-config` composes
//! them into the whole file (with the engine's, the providers' and the
//! telemetry's sections):
//!
//! | section | what it sets |
//! |---|---|
//! | `[server]` | the HTTP edge (listen, tokens, timeouts, bounds) and what the gateway keeps (runs, calls, queue) |
//! | `[runlog]` | where runs, traces, budgets and keys are kept, and for how long |
//! | `[cache]` | the compiled-component cache on disk (`callai run` reads it too) |
//! | `[tenants.NAME]` | the callers, their providers, budgets and limits |
//! | `[pricing]` | the price list |
//! | `[log]` | the line written for each request |
//!
//! Plain data and its checks: nothing here reads a file or a variable.

mod limits;
mod pricing;
mod response_cache;
mod server;
mod tenants;

pub use limits::{LimitConfig, validate_limits};
pub use pricing::{LogConfig, LogFormat, MAX_PER_MILLION, MAX_PRICE_FILE_BYTES, PricingConfig};
pub use response_cache::{ResponseCacheConfig, ResponseCacheMode};
pub use server::{CacheConfig, RunLogConfig, ServerConfig, is_env_name, parse_listen};
pub use tenants::{BudgetConfig, TenantConfig, TenantsConfig, is_tenant_name, validate_tenants};
