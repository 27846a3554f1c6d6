//! The fixture the conformance scenario runs names the node this build
//! bundles; the schema the facet is checked against is the spec's.

use serde_json::Value;

#[test]
fn the_fixture_lists_the_bundled_node() {
    let pack: Value = serde_json::from_str(include_str!(
        "../fixtures/conformance-callai-attempt-accounting/pack.json"
    ))
    .unwrap();
    let node = pack["nodes"][0]["id"].as_str().unwrap();
    let example = callai_cli::example("echo-attempts").unwrap();
    assert_eq!(node, example.node_id);
    assert_eq!(node, callai_conformance::NODE_ID);
}

#[test]
fn the_hosts_facet_schema_is_the_specs() {
    let kept: Value = serde_json::from_str(callai_host::facet::SCHEMA).unwrap();
    let spec: Value =
        serde_json::from_str(include_str!("../../spec/aiProviders.schema.json")).unwrap();
    assert_eq!(kept, spec);
}

#[test]
fn every_crate_that_needs_the_wit_carries_the_same_one() {
    let canonical = include_str!("../../wit/callai.wit");
    for (crate_name, copy) in [
        (
            "callai-host",
            include_str!("../../crates/host/wit/callai.wit"),
        ),
        ("callai-sdk", include_str!("../../guest-sdk/wit/callai.wit")),
    ] {
        assert_eq!(
            copy, canonical,
            "{crate_name}'s wit/callai.wit differs from wit/callai.wit"
        );
    }
}
