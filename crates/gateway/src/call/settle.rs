//! The one path every endpoint runs a call through (`/v1/call` and every
//! drop-in): admitted (or refused, full or stopping), observed (metrics,
//! its trace under its id, spans), held to the caller's budget and the
//! run's limits, its text handed to a sink as its provider streams it when
//! there is one; then settled with what it charged.

use super::plan::CallPlan;
use crate::error::GatewayError;
use crate::spans::SpanOrigin;
use crate::state::Gateway;
use crate::tenants::{Caller, TenantBudget};
use crate::traces::{CallTracer, Origin};
use callai_engine::cost::Cost;
use callai_engine::events::Event;
use callai_engine::observe::SharedObserver;
use callai_engine::wire::{CallError, CallResult};
use callai_engine::{CallInput, DeltaSink, EventLog, Journal, RunError, RunSession};
use std::sync::Arc;

/// The node id a call's events carry when the caller names none.
pub const DEFAULT_NODE_ID: &str = "callai.call";

/// What a call charged: the caller's budget after the call (when it has
/// one) and what the call cost (when a price is known).
#[derive(Debug, Default)]
pub struct Charged {
    /// The caller's budget.
    pub budget: Option<TenantBudget>,
    /// What the call cost.
    pub cost: Option<Cost>,
}

/// A call that ran to its end: the engine's outcome, and its events when
/// the caller asked for them.
#[derive(Debug)]
pub struct Settled {
    /// The result, or the call error (with its own code and details).
    pub outcome: Result<CallResult, CallError>,
    /// The call's events, when asked for.
    pub events: Option<Vec<Event>>,
    /// What it charged.
    pub charged: Charged,
}

/// What observes one call: the metrics, its trace (under the call's id),
/// and the spans when they are sent.
fn observer(
    gateway: &Gateway,
    caller: &Caller,
    plan: &CallPlan,
) -> (SharedObserver, Arc<CallTracer>) {
    let tracer = Arc::new(CallTracer::new(
        gateway.calls.clone(),
        Origin {
            tenant: caller.name().into(),
            endpoint: plan.endpoint,
            run_id: None,
            cache: plan.cache,
        },
        gateway.metrics.clone(),
        Some(plan.id.clone()),
    ));
    let mut observers = gateway.observers();
    if let Some(spans) = &gateway.spans {
        observers = observers.with(spans.calls(SpanOrigin {
            tenant: caller.name(),
            id: &plan.id,
            parent: plan.trace_parent.as_deref(),
        }));
    }
    (Arc::new(observers.with(tracer.clone())), tracer)
}

fn shutting_down(when: &str) -> GatewayError {
    GatewayError::ShuttingDown(format!("this host shut down {when}"))
}

impl Gateway {
    /// Runs `plan` for `caller` to its end. What is not the call's own
    /// outcome (the host full or shutting down, a limit, a host fault) is
    /// the error. A text call's text goes to `deltas` as its provider
    /// streams it, when there is a sink.
    pub async fn call(
        &self,
        caller: &Caller,
        plan: CallPlan,
        deltas: Option<DeltaSink>,
    ) -> Result<Settled, GatewayError> {
        let mut ticket = self.admission.admit()?;
        tokio::select! {
            () = ticket.start() => {}
            () = self.admission.stopped() => {
                return Err(shutting_down("before the call started"));
            }
        }
        self.report_load();
        let (observer, tracer) = observer(self, caller, &plan);
        // A call's events are made only for a caller that asked for them.
        let events = match plan.events {
            true => EventLog::new(),
            false => EventLog::discarding(),
        };
        let node_id = plan.node_id.as_deref().unwrap_or(DEFAULT_NODE_ID);
        // A call that cannot reach the mock needs no mock of its own: it
        // goes through the caller's host as it is.
        let host = match plan.script {
            None if !plan.route.reaches_mock(&caller.0.host) => caller.0.host.clone(),
            script => self.host_for(&caller.0, script),
        };
        let mut session = RunSession::new(host, node_id, Journal::live())
            .with_observer(observer)
            .with_events(events.clone());
        let budget = TenantBudget::of(caller);
        if let Some(budget) = &budget {
            session = session.with_budget(budget.shared());
        }
        if let Some(deltas) = deltas {
            session = session.with_deltas(deltas);
        }
        let limits = self.config().limits;
        session = session.with_deadline(
            tokio::time::Instant::now() + std::time::Duration::from_millis(limits.wall_ms),
        );
        let outcome = tokio::select! {
            outcome = session.call(CallInput::Parsed(plan.request)) => Some(outcome),
            () = self.admission.stopped() => None,
        };
        drop(ticket);
        self.report_load();
        let events = plan.events.then(|| events.snapshot());
        match outcome {
            Some(Ok(outcome)) => Ok(Settled {
                outcome,
                events,
                charged: Charged {
                    budget,
                    cost: tracer.last_cost(),
                },
            }),
            Some(Err(RunError::Limit { key, message })) => Err(GatewayError::LimitExceeded {
                key,
                message: format!("{key}: {message}"),
            }),
            Some(Err(e)) => Err(GatewayError::internal(e.to_string())),
            None => Err(shutting_down("while the call was going on")),
        }
    }
}
