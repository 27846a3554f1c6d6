//! The fixture the conformance scenario runs names the node this build
//! bundles; the schema the facet is checked against is the spec's.

use serde_json::Value;
use std::path::{Path, PathBuf};

#[test]
fn the_fixture_lists_the_bundled_node() {
    let pack: Value = serde_json::from_str(include_str!(
        "../fixtures/conformance-callai-attempt-accounting/pack.json"
    ))
    .unwrap();
    let node = pack["nodes"][0]["id"].as_str().unwrap();
    let example = callai_examples::example("echo-attempts").unwrap();
    assert_eq!(node, example.node_id);
    assert_eq!(node, callai_conformance::NODE_ID);
}

#[test]
fn the_hosts_facet_schema_is_the_specs() {
    let kept: Value = serde_json::from_str(callai_engine::facet::SCHEMA).unwrap();
    let spec: Value =
        serde_json::from_str(include_str!("../../spec/aiProviders.schema.json")).unwrap();
    assert_eq!(kept, spec);
}

/// Every `callai.wit` in the repository (build output and installed
/// packages aside), relative to its root.
fn wit_copies(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy();
            if path.is_dir() {
                if !matches!(&*name, "target" | "node_modules" | ".git") {
                    dirs.push(path);
                }
            } else if name == "callai.wit" {
                found.push(path.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    found.sort();
    found
}

#[test]
fn every_copy_of_the_wit_is_the_canonical_one() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let canonical = std::fs::read_to_string(root.join("wit/callai.wit")).unwrap();
    let copies = wit_copies(root);
    // wit/ itself, the host, and the Rust, TypeScript and Python SDKs.
    assert_eq!(copies.len(), 5, "{copies:?}");
    for copy in &copies {
        let text = std::fs::read_to_string(root.join(copy)).unwrap();
        assert!(
            text == canonical,
            "{} differs from wit/callai.wit: copy wit/callai.wit over it",
            copy.display()
        );
    }
}
