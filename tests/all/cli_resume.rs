//! `callai run --resume`: a run killed with SIGKILL (between calls, or
//! during one) goes on from its run log. Committed calls are served from
//! the log; the provider sees only the requests not yet committed (the one
//! in flight when the host died is the one that can be sent again); the
//! output, and the Book AI pack's `spent`, equal an uninterrupted run's.
//! On SQLite and on PostgreSQL.

use crate::cli::callai;
use callai_test_programs_artifacts as test_programs;
use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::pg::PgCluster;
use serde_json::{Value, json};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

fn ok_json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "callai failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn err_message(out: &Output) -> String {
    assert!(!out.status.success(), "expected a failure");
    let v = super::cli::stderr_json(out);
    v["error"]["message"].as_str().unwrap().to_owned()
}

fn fake_config(dir: &std::path::Path, url: &str) -> String {
    let path = dir.join("fake.toml");
    std::fs::write(
        &path,
        format!(
            "[defaults]\nprovider = \"local\"\n[providers.local]\nkind = \"openai\"\nbaseUrl = \"{url}\"\napiKeyEnv = \"\"\nmodel = \"fake\"\n"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

/// A run log of each kind: an SQLite file, and a PostgreSQL database when
/// PostgreSQL is installed.
fn logs(dir: &std::path::Path) -> Vec<(String, Option<std::sync::Arc<PgCluster>>)> {
    let mut all = vec![(dir.join("runs.db").to_str().unwrap().to_owned(), None)];
    if let Some(cluster) = PgCluster::shared() {
        all.push((cluster.database(), Some(cluster)));
    }
    all
}

/// Starts `callai` with `args` in the background, for a test to kill.
fn spawn(args: &[&str]) -> std::process::Child {
    crate::callai_command()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The calls `run_id` has committed in the log at `url` (0 before it begins).
fn committed(url: &str, run_id: &str) -> usize {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let log =
            callai_config::open_runlog(url, callai_config::OpenLog::Existing, &Default::default())
                .await
                .ok()?;
        log.load(run_id.into()).await.ok().map(|r| r.calls.len())
    })
    .unwrap_or(0)
}

fn wait_until(what: &str, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn bookai_killed_during_a_call_resumes_to_the_same_output_and_spent() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (log, _cluster) in logs(dir.path()) {
        // The run as it goes when nothing dies.
        let whole = rt.block_on(FakeServer::start(
            callai_tests::fake_server::bookai_replies(),
        ));
        let config = fake_config(dir.path(), whole.url());
        let expected = ok_json(&callai(&[
            "run",
            "bookai-scene",
            "--config",
            &config,
            "--record",
            &log,
            "--run-id",
            "whole",
        ]));
        let n = whole.received().len();
        assert_eq!(n, 3, "the script is three calls");
        assert_eq!(expected["spent"]["calls"], 3, "{expected}");

        // The same run, killed with the second call in flight.
        let mut replies = callai_tests::fake_server::bookai_replies();
        let held = Reply::Delay(Duration::from_secs(120), Box::new(replies[1].clone()));
        replies.insert(1, held);
        let fake = rt.block_on(FakeServer::start(replies));
        let config = fake_config(dir.path(), fake.url());
        let mut child = spawn(&[
            "run",
            "bookai-scene",
            "--config",
            &config,
            "--record",
            &log,
            "--run-id",
            "killed",
        ]);
        wait_until("the second request", || fake.received().len() >= 2);
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        // Replay says where the run stopped: one call committed.
        let replay = callai(&[
            "run",
            "bookai-scene",
            "--replay",
            &log,
            "--run-id",
            "killed",
        ]);
        assert!(
            err_message(&replay).contains("call 1 was not recorded"),
            "{log}"
        );

        let resumed = ok_json(&callai(&[
            "run",
            "bookai-scene",
            "--config",
            &config,
            "--resume",
            &log,
            "--run-id",
            "killed",
        ]));
        assert_eq!(
            resumed, expected,
            "{log}: the same output, `spent` included"
        );
        // The first call was served from the log; the provider saw the
        // call in flight twice (once from the dead host) and the rest once.
        let received = fake.received();
        assert_eq!(received.len(), n + 1, "{log}");
        assert_eq!(
            received[1].body, received[2].body,
            "the repeated request is the one in flight"
        );

        it_is_finished(&log, &expected);
    }
}

/// The resumed run finished: it replays in full, and resuming it again is
/// refused.
fn it_is_finished(log: &str, expected: &Value) {
    let replayed = ok_json(&callai(&[
        "run",
        "bookai-scene",
        "--replay",
        log,
        "--run-id",
        "killed",
    ]));
    assert_eq!(&replayed, expected);
    let again = callai(&["run", "bookai-scene", "--resume", log, "--run-id", "killed"]);
    assert!(err_message(&again).contains("has finished"), "{log}");
}

#[test]
fn a_run_killed_mid_run_resumes_asking_only_for_the_calls_not_committed() {
    let dir = tempfile::tempdir().unwrap();
    let replies: Vec<Value> = (0..12)
        .map(|i| json!({"content": format!("answer {i}"), "outputTokens": i + 1}))
        .collect();
    let script = dir.path().join("s.json");
    std::fs::write(&script, Value::from(replies).to_string()).unwrap();
    let slow = dir.path().join("slow.toml");
    std::fs::write(&slow, "[mock]\nlatencyMs = 100\n").unwrap();
    let (script, slow) = (script.to_str().unwrap(), slow.to_str().unwrap());
    let input = r#"{"calls": 12}"#;
    for (log, _cluster) in logs(dir.path()) {
        let expected = ok_json(&callai(&[
            "run",
            test_programs::MULTI_CALL,
            "--input",
            input,
            "--script",
            script,
            "--record",
            &log,
            "--run-id",
            "whole",
        ]));
        let mut child = spawn(&[
            "run",
            test_programs::MULTI_CALL,
            "--input",
            input,
            "--script",
            script,
            "--config",
            slow,
            "--record",
            &log,
            "--run-id",
            "killed",
        ]);
        let calls = || committed(&log, "killed");
        wait_until("three committed calls", || calls() >= 3);
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let k = calls();
        assert!((3..12).contains(&k), "{k}");

        // Resumed with the script it was started with (kept in the log):
        // the mock is asked only for the calls not committed.
        let mock_log = dir.path().join("mock.jsonl");
        let resumed = ok_json(&callai(&[
            "run",
            test_programs::MULTI_CALL,
            "--resume",
            &log,
            "--run-id",
            "killed",
            "--mock-log",
            mock_log.to_str().unwrap(),
        ]));
        assert_eq!(resumed, expected, "{log}");
        let asked = std::fs::read_to_string(&mock_log).unwrap().lines().count();
        assert_eq!(asked, 12 - k, "{log}: only the calls not yet committed");
    }
}

#[test]
fn a_resume_that_does_not_fit_the_run_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.db");
    let log = log.to_str().unwrap();
    let missing = callai(&["run", "echo-attempts", "--resume", log, "--run-id", "x"]);
    assert!(!missing.status.success());
    // A finished run.
    ok_json(&callai(&[
        "run",
        "echo-attempts",
        "--record",
        log,
        "--run-id",
        "done",
    ]));
    let done = callai(&["run", "echo-attempts", "--resume", log, "--run-id", "done"]);
    let message = err_message(&done);
    assert!(message.contains("has finished (ok)"), "{message}");
    let unknown = callai(&["run", "echo-attempts", "--resume", log, "--run-id", "nope"]);
    assert!(err_message(&unknown).contains("not in this log"));

    // A run killed after its first call, resumed with another input or
    // another pack: refused, and left as it was for a resume that fits.
    let input = r#"{"calls": 3}"#;
    let script = dir.path().join("s.json");
    std::fs::write(
        &script,
        r#"[{"content": "a"}, {"content": "b"}, {"content": "c"}]"#,
    )
    .unwrap();
    let slow = dir.path().join("slow.toml");
    std::fs::write(&slow, "[mock]\nlatencyMs = 400\n").unwrap();
    let mut child = spawn(&[
        "run",
        test_programs::MULTI_CALL,
        "--input",
        input,
        "--script",
        script.to_str().unwrap(),
        "--config",
        slow.to_str().unwrap(),
        "--record",
        log,
        "--run-id",
        "cut",
    ]);
    let calls = || committed(log, "cut");
    wait_until("the first committed call", || calls() >= 1);
    child.kill().unwrap();
    child.wait().unwrap();
    let k = calls();
    let other_input = callai(&[
        "run",
        test_programs::MULTI_CALL,
        "--input",
        r#"{"calls": 2}"#,
        "--resume",
        log,
        "--run-id",
        "cut",
    ]);
    assert!(err_message(&other_input).contains("--input differs"));
    // echo-attempts, given the run's input, asks for another first request.
    let other_pack = callai(&["run", "echo-attempts", "--resume", log, "--run-id", "cut"]);
    let message = err_message(&other_pack);
    assert!(
        message.contains("call 0 was recorded for node"),
        "{message}"
    );
    assert_eq!(calls(), k, "the refused resume left the run as it was");
    let fits = ok_json(&callai(&[
        "run",
        test_programs::MULTI_CALL,
        "--resume",
        log,
        "--run-id",
        "cut",
    ]));
    assert_eq!(fits["answers"], json!(["a", "b", "c"]));
}
