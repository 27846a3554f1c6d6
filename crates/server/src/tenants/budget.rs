//! A tenant's budget as the engine sees it: each call's worst case reserved
//! in the run log's database before it sends anything, what it spent
//! charged when it settles; the `x-callai-budget-remaining-*` headers and
//! `GET /v1/budget`.

use super::{Caller, Plan, Tenant};
use crate::app::AppState;
use crate::error::ApiError;
use crate::metrics::Metrics;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use callai_engine::budget::{
    Budget, Reservation, ReserveRequest, Reserved, Spend, WindowState, budget_exceeded,
};
use callai_engine::wire::{CallError, ErrorCode};
use callai_engine::{BoxFuture, RunLog};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a charge the database refused is tried again before the
/// reservation is left to lapse (releasing the worst case, charging nothing).
const SETTLE_TRIES: u32 = 3;

/// One call's (or one run's) hold on its tenant's budget.
pub struct TenantBudget {
    log: Arc<dyn RunLog>,
    tenant: Arc<Tenant>,
    plan: Plan,
    owner: Arc<str>,
    /// How long a reservation outlives a host that died holding it: the
    /// call's wall time and a lease.
    ttl: Duration,
    metrics: Arc<Metrics>,
    /// The window as the last reservation or charge left it.
    last: Arc<Mutex<Option<WindowState>>>,
}

impl std::fmt::Debug for TenantBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantBudget")
            .field("tenant", &self.tenant.name)
            .finish_non_exhaustive()
    }
}

impl TenantBudget {
    /// The budget of `caller`'s calls on `state`; `None` for a caller with
    /// no budget (or a server with no run log, which start-up refuses when
    /// a tenant has a budget).
    pub fn of(state: &AppState, caller: &Caller) -> Option<Arc<Self>> {
        let plan = caller.0.plan?;
        let log = state.runlog.clone()?;
        let ttl =
            Duration::from_millis(state.config().limits.wall_ms) + state.runlog_config.lease();
        Some(Arc::new(Self {
            log,
            tenant: caller.0.clone(),
            plan,
            owner: state.host_id.as_str().into(),
            ttl,
            metrics: state.metrics.clone(),
            last: Arc::default(),
        }))
    }

    /// The `x-callai-budget-remaining-*` headers, one per limited key, from
    /// the window as this budget last saw it.
    pub fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let last = *self.last.lock().unwrap_or_else(|p| p.into_inner());
        let Some(state) = last else {
            return headers;
        };
        let names = [
            "x-callai-budget-remaining-requests",
            "x-callai-budget-remaining-output-tokens",
            "x-callai-budget-remaining-input-tokens",
        ];
        for (name, left) in names.into_iter().zip(self.plan.limits.left(&state)) {
            if let Some(left) = left {
                headers.insert(HeaderName::from_static(name), HeaderValue::from(left));
            }
        }
        headers
    }
}

impl Budget for TenantBudget {
    fn reserve(&self, worst: Spend) -> BoxFuture<'_, Result<Reservation, CallError>> {
        Box::pin(async move {
            let unavailable = |why: String| {
                CallError::new(
                    ErrorCode::PolicyDenied,
                    format!(
                        "the budget of tenant {:?} could not be checked: {why}",
                        self.tenant.name
                    ),
                )
                .with_detail("reason", "budget_unavailable")
            };
            let Some(ledger) = self.log.ledger() else {
                return Err(unavailable("the run log keeps no budgets".into()));
            };
            let request = ReserveRequest {
                tenant: &self.tenant.name,
                window: self.plan.window,
                limits: self.plan.limits,
                need: worst,
                owner: &self.owner,
                ttl: self.ttl,
            };
            match ledger.reserve(&request).await {
                Ok(Reserved::Admitted(reservation, state)) => {
                    *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(state);
                    Ok(reservation)
                }
                Ok(Reserved::Refused { key, left, needed }) => {
                    self.metrics.budget_refused(&self.tenant.name);
                    Err(budget_exceeded(key, left, needed))
                }
                Err(e) => Err(unavailable(e.to_string())),
            }
        })
    }

    fn settle(&self, reservation: Reservation, spent: Spend) -> BoxFuture<'static, ()> {
        let log = self.log.clone();
        let tenant = self.tenant.name.clone();
        let metrics = self.metrics.clone();
        let last = self.last.clone();
        Box::pin(async move {
            let Some(ledger) = log.ledger() else { return };
            let mut error = None;
            for attempt in 0..SETTLE_TRIES {
                match ledger.settle(&tenant, reservation, spent).await {
                    Ok(state) => {
                        metrics.budget_spent(&tenant, &spent);
                        *last.lock().unwrap_or_else(|p| p.into_inner()) = Some(state);
                        return;
                    }
                    Err(e) => error = Some(e),
                }
                tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
            }
            if let Some(e) = error {
                eprintln!(
                    "callai serve: cannot charge tenant {tenant:?} {spent:?}: {e}; \
                     its reservation lapses with its lease"
                );
            }
        })
    }
}

/// `GET /v1/budget`: the caller's budget in its current window.
pub async fn budget_answer(state: &AppState, caller: &Caller) -> Result<Value, ApiError> {
    let tenant = &caller.0;
    let Some(plan) = tenant.plan else {
        return Ok(json!({"tenant": tenant.name, "budget": null}));
    };
    let log = state
        .runlog
        .as_ref()
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
