//! The facet validates against the aiProviders schema, which this project
//! keeps in step with the shared reference.

use callai_host::{HostConfig, facet};
use serde_json::Value;
use std::path::Path;

fn schema() -> Value {
    let text = include_str!("../../host/schema/aiProviders.schema.json");
    serde_json::from_str(text).unwrap()
}

#[test]
fn the_facet_validates_against_the_schema_for_every_flag_setting() {
    let validator = jsonschema::validator_for(&schema()).unwrap();
    for (attempts, retry_policy) in [(true, true), (true, false), (false, true), (false, false)] {
        let mut config = HostConfig::default();
        config.call_accounting.attempts = attempts;
        config.call_accounting.retry_policy = retry_policy;
        let f = facet::ai_providers(&config);
        let errors: Vec<String> = validator.iter_errors(&f).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{f}: {errors:?}");
        assert_eq!(f["callAccounting"]["attempts"], attempts);
        assert_eq!(f["callAccounting"]["retryPolicy"], retry_policy);
    }
    // The schema rejects what RFC 0248 §C forbids: an unknown callAccounting key.
    let bad =
        serde_json::json!({"providers": [], "callAccounting": {"attempts": true, "tokens": true}});
    assert!(!validator.is_valid(&bad));
}

#[test]
fn the_kept_schema_matches_the_shared_reference() {
    let reference =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/spec/aiProviders.schema.json");
    // The shared spec sits beside the checkout on developer and CI machines.
    let Ok(text) = std::fs::read_to_string(&reference) else {
        panic!(
            "the shared reference schema is missing at {}",
            reference.display()
        );
    };
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), schema());
}

#[test]
fn the_fixture_lists_the_bundled_node() {
    let pack: Value = serde_json::from_str(include_str!(
        "../fixtures/conformance-callai-attempt-accounting/pack.json"
    ))
    .unwrap();
    let node = pack["nodes"][0]["id"].as_str().unwrap();
    let example = callai_host::bundled::example("echo-attempts").unwrap();
    assert_eq!(node, example.node_id);
    assert_eq!(node, callai_host::conformance::NODE_ID);
}
