//! `[tenants.NAME]`: the callers of `serve`, each known by its own bearer
//! token, with the providers it may reach and its budget per window.
//!
//! ```toml
//! [tenants.bookai]
//! tokenEnv = "BOOKAI_TOKEN"
//! allowedProviders = ["openai"]    # narrows [policy]; unset: the host's
//! defaultMaxTokens = 1000          # for its calls that name none; unset: [retry]'s
//! [tenants.bookai.budget]          # every key optional; unset: unlimited
//! requests = 10000
//! outputTokens = 2000000
//! inputTokens = 5000000
//! cost = 5.00                      # money, in `currency` (USD unless set)
//! window = "1d"                    # "1m" | "1h" | "1d" | "30d" | "none"
//! [[tenants.bookai.limits]]         # more limits, each per its own window
//! requests = 600
//! per = "1m"
//! ```

use super::limits::{LimitConfig, limits_of, validate_limits};
use callai_engine::budget::{Limits, Window};
use callai_engine::config::{ConfigError, invalid};
use callai_engine::cost::currency_code_problem;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Every `[tenants.NAME]` section, by name.
pub type TenantsConfig = BTreeMap<String, TenantConfig>;

/// One `[tenants.NAME]` section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct TenantConfig {
    /// The variable holding the tenant's bearer token.
    pub token_env: String,
    /// The providers its calls may reach, within `[policy]`; unset: the
    /// host's.
    pub allowed_providers: Option<Vec<String>>,
    /// The `maxTokens` of its calls that name none (clients that send no
    /// `max_tokens`), in place of `[retry] defaultMaxTokens`: a smaller one
    /// lets such a call's worst case fit a budget in money. Signed, so a
    /// negative one is refused naming its key.
    pub default_max_tokens: Option<i64>,
    /// `[tenants.NAME.budget]`
    pub budget: BudgetConfig,
    /// `[[tenants.NAME.limits]]`: more limits, each over its own window.
    pub limits: Vec<LimitConfig>,
}

/// `[tenants.NAME.budget]`: limits per window, each unset for unlimited.
/// Signed, so that a negative one is refused naming its key rather than
/// failing to parse.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct BudgetConfig {
    /// Provider requests (attempts) per window.
    pub requests: Option<i64>,
    /// Output tokens per window.
    pub output_tokens: Option<i64>,
    /// Input tokens per window.
    pub input_tokens: Option<i64>,
    /// Money per window, in `currency`: every provider model a call may
    /// reach needs a price in it.
    pub cost: Option<f64>,
    /// The currency of `cost` (`USD`).
    pub currency: String,
    /// `"1m"`, `"1h"`, `"1d"` (the default), `"30d"` or `"none"` (a
    /// lifetime budget).
    pub window: String,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            requests: None,
            output_tokens: None,
            input_tokens: None,
            cost: None,
            currency: "USD".into(),
            window: "1d".into(),
        }
    }
}

impl BudgetConfig {
    /// The limits, checked.
    pub fn limits(&self) -> Limits {
        limits_of(
            self.requests,
            self.output_tokens,
            self.input_tokens,
            self.cost,
        )
    }

    /// The window, checked.
    pub fn window(&self) -> Window {
        Window::parse(&self.window).unwrap_or_default()
    }

    /// Whether any limit is set.
    pub fn is_limited(&self) -> bool {
        self.limits() != Limits::default()
    }
}

/// Whether `name` can be a tenant's name: it is a metrics label and part of
/// every key the ledger keeps.
pub fn is_tenant_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

/// Checks every `[tenants.NAME]`, naming the key that is wrong; a
/// `defaultMaxTokens` is at most `provider_max_tokens` (`[retry]
/// providerMaxTokens`).
pub fn validate_tenants(
    tenants: &TenantsConfig,
    provider_max_tokens: u32,
) -> Result<(), ConfigError> {
    for (name, tenant) in tenants {
        let key = |k: &str| format!("tenants.{name}.{k}");
        if let Some(n) = tenant
            .default_max_tokens
            .filter(|n| !(1..=i64::from(provider_max_tokens)).contains(n))
        {
            return Err(invalid(
                &key("defaultMaxTokens"),
                format!("must be 1..{provider_max_tokens} (retry.providerMaxTokens), got {n}"),
            ));
        }
        if !is_tenant_name(name) || name == callai_engine::runlog::ADMIN {
            return Err(invalid(
                &format!("tenants.{name}"),
                format!(
                    "{name:?} cannot name a tenant: use 1 to 64 letters, digits, '_', '-' or '.' \
                     (and not {:?}, the name of [server] tokenEnv's caller)",
                    callai_engine::runlog::ADMIN
                ),
            ));
        }
        if tenant.token_env.is_empty() {
            return Err(invalid(
                &key("tokenEnv"),
                "a tenant needs the variable holding its bearer token".into(),
            ));
        }
        if !super::server::is_env_name(&tenant.token_env) {
            return Err(invalid(
                &key("tokenEnv"),
                format!("{:?} is not an environment variable name", tenant.token_env),
            ));
        }
        let budget = &tenant.budget;
        for (k, v) in [
            ("requests", budget.requests),
            ("outputTokens", budget.output_tokens),
            ("inputTokens", budget.input_tokens),
        ] {
            if let Some(v) = v.filter(|v| *v < 0) {
                return Err(invalid(
                    &key(&format!("budget.{k}")),
                    format!("{v} is negative; a budget is 0 or more (unset: unlimited)"),
                ));
            }
        }
        if let Some(cost) = budget.cost.filter(|c| !(c.is_finite() && *c >= 0.0)) {
            return Err(invalid(
                &key("budget.cost"),
                format!("{cost} is not an amount; a budget is 0 or more (unset: unlimited)"),
            ));
        }
        if let Some(problem) = currency_code_problem(&budget.currency) {
            return Err(invalid(&key("budget.currency"), problem));
        }
        if Window::parse(&budget.window).is_none() {
            return Err(invalid(
                &key("budget.window"),
                format!(
                    "{:?} is not a window: \"1m\", \"1h\", \"1d\", \"30d\" or \"none\"",
                    budget.window
                ),
            ));
        }
        let currency = budget.cost.map(|_| budget.currency.as_str());
        validate_limits(&key("limits"), name, &tenant.limits, currency)?;
    }
    Ok(())
}
