//! The README's embedding example is the crate `examples/embedding`: the
//! README shows its code verbatim, and it does what the README says.

use serde_json::Value;

#[test]
fn the_readme_shows_the_embedding_example_that_is_built() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let source = std::fs::read_to_string(format!("{root}/examples/embedding/src/lib.rs")).unwrap();
    let begin = "    // README: begin\n";
    let from = source.find(begin).unwrap() + begin.len();
    let to = source.find("    // README: end").unwrap();
    let code: String = source[from..to]
        .lines()
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        readme.contains(&code),
        "the README's embedding example and examples/embedding/src/lib.rs have drifted apart:\n{code}"
    );
}

#[tokio::test]
async fn the_embedding_example_counts_both_attempts() {
    let out = callai_embedding_example::run_pack().await.unwrap();
    let output: Value = serde_json::from_str(out.result.as_ref().unwrap()).unwrap();
    assert_eq!(output["attempts"]["count"], 2);
    assert_eq!(output["attempts"]["outputTokens"], 3800);
    assert_eq!(output["usage"]["outputTokens"], 1800);
    assert_eq!(out.calls, 1);
}
