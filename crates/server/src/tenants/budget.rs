//! A tenant's budget as a call sees it (this host's [`Allotment`] of it),
//! the `x-callai-budget-remaining-*` headers and `GET /v1/budget`.

use super::Caller;
use super::allotment::Allotment;
use crate::call::decimal;
use crate::error::ApiError;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use callai_engine::RunLog;
use callai_engine::budget::{KEYS, SharedBudget, shown};
use callai_engine::cost::from_nanos;
use callai_engine::wire::{CallError, ErrorCode};
use serde_json::{Value, json};
use std::sync::Arc;

/// The refusal of a call whose budget could not be checked (its database
/// failed): before any request, as `budget_unavailable` (503).
pub fn unavailable(tenant: &str, why: String) -> CallError {
    CallError::new(
        ErrorCode::PolicyDenied,
        format!("the budget of tenant {tenant:?} could not be checked: {why}"),
    )
    .with_detail("reason", "budget_unavailable")
}

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

    /// Writes the `x-callai-budget-remaining-*` headers into `headers`,
    /// one per limited key, as this host last saw the window.
    pub fn add_headers(&self, headers: &mut HeaderMap) {
        let Some(left) = self.0.remaining() else {
            return;
        };
        for ((name, left), key) in REMAINING.into_iter().zip(left).zip(KEYS) {
            let value = match (left, key) {
                (None, _) => continue,
                // Money as `x-callai-cost` writes it.
                (Some(left), "cost") => decimal(from_nanos(left)),
                (Some(left), _) => Some(HeaderValue::from(left)),
            };
            if let Some(value) = value {
                headers.insert(name, value);
            }
        }
    }
}

/// The remaining headers, in the order of the budget's keys.
const REMAINING: [HeaderName; 4] = [
    HeaderName::from_static("x-callai-budget-remaining-requests"),
    HeaderName::from_static("x-callai-budget-remaining-output-tokens"),
    HeaderName::from_static("x-callai-budget-remaining-input-tokens"),
    HeaderName::from_static("x-callai-budget-remaining-cost"),
];

/// `GET /v1/budget`: the caller's budget in its current window, as `log`
/// (the server's run log) keeps it.
pub async fn budget_answer(
    log: Option<&Arc<dyn RunLog>>,
    caller: &Caller,
) -> Result<Value, ApiError> {
    let tenant = &caller.0;
    let Some(plan) = &tenant.plan else {
        return Ok(json!({"tenant": tenant.name, "budget": null}));
    };
    let log = log
        .and_then(|l| l.ledger())
        .ok_or_else(|| ApiError::internal("this host's run log keeps no budgets"))?;
    let window = log
        .window(&tenant.name, plan.window)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
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
