//! Record and replay through the `callai` command: attempts replay exactly,
//! divergence is caught, and nothing is lost when a run is killed.

use crate::cli::callai;
use callai_engine::runlog::{RecordedRun, RunStatus};
use callai_engine::{RunLog, RunLogError};
use callai_runlog_sqlite::SqliteRunLog;
use callai_test_programs_artifacts as test_programs;
use callai_tests::fake_server::{FakeServer, Reply};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Self {
        Self(tempfile::tempdir().unwrap())
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
    fn file(&self, name: &str, text: &str) -> String {
        std::fs::write(self.path(name), text).unwrap();
        self.s(name)
    }
    fn s(&self, name: &str) -> String {
        self.path(name).to_str().unwrap().to_owned()
    }
}

/// Loads a run from an SQLite run log, as a synchronous test does.
fn load(path: &Path, run_id: &str) -> Result<RecordedRun, RunLogError> {
    let log = SqliteRunLog::open_existing(path)?;
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(log.load(run_id.into()))
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

const SEED: &str = r#"[{"content": "{\"scene\": \"it was", "finishReason": "length", "outputTokens": 5000},
                      {"content": "{\"scene\": \"ok\"}", "finishReason": "stop", "outputTokens": 1800}]"#;
const SEED_REQUEST: &str = r#"{"messages":[{"role":"user","content":"scene"}],"maxTokens":2000,
                              "responseSchema":{"type":"object","required":["scene"]}}"#;

#[test]
fn a_replay_returns_the_recorded_attempts_byte_for_byte_with_no_request() {
    let d = Dir::new();
    let script = d.file("seed.json", SEED);
    let log = d.s("runs.db");
    let recorded = callai(&[
        "run",
        "echo-attempts",
        "--input",
        SEED_REQUEST,
        "--script",
        &script,
        "--record",
        &log,
        "--run-id",
        "seed",
        "--events",
        &d.s("rec.jsonl"),
    ]);
    assert!(recorded.status.success());
    let out: Value = serde_json::from_slice(&recorded.stdout).unwrap();
    assert_eq!(out["attempts"]["count"], 2);

    let empty = d.file("empty.json", "[]");
    let replayed = callai(&[
        "run",
        "echo-attempts",
        "--input",
        SEED_REQUEST,
        "--script",
        &empty,
        "--replay",
        &log,
        "--run-id",
        "seed",
        "--events",
        &d.s("rep.jsonl"),
        "--mock-log",
        &d.s("mock.jsonl"),
    ]);
    assert!(
        replayed.status.success(),
        "{}",
        String::from_utf8_lossy(&replayed.stderr)
    );
    assert_eq!(replayed.stdout, recorded.stdout, "byte for byte");
    assert!(
        lines(&d.path("mock.jsonl")).is_empty(),
        "no provider request on replay"
    );
    assert_eq!(
        lines(&d.path("rep.jsonl")),
        lines(&d.path("rec.jsonl")),
        "the same events"
    );

    // The log holds the call's outcome with its attempts.
    let run = load(&d.path("runs.db"), "seed").unwrap();
    assert_eq!(run.status, RunStatus::Ok);
    let outcome = serde_json::to_value(&run.calls[0].outcome).unwrap();
    assert_eq!(outcome["result"]["attempts"]["outputTokens"], 3800);
}

#[test]
fn a_replayed_failed_call_fails_the_same_way_with_the_same_events() {
    let d = Dir::new();
    let script = d.file("seed.json", SEED);
    let request = r#"{"messages":[{"role":"user","content":"s"}],"maxTokens":2000,
                      "responseSchema":{"type":"object"},"retry":{"maxAttempts":1}}"#;
    let log = d.s("runs.db");
    let rec = callai(&[
        "run",
        "echo-attempts",
        "--input",
        request,
        "--script",
        &script,
        "--record",
        &log,
        "--run-id",
        "r",
        "--events",
        &d.s("rec.jsonl"),
    ]);
    let rep = callai(&[
        "run",
        "echo-attempts",
        "--input",
        request,
        "--replay",
        &log,
        "--run-id",
        "r",
        "--events",
        &d.s("rep.jsonl"),
    ]);
    assert_eq!(rep.stdout, rec.stdout);
    let out: Value = serde_json::from_slice(&rep.stdout).unwrap();
    assert_eq!(out["error"]["code"], "envelope_truncation_unrecoverable");
    let events = lines(&d.path("rep.jsonl"));
    assert_eq!(events, lines(&d.path("rec.jsonl")));
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "envelope.retry.exhausted" && e["payload"]["totalAttempts"] == 1)
    );
}

#[test]
fn a_different_request_diverges_and_fails_the_run() {
    let d = Dir::new();
    let log = d.s("runs.db");
    let rec = callai(&["run", "echo-attempts", "--record", &log, "--run-id", "r"]);
    assert!(rec.status.success());
    let other = r#"{"messages":[{"role":"user","content":"something else"}]}"#;
    let rep = callai(&[
        "run",
        "echo-attempts",
        "--input",
        other,
        "--replay",
        &log,
        "--run-id",
        "r",
        "--events",
        &d.s("ev.jsonl"),
        "--mock-log",
        &d.s("mock.jsonl"),
    ]);
    assert_eq!(rep.status.code(), Some(1));
    assert!(rep.stdout.is_empty(), "no invented result");
    let err: Value = super::cli::stderr_json(&rep);
    assert_eq!(err["error"]["kind"], "replay_diverged");
    assert!(err["error"]["message"].as_str().unwrap().contains("call 0"));
    let diverged: Vec<Value> = lines(&d.path("ev.jsonl"))
        .into_iter()
        .filter(|e| e["type"] == "replay.diverged")
        .collect();
    assert_eq!(diverged.len(), 1);
    assert_eq!(diverged[0]["payload"]["callIndex"], 0);
    assert!(lines(&d.path("mock.jsonl")).is_empty(), "never live");
}

#[test]
fn more_or_fewer_calls_than_recorded_diverge() {
    let d = Dir::new();
    let script = d.file("s.json", &json!([{"content": "a", "outputTokens": 1}, {"content": "b", "outputTokens": 1}, {"content": "c"}]).to_string());
    let log = d.s("runs.db");
    let rec = callai(&[
        "run",
        test_programs::MULTI_CALL,
        "--input",
        r#"{"calls": 2}"#,
        "--script",
        &script,
        "--record",
        &log,
        "--run-id",
        "two",
    ]);
    assert!(
        rec.status.success(),
        "{}",
        String::from_utf8_lossy(&rec.stderr)
    );
    let same = callai(&[
        "run",
        test_programs::MULTI_CALL,
        "--input",
        r#"{"calls": 2}"#,
        "--replay",
        &log,
        "--run-id",
        "two",
    ]);
    assert_eq!(same.stdout, rec.stdout);
    for (calls, needle) in [("3", "call 2 was not recorded"), ("1", "made 1 calls")] {
        let input = format!(r#"{{"calls": {calls}}}"#);
        let rep = callai(&[
            "run",
            test_programs::MULTI_CALL,
            "--input",
            &input,
            "--replay",
            &log,
            "--run-id",
            "two",
        ]);
        assert_eq!(rep.status.code(), Some(1));
        let err: Value = super::cli::stderr_json(&rep);
        assert_eq!(err["error"]["kind"], "replay_diverged");
        assert!(
            err["error"]["message"].as_str().unwrap().contains(needle),
            "{err}"
        );
    }
}

#[test]
fn recording_into_an_existing_run_is_refused_unless_asked() {
    let d = Dir::new();
    let log = d.s("runs.db");
    assert!(
        callai(&["run", "echo-attempts", "--record", &log, "--run-id", "r"])
            .status
            .success()
    );
    let again = callai(&["run", "echo-attempts", "--record", &log, "--run-id", "r"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already recorded"));
    let forced = callai(&[
        "run",
        "echo-attempts",
        "--record",
        &log,
        "--run-id",
        "r",
        "--overwrite",
    ]);
    assert!(forced.status.success());
}

#[test]
fn a_foreign_or_corrupt_log_is_a_clear_error_and_left_untouched() {
    let d = Dir::new();
    let text = d.file("notes.txt", "my notes, not a database\n");
    let mut corrupt = b"SQLite format 3\0".to_vec();
    corrupt.extend(std::iter::repeat_n(0x5Au8, 4096));
    std::fs::write(d.path("corrupt.db"), &corrupt).unwrap();
    for (path, flag, needle) in [
        (&text, "--record", "not a callai run log"),
        (&text, "--replay", "not a callai run log"),
        (&d.s("corrupt.db"), "--record", "corrupt"),
        (&d.s("absent.db"), "--replay", "does not exist"),
    ] {
        let before = std::fs::read(path).ok();
        let out = callai(&["run", "echo-attempts", flag, path, "--run-id", "r"]);
        assert_eq!(out.status.code(), Some(2), "{flag} {path}");
        let err: Value = super::cli::stderr_json(&out);
        assert!(
            err["error"]["message"].as_str().unwrap().contains(needle),
            "{err}"
        );
        assert_eq!(std::fs::read(path).ok(), before, "{path} was changed");
    }
}

/// Starts `callai run multi_call` recording into `log` under `run_id`, as a
/// child process this test can kill.
fn spawn_recording(input: &str, script: &str, config: &str, log: &Path, run_id: &str) -> Child {
    crate::callai_command()
        .args([
            "run",
            test_programs::MULTI_CALL,
            "--input",
            input,
            "--script",
            script,
            "--config",
            config,
            "--record",
            log.to_str().unwrap(),
            "--run-id",
            run_id,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Polls the log until `ready` holds for the recorded run (a run not yet
/// begun, or a log not yet created, reads as `None`); fails after a minute.
fn wait_for(log: &Path, run_id: &str, what: &str, ready: impl Fn(Option<&RecordedRun>) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let run = load(log, run_id).ok();
        if ready(run.as_ref()) {
            return;
        }
        assert!(Instant::now() < deadline, "the child never {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_run_killed_between_calls_leaves_a_log_that_replays_up_to_its_last_call() {
    let d = Dir::new();
    let replies: Vec<Value> = (0..40)
        .map(|i| json!({"content": format!("answer {i}"), "outputTokens": 3}))
        .collect();
    let script = d.file("s.json", &Value::from(replies).to_string());
    let config = d.file("slow.toml", "[mock]\nlatencyMs = 150\n");
    let log_path = d.path("runs.db");
    let input = r#"{"calls": 40}"#;
    let mut child = spawn_recording(input, &script, &config, &log_path, "killed");
    // Wait until at least two calls are committed, then kill -9.
    wait_for(&log_path, "killed", "committed two calls", |run| {
        run.is_some_and(|r| r.calls.len() >= 2)
    });
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let run = load(&log_path, "killed").unwrap();
    assert_eq!(run.status, RunStatus::Running, "killed before it finished");
    let n = run.calls.len();
    assert!((2..40).contains(&n), "{n} calls committed");
    let indices: Vec<u32> = run.calls.iter().map(|c| c.index).collect();
    assert_eq!(
        indices,
        (0..n as u32).collect::<Vec<_>>(),
        "contiguous, none half-written"
    );

    let rep = callai(&[
        "run",
        test_programs::MULTI_CALL,
        "--input",
        input,
        "--replay",
        log_path.to_str().unwrap(),
        "--run-id",
        "killed",
        "--events",
        &d.s("ev.jsonl"),
        "--mock-log",
        &d.s("mock.jsonl"),
    ]);
    assert_eq!(rep.status.code(), Some(1));
    let err: Value = super::cli::stderr_json(&rep);
    let expected = format!("call {n} was not recorded");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&expected),
        "{err}"
    );
    let usage = lines(&d.path("ev.jsonl"))
        .iter()
        .filter(|e| e["type"] == "provider.usage")
        .count();
    assert_eq!(usage, n, "every committed call replayed with its events");
    assert!(lines(&d.path("mock.jsonl")).is_empty());
}

#[test]
fn a_run_killed_during_a_call_leaves_a_log_without_that_call() {
    // A provider on loopback that answers the first call at once and holds
    // the second: the test kills the host once that request has arrived.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let answer = || {
        Reply::ok(
            json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "a"},
                                      "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": 1}}),
        )
    };
    let fake = rt.block_on(FakeServer::start(vec![
        answer(),
        Reply::Delay(Duration::from_secs(60), Box::new(answer())),
    ]));
    let d = Dir::new();
    let script = d.file("s.json", "[]");
    let config = d.file(
        "fake.toml",
        &format!(
            "[defaults]\nprovider = \"local\"\n[providers.local]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"\"\n",
            fake.url()
        ),
    );
    let log_path = d.path("runs.db");
    let mut child = spawn_recording(r#"{"calls": 2}"#, &script, &config, &log_path, "mid");
    let deadline = Instant::now() + Duration::from_secs(60);
    while fake.received().len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the second request never arrived"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap(); // SIGKILL, with the second call in flight
    child.wait().unwrap();
    let run = load(&log_path, "mid").unwrap();
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(
        run.calls.len(),
        1,
        "the first call was committed, the call in flight never was"
    );
    let rep = callai(&[
        "run",
        test_programs::MULTI_CALL,
        "--input",
        r#"{"calls": 2}"#,
        "--replay",
        log_path.to_str().unwrap(),
        "--run-id",
        "mid",
    ]);
    let err: Value = super::cli::stderr_json(&rep);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("call 1 was not recorded"),
        "{err}"
    );
    assert_eq!(fake.received().len(), 2, "replay sent nothing");
}
