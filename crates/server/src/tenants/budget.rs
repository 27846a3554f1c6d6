//! A tenant's budget as a call sees it (this host's [`Allotment`] of it),
//! the `x-callai-budget-remaining-*` headers and `GET /v1/budget`.

use super::Caller;
use super::allotment::Allotment;
use crate::error::ApiError;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use callai_engine::RunLog;
use callai_engine::budget::{SharedBudget, Spend};
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

    /// The `x-callai-budget-remaining-*` headers, one per limited key, as
    /// this host last saw the window.
    pub fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let Some(left) = self.0.remaining() else {
            return headers;
        };
        let names = [
            "x-callai-budget-remaining-requests",
            "x-callai-budget-remaining-output-tokens",
            "x-callai-budget-remaining-input-tokens",
        ];
        for (name, left) in names.into_iter().zip(left) {
            if let Some(left) = left {
                headers.insert(HeaderName::from_static(name), HeaderValue::from(left));
            }
        }
        headers
    }
}

/// `GET /v1/budget`: the caller's budget in its current window, as `log`
/// (the server's run log) keeps it.
pub async fn budget_answer(
    log: Option<&Arc<dyn RunLog>>,
    caller: &Caller,
) -> Result<Value, ApiError> {
    let tenant = &caller.0;
    let Some(plan) = tenant.plan else {
        return Ok(json!({"tenant": tenant.name, "budget": null}));
    };
    let log = log
        .and_then(|l| l.ledger())
        .ok_or_else(|| ApiError::internal("this host's run log keeps no budgets"))?;
    let window = log
        .window(&tenant.name, plan.window)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let keys = plan.limits.by_key();
    let left = plan.limits.left(&window);
    fn by_key<T: serde::Serialize>(keys: &[(&str, Option<u64>); 3], values: [T; 3]) -> Value {
        keys.iter()
            .zip(values)
            .map(|((k, _), v)| ((*k).to_owned(), json!(v)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
    let amounts = |s: Spend| [s.requests, s.output_tokens, s.input_tokens];
    let ends = plan
        .window
        .length()
        .map(|l| window.window_ms + l.as_millis() as u64);
    Ok(json!({
        "tenant": tenant.name,
        "budget": {
            "window": plan.window.as_str(),
            "windowStartMs": window.window_ms,
            "windowEndMs": ends,
            "limits": by_key(&keys, keys.map(|(_, v)| v)),
            "spent": by_key(&keys, amounts(window.spent)),
            "reserved": by_key(&keys, amounts(window.reserved)),
            "remaining": by_key(&keys, left),
        }
    }))
}
