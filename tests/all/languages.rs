//! The Book AI pack in Rust, TypeScript and Python, side by side on the same
//! scripts and inputs: the same estimate, the same spend, the same refusal;
//! and the conformance node in TypeScript passes the scenario. A machine
//! without node or python3 skips that language's packs (the build says so
//! in one line); under CI every pack is built and run.

use callai_conformance::{self as conformance, HostTarget, LegOutcome};
use callai_engine::{Host, HostConfig, RunError};
use callai_tests::bookai::{input, script};
use callai_tests::{pack, run};
use serde_json::{Value, json};

const LANGUAGES: [&str; 3] = ["bookai-scene", "bookai-scene-ts", "bookai-scene-py"];

/// The packs this build bundles; a missing one is skipped, except under CI.
fn bundled(names: &[&'static str]) -> Vec<&'static str> {
    names
        .iter()
        .copied()
        .filter(|name| {
            let there = callai_examples::example(name).is_some();
            if !there {
                assert!(std::env::var_os("CI").is_none(), "{name} is not bundled, and CI builds every pack");
                eprintln!("skipped: {name} is not bundled (its language's toolchain was missing at build time)");
            }
            there
        })
        .collect()
}

#[test]
fn the_book_ai_pack_spends_the_same_in_every_language() {
    let packs = bundled(&LANGUAGES);
    // The README's table: calls, requests, output tokens.
    let rows = [
        ("clean", false, (1, 1, 420)),
        ("clean", true, (1, 1, 420)),
        ("truncation", false, (3, 3, 3250)),
        ("truncation", true, (2, 3, 3250)),
    ];
    for (script_name, host_retries, (calls, requests, tokens)) in rows {
        let mut seen = Vec::new();
        for name in &packs {
            let out = run(
                &pack(name),
                HostConfig::default(),
                &script(script_name),
                &input(host_retries, 4),
            );
            let v = out.ok().clone();
            assert_eq!(
                v["spent"],
                json!({"calls": calls, "requests": requests, "outputTokens": tokens, "outputTokensIsFloor": false}),
                "{name} on {script_name}, host retries {host_retries}"
            );
            assert_eq!(
                out.mock_log.len(),
                requests,
                "{name}: what the provider saw"
            );
            seen.push((name, v));
        }
        let (first, reference) = &seen[0];
        for (name, v) in &seen[1..] {
            for key in ["estimate", "spent", "scene", "hostRetries"] {
                assert_eq!(v[key], reference[key], "{name} vs {first}: {key}");
            }
        }
    }
}

#[test]
fn the_book_ai_pack_refuses_max_calls_2_the_same_way_in_every_language() {
    let mut seen = Vec::new();
    for name in bundled(&LANGUAGES) {
        let out = run(
            &pack(name),
            HostConfig::default(),
            &script("truncation"),
            &input(true, 2),
        );
        let message = match &out.output {
            Err(RunError::Node(m)) => m.clone(),
            other => panic!("{name}: expected a refusal, got {other:?}"),
        };
        let v: Value =
            serde_json::from_str(&message).unwrap_or_else(|e| panic!("{name}: {e}: {message}"));
        assert_eq!(
            v["error"],
            "budget maxRequests = 2 would be exceeded: 2 spent, the next call needs 1 more",
            "{name}"
        );
        assert_eq!(out.mock_log.len(), 2, "{name}: the repair was never sent");
        seen.push(v);
    }
    for v in &seen[1..] {
        assert_eq!(v, &seen[0]);
    }
}

#[test]
fn the_conformance_node_in_typescript_passes_every_leg() {
    for name in bundled(&["echo-attempts-ts"]) {
        let host = Host::builder(HostConfig::default()).build().unwrap();
        let report = conformance::run(&HostTarget::new(pack(name), host).unwrap());
        assert!(!report.failed(), "{}", report.table());
        let (pass, _, skip, blocked) = report.tally();
        assert_eq!((skip, blocked), (0, 0), "{}", report.table());
        assert!(pass >= 22);
        assert!(
            report
                .legs()
                .iter()
                .all(|l| matches!(l.outcome, LegOutcome::Judged { .. }))
        );
    }
}

/// Issue 36 #3: a Python node's failure names the exception's type and
/// where it was raised (it said only the exception's text), and its whole
/// traceback is in the run's events.
#[test]
fn a_python_nodes_exception_says_its_type_and_where_it_was_raised() {
    let Some(name) = bundled(&["bookai-scene-py"]).first().copied() else {
        return;
    };
    let input = json!({"premise": "A lighthouse.", "maxCalls": "two"}).to_string();
    let out = run(&pack(name), HostConfig::default(), &script("clean"), &input);
    let message = match &out.output {
        Err(RunError::Node(m)) => m.clone(),
        other => panic!("expected the node to fail, got {other:?}"),
    };
    assert!(
        message.starts_with("ValueError: input.maxCalls must be an integer (raised at app.py:"),
        "{message}"
    );
    assert!(message.contains(" in whole"), "{message}");
    let traceback = out.events.iter().find_map(|e| match e {
        callai_engine::Event::PackLog { level, message, .. } if level == "error" => Some(message),
        _ => None,
    });
    let traceback = traceback.expect("the traceback is logged");
    assert!(
        traceback.starts_with("Traceback (most recent call last):")
            && traceback.contains("ValueError"),
        "{traceback}"
    );
}
