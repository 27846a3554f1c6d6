//! The scenario's report: a table for people, JSON for machines.

use super::{LegOutcome, LegReport, SCENARIO};
use serde_json::{Value, json};
use std::fmt::Write as _;

/// Every leg's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    legs: Vec<LegReport>,
}

impl Report {
    pub(super) fn new(legs: impl IntoIterator<Item = LegReport>) -> Self {
        Self {
            legs: legs.into_iter().collect(),
        }
    }

    /// The legs.
    pub fn legs(&self) -> &[LegReport] {
        &self.legs
    }

    /// Whether any finding failed.
    pub fn failed(&self) -> bool {
        self.legs.iter().any(|l| match &l.outcome {
            LegOutcome::Judged { findings } => findings.iter().any(|f| !f.ok),
            _ => false,
        })
    }

    /// Counts of passed, failed, skipped and blocked (findings for the first two, legs for the rest).
    pub fn tally(&self) -> (usize, usize, usize, usize) {
        let (mut pass, mut fail, mut skip, mut blocked) = (0, 0, 0, 0);
        for leg in &self.legs {
            match &leg.outcome {
                LegOutcome::Judged { findings } => {
                    pass += findings.iter().filter(|f| f.ok).count();
                    fail += findings.iter().filter(|f| !f.ok).count();
                }
                LegOutcome::Skip { .. } => skip += 1,
                LegOutcome::Blocked { .. } => blocked += 1,
            }
        }
        (pass, fail, skip, blocked)
    }

    /// The report as JSON.
    pub fn to_json(&self) -> Value {
        let (pass, fail, skip, blocked) = self.tally();
        json!({
            "scenario": SCENARIO,
            "legs": self.legs,
            "passed": pass, "failed": fail, "skipped": skip, "blocked": blocked,
        })
    }

    /// The report as a table: leg, rule, result, message.
    pub fn table(&self) -> String {
        let mut rows: Vec<[String; 4]> = Vec::new();
        for leg in &self.legs {
            match &leg.outcome {
                LegOutcome::Judged { findings } => {
                    for f in findings {
                        let result = if f.ok { "pass" } else { "FAIL" };
                        rows.push([
                            leg.leg.into(),
                            f.rule.clone(),
                            result.into(),
                            f.message.clone(),
                        ]);
                    }
                }
                LegOutcome::Skip { reason } => {
                    rows.push([leg.leg.into(), "-".into(), "skip".into(), reason.clone()]);
                }
                LegOutcome::Blocked { reason } => {
                    rows.push([leg.leg.into(), "-".into(), "blocked".into(), reason.clone()]);
                }
            }
        }
        let width = |i: usize| rows.iter().map(|r| r[i].len()).max().unwrap_or(0).max(6);
        let (w0, w1, w2) = (width(0), width(1), width(2));
        let mut out = format!("{SCENARIO}\n\n");
        let _ = writeln!(
            out,
            "{:<w0$}  {:<w1$}  {:<w2$}  message",
            "leg", "rule", "result"
        );
        for r in &rows {
            let _ = writeln!(out, "{:<w0$}  {:<w1$}  {:<w2$}  {}", r[0], r[1], r[2], r[3]);
        }
        let (pass, fail, skip, blocked) = self.tally();
        let _ = writeln!(
            out,
            "\nfindings: {pass} pass, {fail} fail; legs: {skip} skipped, {blocked} blocked"
        );
        out
    }
}
