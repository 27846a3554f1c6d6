//! A call ready to run, whichever endpoint it came in by: its id, the
//! ctx.callAI request (read, not yet checked: the engine does), where it
//! goes (resolved once), and what it brings (a mock script, the node id its
//! events carry, whether its events are asked for).

use super::route::Route;
use crate::error::GatewayError;
use crate::ids::{NODE_ID_RULE, valid_node_id};
use crate::tenants::Caller;
use callai_engine::MockScript;
use callai_engine::wire::{CallError, ErrorCode, ParsedRequest};

/// One call, planned.
#[derive(Debug, Clone)]
pub struct CallPlan {
    /// Its id: the `x-callai-call-id` header, its trace's, and a drop-in
    /// answer's `id`.
    pub id: String,
    /// Where it came in: `call`, `chat_completions`, `messages` or `responses`.
    pub endpoint: &'static str,
    /// The ctx.callAI request (a drop-in's pointed where
    /// [`CallPlan::route`] goes, by [`Route::apply`]).
    pub request: ParsedRequest,
    /// Where it goes.
    pub route: Route,
    /// A mock script for this call alone.
    pub script: Option<MockScript>,
    /// The node id the call's events carry.
    pub node_id: Option<String>,
    /// Whether its events are answered with it.
    pub events: bool,
    /// The W3C `traceparent` the caller sent: its spans go under it.
    pub trace_parent: Option<String>,
    /// `miss` when the response cache looked it up and did not find it
    /// (its trace says so); `None` when the cache took no part.
    pub cache: Option<&'static str>,
}

/// What a plan is made of, as its endpoint read it.
#[derive(Debug)]
pub struct Planned {
    /// Its id.
    pub id: String,
    /// Where it came in.
    pub endpoint: &'static str,
    /// The request (a drop-in's pointed where `route` goes).
    pub request: ParsedRequest,
    /// Where it goes.
    pub route: Route,
    /// A mock script, and the field the request sent it in (`script`,
    /// `callai.script`).
    pub script: Option<(MockScript, &'static str)>,
    /// The node id, and the field it came in (`nodeId`, `callai.nodeId`).
    pub node_id: Option<(String, &'static str)>,
    /// Whether its events are asked for.
    pub events: bool,
    /// The W3C `traceparent` the caller sent, if any.
    pub trace_parent: Option<String>,
}

impl CallPlan {
    /// The plan of `planned` for `caller`, checked once here for every
    /// endpoint: a node id must be one, and a mock script is for a call
    /// that reaches no provider of the caller's but the mock (a provider
    /// it may not reach, or that does not exist, is the engine's to refuse,
    /// naming it, before anything is said of a script).
    pub fn new(caller: &Caller, planned: Planned) -> Result<Self, GatewayError> {
        let Planned {
            id,
            endpoint,
            request,
            route,
            script,
            node_id,
            events,
            trace_parent,
        } = planned;
        if let Some((id, field)) = &node_id
            && !valid_node_id(id)
        {
            return Err(GatewayError::invalid(field, NODE_ID_RULE));
        }
        if let Some(allowed) = &caller.0.allowed_models
            && !route.allowed_by(allowed)
        {
            let refused = CallError::new(
                ErrorCode::PolicyDenied,
                format!(
                    "model: {} is not among this key's allowedModels {allowed:?}",
                    route.shown()
                ),
            )
            .with_detail("field", "model");
            return Err(GatewayError::Call(refused));
        }
        if let Some((_, field)) = &script
            && let Some(other) = route.real_provider(caller)
        {
            return Err(GatewayError::invalid(
                field,
                format!("a script is for the mock provider; this call goes to {other:?}"),
            ));
        }
        Ok(Self {
            id,
            endpoint,
            request,
            route,
            script: script.map(|(s, _)| s),
            node_id: node_id.map(|(n, _)| n),
            events,
            trace_parent,
            cache: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::route::tests::{caller, host};

    fn planned(route: Route, script: bool, node_id: Option<&str>) -> Planned {
        Planned {
            id: "call_1".into(),
            endpoint: "call",
            request: ParsedRequest::default(),
            route,
            script: script.then(|| (MockScript::from_json("[]").unwrap(), "callai.script")),
            node_id: node_id.map(|n| (n.to_owned(), "callai.nodeId")),
            events: false,
            trace_parent: None,
        }
    }

    #[test]
    fn a_plan_refuses_a_bad_node_id_and_a_script_for_a_real_provider_naming_the_field() {
        let caller = caller(host(None));
        let fast = Route::Model("fast".into());
        let e = CallPlan::new(&caller, planned(fast.clone(), true, None)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "callai.script: a script is for the mock provider; this call goes to \"real\""
        );
        let e = CallPlan::new(&caller, planned(fast.clone(), false, Some(""))).unwrap_err();
        assert!(
            matches!(&e, GatewayError::Invalid { field, .. } if field == "callai.nodeId"),
            "{e:?}"
        );
        let plan = CallPlan::new(
            &caller,
            planned(Route::Model("dry".into()), true, Some("n")),
        );
        let plan = plan.unwrap();
        assert!(plan.script.is_some());
        assert_eq!(plan.node_id.as_deref(), Some("n"));
    }
}
