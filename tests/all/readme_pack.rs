//! The README's pack ("Writing a pack") is a real one: the README shows
//! exactly the source of `crates/test-programs/src/bin/readme_pack.rs`,
//! which the build compiles into a component, and it does what the README
//! says it does.

use callai_engine::HostConfig;
use callai_tests::{pack, run};
use serde_json::json;

/// The text of `text` between the line `start` and the next line `end`.
fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let from = text.find(start).unwrap_or_else(|| panic!("no {start:?}")) + start.len();
    let to = from + text[from..].find(end).expect("an end marker");
    &text[from..to]
}

#[test]
fn the_readme_shows_the_pack_that_is_built() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let program = std::fs::read_to_string(format!(
        "{root}/crates/test-programs/src/bin/readme_pack.rs"
    ))
    .unwrap();
    let shown = between(&readme, "```rust,ignore\nuse callai_sdk", "```");
    let built = between(
        &program,
        "// README: begin\nuse callai_sdk",
        "// README: end",
    );
    assert_eq!(
        shown, built,
        "the README's pack and readme_pack.rs have drifted apart"
    );
    // What it uses, its Cargo.toml lists.
    let manifest = between(&readme, "[dependencies]\n", "```");
    for dependency in ["callai-sdk", "serde", "serde_json", "log"] {
        assert!(
            manifest.contains(&format!("\n{dependency} ")) || manifest.starts_with(dependency),
            "the README's Cargo.toml lacks {dependency}"
        );
    }
}

#[test]
fn the_readme_pack_counts_its_requests_and_logs_them() {
    let scene = json!({"scene": "a quiet harbour"}).to_string();
    let out = run(
        &pack("readme_pack"),
        HostConfig::default(),
        &json!([{"content": scene, "outputTokens": 7}]),
        &json!({"premise": "a harbour at dusk"}).to_string(),
    );
    assert_eq!(
        out.ok(),
        &json!({"scene": {"scene": "a quiet harbour"}, "requests": 1})
    );
    let logged: Vec<_> = out
        .events_named("pack.log")
        .iter()
        .map(|e| e["message"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(logged, ["the scene took 1 requests"]);
}

#[test]
fn the_readme_pack_turns_host_retries_off_where_the_host_honours_it() {
    // A reply that breaks the schema, then one that would pass: with host
    // retries off, the second is never asked for and the call fails.
    let out = run(
        &pack("readme_pack"),
        HostConfig::default(),
        &json!([
            {"content": json!({"title": "no scene"}).to_string(), "outputTokens": 4},
            {"content": json!({"scene": "a quiet harbour"}).to_string(), "outputTokens": 7}
        ]),
        &json!({"premise": "a harbour at dusk"}).to_string(),
    );
    assert_eq!(out.mock_log.len(), 1, "one request: retries were off");
    let error = out
        .output
        .expect_err("the schema violation is the pack's error");
    assert!(
        error.to_string().contains("schema"),
        "the error says what went wrong: {error}"
    );
}

/// The SDK pages' tool loops are lines of the research examples, in order
/// (those packs are built and run by `bookai_research`): the page may leave
/// lines out, never change or add one.
#[test]
fn the_sdk_pages_tool_examples_are_the_research_packs_lines() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    for (page, fence, path) in [
        (
            "sdk-typescript.md",
            "```ts\n",
            "examples/bookai-research-ts/src/index.ts",
        ),
        (
            "sdk-python.md",
            "```python\n",
            "examples/bookai-research-py/app.py",
        ),
    ] {
        let text = std::fs::read_to_string(format!("{root}/docs/src/{page}")).unwrap();
        let section = &text[text.find("## A tool loop").expect("a tool loop section")..];
        let shown = between(section, fence, "```");
        let source = std::fs::read_to_string(format!("{root}/{path}")).unwrap();
        let mut lines = source.lines().map(str::trim);
        for line in shown.lines().map(str::trim).filter(|l| !l.is_empty()) {
            assert!(
                lines.any(|l| l == line),
                "{page}'s tool example shows `{line}`, which {path} does not have (in that order)"
            );
        }
    }
}
