//! `bookai-research`, the agent example (issue 33), on its mock scripts: a
//! tool loop of two tools whose per-node request budget counts every
//! step's real requests, host retries inside a step included.

use callai_engine::HostConfig;
use callai_tests::{pack, run};
use serde_json::{Value, json};

/// The packs of the example, one per language.
const PACKS: [&str; 3] = [
    "bookai-research",
    "bookai-research-ts",
    "bookai-research-py",
];

fn script(name: &str) -> Value {
    let text = match name {
        "clean" => include_str!("../../examples/bookai-research/scripts/clean.json"),
        _ => include_str!("../../examples/bookai-research/scripts/two-tools.json"),
    };
    serde_json::from_str(text).unwrap()
}

fn input(max_requests: u32) -> String {
    json!({"question": "How did lighthouse keepers get their letters?",
           "maxRequests": max_requests, "maxSteps": 5})
    .to_string()
}

#[test]
fn a_malformed_call_is_one_more_request_in_the_loop_record() {
    for name in PACKS {
        let out = run(
            &pack(name),
            HostConfig::default(),
            &script("two-tools"),
            &input(6),
        );
        let v = out.ok();
        assert_eq!(
            v["loop"],
            json!({"steps": 3, "requests": 4, "outputTokens": 76, "usageComplete": true}),
            "{name}: {v}"
        );
        assert_eq!(
            v["toolsRun"],
            json!(["search_notes", "read_note"]),
            "{name}"
        );
        assert_eq!(
            v["spent"]["requests"], 4,
            "{name}: the budget charged requests"
        );
        assert_eq!(v["spent"]["calls"], 3, "{name}");
        assert!(v["brief"].as_str().unwrap().contains("relief boat"));
        assert_eq!(out.mock_log.len(), 4, "{name}");
        let sizes: Vec<usize> = out.mock_log.iter().map(|e| e.messages).collect();
        // The corrective text, then each step's call and result.
        assert_eq!(sizes, [1, 2, 3, 5], "{name}");
    }
}

#[test]
fn a_clean_loop_is_one_request_per_step() {
    for name in PACKS {
        let out = run(
            &pack(name),
            HostConfig::default(),
            &script("clean"),
            &input(6),
        );
        let v = out.ok();
        assert_eq!(v["loop"]["steps"], 3, "{name}: {v}");
        assert_eq!(v["loop"]["requests"], 3);
        assert_eq!(v["loop"]["outputTokens"], 54);
    }
}

#[test]
fn the_budget_stops_the_loop_before_it_overruns() {
    for name in PACKS {
        // Three requests: the first step takes two (the host retried the
        // malformed call), the second one; the third is refused unsent.
        let out = run(
            &pack(name),
            HostConfig::default(),
            &script("two-tools"),
            &input(3),
        );
        let e = out.output.as_ref().expect_err("the budget ends the loop");
        let said = e.to_string();
        assert!(said.contains("maxRequests"), "{name}: {said}");
        assert!(said.contains("after 2 steps, 3 requests"), "{name}: {said}");
        assert_eq!(
            out.mock_log.len(),
            3,
            "{name}: nothing past the budget was sent"
        );
    }
}
