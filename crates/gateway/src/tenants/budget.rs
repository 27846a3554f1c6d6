//! A caller's limits as a call sees them (this host's allotment of each:
//! what is left of each key, for the answer's headers) and as
//! `GET /v1/budget` shows them (each in its current window, from the run
//! log).

use super::caller::Caller;
use super::limited::{Limited, RateLimit};
use super::plan::Plan;
use crate::error::GatewayError;
use callai_engine::RunLog;
use callai_engine::budget::{KEYS, Ledger, SharedBudget, Spend, shown};
use serde_json::{Value, json};
use smallvec::SmallVec;
use std::sync::Arc;

/// A caller's hold on its limits: this host's allotment of each.
#[derive(Debug, Clone)]
pub struct TenantBudget(Arc<Limited>);

impl TenantBudget {
    /// The limits of `caller`'s calls; `None` for a caller with none.
    pub fn of(caller: &Caller) -> Option<Self> {
        caller.0.limited.get().cloned().map(Self)
    }

    /// The engine's view of them.
    pub fn shared(&self) -> SharedBudget {
        self.0.clone()
    }

    /// What is left of each limited key (the least over every limit;
    /// `None` for a key none limits), in the order of the budget's keys
    /// (`requests`, `outputTokens`, `inputTokens`, `cost` in billionths),
    /// as this host last saw the windows; `None` before it has seen any.
    pub fn remaining(&self) -> Option<[Option<u64>; 4]> {
        self.0.remaining()
    }

    /// Each limited key's tightest limit, for the `x-ratelimit-*` headers.
    pub fn rate_limits(&self) -> SmallVec<[RateLimit; 4]> {
        self.0.rate_limits()
    }
}

/// `GET /v1/budget`: the caller's limits, each in its current window, as
/// `log` (the server's run log) keeps them. `budget` is its
/// `[tenants.NAME.budget]` (null without one), `limits` every limit.
pub async fn budget_answer(
    log: Option<&Arc<dyn RunLog>>,
    caller: &Caller,
) -> Result<Value, GatewayError> {
    let tenant = &caller.0;
    if tenant.plans.is_empty() {
        return Ok(json!({"tenant": tenant.name, "budget": null, "limits": []}));
    }
    let ledger = log
        .and_then(|l| l.ledger())
        .ok_or_else(|| GatewayError::internal("this host's run log keeps no budgets"))?;
    let mut budget = Value::Null;
    let mut limits = Vec::with_capacity(tenant.plans.len());
    for plan in &tenant.plans {
        let shown = limit_answer(ledger, plan).await?;
        if *plan.account == *tenant.name {
            budget = shown.clone();
        }
        limits.push(shown);
    }
    Ok(json!({"tenant": tenant.name, "budget": budget, "limits": limits}))
}

/// One limit in its current window.
pub(crate) async fn limit_answer(ledger: &dyn Ledger, plan: &Plan) -> Result<Value, GatewayError> {
    let window = ledger
        .window(&plan.account, plan.window)
        .await
        .map_err(|e| GatewayError::internal(e.to_string()))?;
    // Money is shown for a limit in money only: the others count none.
    let money = plan.limits.cost.is_some();
    let by_key = |values: [Option<u64>; 4]| -> Value {
        KEYS.iter()
            .zip(values)
            .filter(|(k, _)| money || **k != "cost")
            .map(|(&k, v)| (k.to_owned(), v.map_or(Value::Null, |v| shown(k, v))))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let every = |s: Spend| s.amounts().map(Some);
    let ends = plan.window.end_ms(window.window_ms);
    let mut shown = json!({
        "window": plan.window.as_str(),
        "windowStartMs": window.window_ms,
        "windowEndMs": ends,
        "limits": by_key(plan.limits.amounts()),
        "spent": by_key(every(window.spent)),
        "reserved": by_key(every(window.reserved)),
        "remaining": by_key(plan.limits.left(&window)),
    });
    if money {
        shown["currency"] = Value::from(&*plan.currency);
    }
    Ok(shown)
}
