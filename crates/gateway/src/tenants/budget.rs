//! A tenant's budget as a call sees it (this host's [`Allotment`] of it:
//! what is left of each key, for the answer's headers) and as
//! `GET /v1/budget` shows it (its current window, from the run log).

use super::allotment::Allotment;
use super::caller::Caller;
use crate::error::GatewayError;
use callai_engine::RunLog;
use callai_engine::budget::{KEYS, SharedBudget, shown};
use serde_json::{Value, json};
use std::sync::Arc;

/// A caller's hold on its budget: this host's allotment of it.
#[derive(Debug, Clone)]
pub struct TenantBudget(Arc<Allotment>);

impl TenantBudget {
    /// The budget of `caller`'s calls; `None` for a caller with no budget.
    pub fn of(caller: &Caller) -> Option<Self> {
        caller.0.allotment.get().cloned().map(Self)
    }

    /// The engine's view of it.
    pub fn shared(&self) -> SharedBudget {
        self.0.clone()
    }

    /// What is left of each key the budget limits (`None` for a key it
    /// does not), in the order of the budget's keys (`requests`,
    /// `outputTokens`, `inputTokens`, `cost` in billionths), as this host
    /// last saw the window; `None` before it has seen it.
    pub fn remaining(&self) -> Option<[Option<u64>; 4]> {
        self.0.remaining()
    }
}

/// `GET /v1/budget`: the caller's budget in its current window, as `log`
/// (the server's run log) keeps it.
pub async fn budget_answer(
    log: Option<&Arc<dyn RunLog>>,
    caller: &Caller,
) -> Result<Value, GatewayError> {
    let tenant = &caller.0;
    let Some(plan) = &tenant.plan else {
        return Ok(json!({"tenant": tenant.name, "budget": null}));
    };
    let log = log
        .and_then(|l| l.ledger())
        .ok_or_else(|| GatewayError::internal("this host's run log keeps no budgets"))?;
    let window = log
        .window(&tenant.name, plan.window)
        .await
        .map_err(|e| GatewayError::internal(e.to_string()))?;
    // Money is shown for a budget in money only: the others count none.
    let money = plan.limits.cost.is_some();
    let by_key = |values: [Option<u64>; 4]| -> Value {
        KEYS.iter()
            .zip(values)
            .filter(|(k, _)| money || **k != "cost")
            .map(|(&k, v)| (k.to_owned(), v.map_or(Value::Null, |v| shown(k, v))))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let every = |s: callai_engine::budget::Spend| s.amounts().map(Some);
    let ends = plan
        .window
        .length()
        .map(|l| window.window_ms + l.as_millis() as u64);
    let mut budget = json!({
        "window": plan.window.as_str(),
        "windowStartMs": window.window_ms,
        "windowEndMs": ends,
        "limits": by_key(plan.limits.amounts()),
        "spent": by_key(every(window.spent)),
        "reserved": by_key(every(window.reserved)),
        "remaining": by_key(plan.limits.left(&window)),
    });
    if money {
        budget["currency"] = Value::from(&*plan.currency);
    }
    Ok(json!({"tenant": tenant.name, "budget": budget}))
}
