//! The conformance scenario `v2-callai-attempt-accounting` (RFC 0248
//! "Conformance"): eight legs that run the fixture node
//! `conformance.callai.echo-attempts` through a host's conformance mock and
//! judge what it observed.
//!
//! Drivers are split from judges: a leg ([`legs`]) runs the node through a
//! [`Target`] and collects [`Observation`]s; a judge ([`judges`]) is a pure
//! function from observations to [`Finding`]s. Each leg is gated on its
//! `callAccounting` flag (the replay leg also on replay support): a host that
//! does not advertise a flag gets the leg skipped, not passed. A leg whose
//! premise fails (the host does not retry at all) is blocked, not judged.

#![warn(missing_docs)]

pub mod judges;
pub mod legs;
mod report;
mod target;

pub use report::Report;
pub use target::HostTarget;

use callai_engine::MockLogEntry;
use serde::Serialize;
use serde_json::Value;

/// The scenario's name.
pub const SCENARIO: &str = "v2-callai-attempt-accounting";
/// The fixture's node.
pub const NODE_ID: &str = "conformance.callai.echo-attempts";

/// What the suite saw of one run of the fixture node.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Observation {
    /// The mock script the suite wrote for the run.
    pub script: Value,
    /// The ctx.callAI request the node was given.
    pub request: Value,
    /// The node's output: the echoed result fields, or `{"error": ...}`.
    pub output: Value,
    /// The run's events, `{"type", "payload"}` each.
    pub events: Vec<Value>,
    /// What the conformance mock received, one entry per provider request.
    pub requests: Vec<MockLogEntry>,
    /// Whether the run's mock offered native structured output (the suite's
    /// setup, not the host's choice): the mode a structured call must report.
    pub native: bool,
}

impl Observation {
    /// The payloads of the events named `name`.
    pub fn events_named(&self, name: &str) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|e| e["type"] == name)
            .map(|e| &e["payload"])
            .collect()
    }

    /// The result's `attempts`, if the output has one.
    pub fn attempts(&self) -> Option<&Value> {
        self.output.get("attempts")
    }

    /// The error the call failed with, if it failed.
    pub fn error(&self) -> Option<&Value> {
        self.output.get("error")
    }

    /// The mode a structured call on this run's mock must report.
    pub fn offered_mode(&self) -> &'static str {
        if self.native { "native" } else { "prompt" }
    }
}

/// One judged rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The rule, e.g. `A.1 count`.
    pub rule: String,
    /// Whether the host met it.
    pub ok: bool,
    /// What was seen.
    pub message: String,
}

impl Finding {
    /// A finding.
    pub fn new(rule: &str, ok: bool, message: impl Into<String>) -> Self {
        Self {
            rule: rule.into(),
            ok,
            message: message.into(),
        }
    }
}

/// How a leg ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum LegOutcome {
    /// Judged: its findings.
    Judged {
        /// One per rule.
        findings: Vec<Finding>,
    },
    /// Not applicable: the host does not advertise what the leg needs.
    Skip {
        /// The flag or fixture the host does not advertise.
        reason: String,
    },
    /// The leg's premise did not hold; nothing was judged.
    Blocked {
        /// The premise that failed (e.g. the host did not retry).
        reason: String,
    },
}

/// A leg's name and outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LegReport {
    /// The leg.
    pub leg: &'static str,
    /// What happened.
    #[serde(flatten)]
    pub outcome: LegOutcome,
}

/// Which host configuration a run needs. A host that cannot provide a
/// variant answers `None`, and the leg that needs it is blocked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// The host as it is.
    Default,
    /// Structured output by prompt (the mock has no native mode).
    PromptMode,
}

/// The host under test, as the drivers see it.
pub trait Target {
    /// The host's `aiProviders` facet.
    fn facet(&self) -> Value;
    /// Whether the host can record and replay runs.
    fn supports_replay(&self) -> bool;
    /// Runs the fixture node once with `request`, its mock serving `script`.
    fn run(&self, variant: Variant, script: &Value, request: &Value) -> Option<Observation>;
    /// Runs it and records the run; then replays it. `None` when the host
    /// cannot replay.
    fn record_and_replay(
        &self,
        script: &Value,
        request: &Value,
    ) -> Option<(Observation, Observation)>;
}

/// Runs every leg against `target`.
pub fn run(target: &dyn Target) -> Report {
    Report::new(legs::all().iter().map(|leg| LegReport {
        leg: leg.name,
        outcome: (leg.run)(target),
    }))
}
