//! The `callai` command as a user runs it.

use serde_json::{Value, json};
use std::path::Path;
use std::process::Output;

pub(crate) fn callai(args: &[&str]) -> Output {
    crate::callai_command()
        .args(args)
        .output()
        .expect("callai runs")
}

pub(crate) fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

fn stdout_json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "callai failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

/// The error a failed command printed: the last line of its stderr (the
/// pack's log lines, JSON objects too, come before it).
pub(crate) fn stderr_json(out: &Output) -> Value {
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("stderr ends in no JSON ({e}): {text}"))
}

#[test]
fn run_echo_attempts_prints_content_usage_and_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(
        dir.path(),
        "s.json",
        r#"[{"content": "Hi there", "finishReason": "stop", "outputTokens": 3, "inputTokens": 2}]"#,
    );
    let events = dir.path().join("events.jsonl");
    let mock_log = dir.path().join("mock.jsonl");
    let out = callai(&[
        "run",
        "echo-attempts",
        "--input",
        r#"{"messages":[{"role":"user","content":"hi"}]}"#,
        "--script",
        &script,
        "--events",
        events.to_str().unwrap(),
        "--mock-log",
        mock_log.to_str().unwrap(),
    ]);
    let v = stdout_json(&out);
    assert_eq!(v["content"], "Hi there");
    assert_eq!(v["usage"]["outputTokens"], 3);
    assert_eq!(v["attempts"]["count"], 1);
    let events = std::fs::read_to_string(events).unwrap();
    let first: Value = serde_json::from_str(events.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "provider.usage");
    assert_eq!(
        first["payload"]["nodeId"],
        "conformance.callai.echo-attempts"
    );
    let log = std::fs::read_to_string(mock_log).unwrap();
    let line: Value = serde_json::from_str(log.trim()).unwrap();
    assert_eq!(line, json!({"maxTokens": 4000, "messages": 1}));
}

#[test]
fn the_demo_runs_with_no_flags_on_the_built_in_mock() {
    // The README's demo: exactly what it prints.
    assert_eq!(
        stdout_json(&callai(&["run", "echo-attempts"])),
        json!({"attempts": {"count": 1, "outputTokens": 9, "usageComplete": true},
               "content": "Hello from the built-in mock provider.", "finishReason": "stop",
               "usage": {"inputTokens": 12, "outputTokens": 9, "totalTokens": 21}})
    );
    // summarize's own script truncates once at its 400-token budget.
    let v = stdout_json(&callai(&["run", "summarize"]));
    assert_eq!(
        v["summary"],
        "A lighthouse keeper finds a message in a bottle."
    );
    assert_eq!(v["keyPoints"], json!(["lighthouse", "bottle", "message"]));
    assert_eq!(
        v["spent"],
        json!({"requests": 2, "outputTokens": 431, "usageComplete": true})
    );
    let v = stdout_json(&callai(&["run", "bookai-scene"]));
    assert_eq!(
        v["spent"],
        json!({"calls": 1, "requests": 1, "outputTokens": 420, "outputTokensIsFloor": false})
    );
    assert_eq!(v["scene"]["mood"], "tense");
    let listed = String::from_utf8(callai(&["examples"]).stdout).unwrap();
    for line in [
        "bookai-scene",
        "echo-attempts",
        "summarize",
        "conformance.callai.echo-attempts",
    ] {
        assert!(listed.contains(line), "{listed}");
    }
}

#[test]
fn a_trapping_component_file_exits_non_zero_with_a_json_error() {
    let out = callai(&["run", callai_test_programs_artifacts::TRAP, "--input", "x"]);
    assert_eq!(out.status.code(), Some(1));
    // Its panic message went to its stderr: a log line before the error.
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    let (error, logs) = lines.split_last().expect("an error");
    assert_eq!(error["error"]["kind"], "trap");
    assert!(
        logs.iter().any(|l| l["log"]["level"] == "warn"
            && l["log"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("this pack traps on purpose"))),
        "{logs:?}"
    );
    let quiet = callai(&[
        "run",
        callai_test_programs_artifacts::TRAP,
        "--input",
        "x",
        "--log",
        "off",
    ]);
    assert_eq!(stderr_json(&quiet)["error"]["kind"], "trap");
}

#[test]
fn output_that_is_not_json_is_printed_as_an_escaped_string() {
    let out = callai(&["run", callai_test_programs_artifacts::RAW_OUTPUT]);
    assert!(out.status.success());
    assert!(
        !out.stdout.contains(&0x1b) && !out.stdout.contains(&0x07),
        "raw control bytes reached the terminal"
    );
    assert_eq!(
        stdout_json(&out),
        json!("\u{1b}[2J\u{1b}[31mred alert\u{1b}[0m\u{7}")
    );
}

#[test]
fn bad_inputs_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let bad_script = write(dir.path(), "bad.json", r#"[{"content": 1}]"#);
    let bad_config = write(dir.path(), "bad.toml", "[retry]\nmaxRetryAttempts = 99\n");
    let missing = dir.path().join("missing.wasm").display().to_string();
    let text = write(dir.path(), "notes.wasm", "these are notes, not wasm\n");
    // The preamble of a core module (version 1), as `cargo build --target
    // wasm32-unknown-unknown` makes, not a component.
    let module = dir.path().join("module.wasm");
    std::fs::write(&module, b"\0asm\x01\0\0\0").unwrap();
    let module = module.display().to_string();
    let empty = write(dir.path(), "empty.toml", "[retry]\nmaxRetries = 3\n");
    let keyless = write(
        dir.path(),
        "keyless.toml",
        "[providers.openai]\napiKeyEnv = \"CALLAI_CLI_TEST_NO_SUCH_VARIABLE\"\n",
    );
    for (args, needle) in [
        (
            vec!["run", "echo-attempts", "--config", &keyless],
            "CALLAI_CLI_TEST_NO_SUCH_VARIABLE",
        ),
        // A missing key stops every subcommand at start-up, not only `run`.
        (
            vec!["facet", "--config", &keyless],
            "CALLAI_CLI_TEST_NO_SUCH_VARIABLE",
        ),
        (
            vec!["conformance", "--config", &keyless],
            "CALLAI_CLI_TEST_NO_SUCH_VARIABLE",
        ),
        (
            vec!["run", "no-such-pack"],
            "neither a component file nor a bundled example",
        ),
        (vec!["run", &missing], "No such file"),
        (vec!["run", &text], "not a WebAssembly file"),
        (
            vec!["run", &module],
            "build the pack for the wasm32-wasip2 target",
        ),
        (
            vec!["run", "echo-attempts", "--config", &empty],
            "maxRetries",
        ),
        (
            vec!["run", "echo-attempts", "--script", &bad_script],
            "entry 0",
        ),
        (
            vec!["run", "echo-attempts", "--config", &bad_config],
            "retry.maxRetryAttempts",
        ),
        (
            vec!["facet", "--config", &bad_config],
            "retry.maxRetryAttempts",
        ),
    ] {
        let out = callai(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let message = stderr_json(&out)["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(message.contains(needle), "{args:?}: {message}");
    }
}

#[test]
fn facet_reflects_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "h.toml",
        "[callAccounting]\nretryPolicy = false\n",
    );
    let v = stdout_json(&callai(&["facet", "--config", &config]));
    assert_eq!(
        v["aiProviders"]["callAccounting"],
        json!({"attempts": true, "retryPolicy": false})
    );
    // The printed facet validates against the project's facet schema.
    let schema: Value = serde_json::from_str(callai_engine::facet::SCHEMA).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&v["aiProviders"]), "{v}");
    let reliability = &v["capabilities"]["envelopes"]["reliability"];
    assert_eq!(reliability["maxRetryAttempts"], 3);
    assert_eq!(reliability["completion"]["truncationBudgetMultiplier"], 2);
    assert_eq!(reliability["completion"]["distinguishesTruncation"], true);
}

#[test]
fn conformance_passes_on_this_host_as_a_table_and_as_json() {
    let out = callai(&["conformance", "--json"]);
    let v = stdout_json(&out);
    assert_eq!(v["failed"], 0);
    assert_eq!(v["legs"].as_array().unwrap().len(), 8);
    if callai_examples::example("echo-attempts-ts").is_some() {
        // Compiled into the cache `callai run` uses, so it compiles once.
        let parent = tempfile::tempdir().unwrap();
        let cache = callai_tests::cache_sharing_functions(parent.path());
        let run = crate::callai_command()
            .args(["conformance", "--json", "--fixture", "echo-attempts-ts"])
            .env("CALLAI_CACHE_DIR", &cache)
            .output()
            .unwrap();
        let ts = stdout_json(&run);
        assert_eq!(
            (ts["failed"].as_u64(), ts["skipped"].as_u64()),
            (Some(0), Some(0)),
            "{ts}"
        );
        assert_eq!(
            callai_tests::compiled_components(&cache),
            1,
            "the fixture's compiled component is cached"
        );
    }
    let out = callai(&["conformance", "--fixture", "bookai-scene"]);
    assert_eq!(out.status.code(), Some(2), "not a conformance fixture");
    let table = String::from_utf8(callai(&["conformance"]).stdout).unwrap();
    assert!(
        table.contains("count-and-sum") && table.contains("clamp-and-refuse"),
        "{table}"
    );
}

/// Issue 22 #15: `callai run ... | head -1` ends quietly when the reader
/// goes away (it panicked on the broken pipe).
#[test]
fn a_reader_that_goes_away_is_no_panic() {
    for args in [&["run", "echo-attempts"][..], &["examples"], &["facet"]] {
        let mut child = crate::callai_command()
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    }
}

/// Issue 22 #13: a misspelt request field is named on stderr, with the
/// field it looks like, and in an event; the call goes on without it.
#[test]
fn a_misspelt_request_field_is_a_warning_naming_the_field_it_looks_like() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let out = callai(&[
        "run",
        "echo-attempts",
        "--input",
        r#"{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}"#,
        "--events",
        events.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let warning: Value = serde_json::from_slice(&out.stderr).expect("one JSON warning");
    assert_eq!(warning["warning"]["field"], "max_tokens");
    assert_eq!(warning["warning"]["didYouMean"], "maxTokens");
    let logged = std::fs::read_to_string(&events).unwrap();
    assert!(logged.contains("request.unknownFields"), "{logged}");
}

/// `docs/src/cli.md` says what the binary does: the `--lang` names of its
/// synopsis are the ones `callai new` takes, and the start-up banner it
/// shows counts the examples `callai examples` lists.
#[test]
fn the_cli_page_matches_the_binary() {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/src/cli.md"
    ))
    .unwrap();
    let synopsis = page
        .lines()
        .find(|line| line.starts_with("callai new --lang "))
        .expect("cli.md's synopsis shows `callai new`");
    let names = synopsis["callai new --lang ".len()..]
        .split(' ')
        .next()
        .unwrap();
    let help = String::from_utf8(callai(&["new", "--help"]).stdout).unwrap();
    for name in names.split('|') {
        assert!(
            help.contains(&format!("- {name}:")),
            "cli.md names --lang {name}, which `callai new --help` does not list:\n{help}"
        );
    }
    for long in ["typescript", "python"] {
        let dir = tempfile::tempdir().unwrap();
        let out = callai(&["new", "--lang", long, dir.path().to_str().unwrap()]);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!said.contains("invalid value"), "--lang {long}: {said}");
    }
    let listed = String::from_utf8(callai(&["examples"]).stdout).unwrap();
    let count = listed
        .lines()
        .filter(|line| !line.trim().is_empty())
        .count();
    assert!(
        page.contains(&format!("packs      {count} bundled examples")),
        "cli.md's banner should count the {count} examples `callai examples` lists"
    );
}
