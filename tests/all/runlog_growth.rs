//! A run log that does not grow without end (issue 22, item 6), on both
//! backends and through the `callai` command: a schema stored once by its
//! hash, what one run records bounded by `maxRunBytes`, finished runs
//! pruned.

use crate::runlog::{begin, call, event};
use callai_engine::RunLogError;
use callai_engine::runlog::{ExistingRun, RecordedCall, RunStatus};
use callai_tests::runlog_backends::Backend;

/// Call `index` of a structured request whose `responseSchema` carries
/// `pad` bytes of description.
fn call_with_schema(index: u32, pad: usize, tag: &str) -> RecordedCall {
    let mut c = call(index);
    c.request = serde_json::json!({
        "messages": [{"role": "user", "content": "hi"}],
        "responseSchema": {"type": "object", "description": format!("{tag}{}", "x".repeat(pad))}
    });
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_is_stored_once_and_read_back_whole() {
    // Issue 22, item 6: 250 calls with one 1 MB schema wrote 249.5 MB.
    for b in Backend::all() {
        let log = b.open().await;
        let f = log
            .begin(&begin("big", ExistingRun::Refuse, None, None))
            .await
            .unwrap();
        for i in 0..40 {
            log.commit_call("big".into(), f, &call_with_schema(i, 100_000, "one"), &[])
                .await
                .unwrap();
        }
        log.finish("big".into(), f, &[], RunStatus::Ok, "1")
            .await
            .unwrap();
        let run = log.load("big".into()).await.unwrap();
        assert_eq!(run.calls.len(), 40);
        assert_eq!(
            run.calls[39].request,
            call_with_schema(39, 100_000, "one").request,
            "{}: the schema comes back as it went in",
            b.name()
        );
        assert_eq!(b.number("SELECT COUNT(*) FROM schemas"), 1, "{}", b.name());
        let recorded = b.number("SELECT bytes FROM runs WHERE run_id = 'big'");
        assert!(
            (100_000..200_000).contains(&recorded),
            "{}: {recorded} bytes recorded for 40 calls of one 100 kB schema",
            b.name()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_bounded_by_max_run_bytes_and_what_it_committed_stays() {
    for b in Backend::all() {
        let log = b.open_with_max_run_bytes(250_000).await;
        let f = log
            .begin(&begin("grows", ExistingRun::Refuse, None, None))
            .await
            .unwrap();
        // Distinct 100 kB schemas: the third passes 250 kB.
        for i in 0..2 {
            let c = call_with_schema(i, 100_000, &format!("s{i}"));
            log.commit_call("grows".into(), f, &c, &[]).await.unwrap();
        }
        let third = call_with_schema(2, 100_000, "s2");
        let refused = log
            .commit_call("grows".into(), f, &third, &[])
            .await
            .unwrap_err();
        assert!(
            matches!(refused, RunLogError::RunTooLarge { limit: 250_000, .. }),
            "{}: {refused:?}",
            b.name()
        );
        assert!(
            refused.to_string().contains("runlog.maxRunBytes"),
            "{refused}"
        );
        // The same schema again costs only its row.
        let again = call_with_schema(2, 100_000, "s1");
        log.commit_call("grows".into(), f, &again, &[])
            .await
            .unwrap();
        assert_eq!(log.load("grows".into()).await.unwrap().calls.len(), 3);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_deletes_finished_runs_before_a_time_and_keeps_running_ones() {
    for b in Backend::all() {
        let log = b.open().await;
        for run_id in ["old", "live"] {
            let f = log
                .begin(&begin(run_id, ExistingRun::Refuse, None, None))
                .await
                .unwrap();
            let c = call_with_schema(0, 1000, run_id);
            log.commit_call(run_id.into(), f, &c, &[event(0)])
                .await
                .unwrap();
            if run_id == "old" {
                log.finish(run_id.into(), f, &[], RunStatus::Ok, "1")
                    .await
                    .unwrap();
            }
        }
        let now = callai_engine::events::now_ms();
        let nothing = log.prune(now - 60_000).await.unwrap();
        assert_eq!(
            nothing.runs,
            0,
            "{}: it ended within the last minute",
            b.name()
        );
        let pruned = log.prune(now + 60_000).await.unwrap();
        assert_eq!((pruned.runs, pruned.schemas), (1, 1), "{}", b.name());
        assert!(matches!(
            log.load("old".into()).await,
            Err(RunLogError::NoSuchRun(_))
        ));
        assert_eq!(log.load("live".into()).await.unwrap().calls.len(), 1);
        assert_eq!(b.number("SELECT COUNT(*) FROM schemas"), 1, "{}", b.name());
        assert_eq!(
            b.number("SELECT COUNT(*) FROM events WHERE run_id = 'old'"),
            0,
            "{}",
            b.name()
        );
    }
}

#[test]
fn a_run_past_max_run_bytes_fails_naming_it_and_prune_empties_the_log() {
    // Issue 22, item 6: what one run records is bounded, and finished runs
    // can be pruned.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.db");
    let config = dir.path().join("host.toml");
    std::fs::write(&config, "[runlog]\nmaxRunBytes = 8192\n").unwrap();
    let big = serde_json::json!({
        "messages": [{"role": "user", "content": "hi"}],
        "responseSchema": {"type": "object", "description": "x".repeat(20_000)}
    });
    let callai = |args: &[&str]| crate::callai_command().args(args).output().unwrap();
    let (log_arg, config_arg) = (log.to_str().unwrap(), config.to_str().unwrap());
    let input = big.to_string();
    let out = callai(&[
        "run",
        "echo-attempts",
        "--input",
        &input,
        "--record",
        log_arg,
        "--run-id",
        "big",
        "--config",
        config_arg,
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("runlog.maxRunBytes"), "{stderr}");
    // A small run fits; then both are pruned (the failed one ended too).
    let small = r#"{"messages": [{"role": "user", "content": "hi"}]}"#;
    let out = callai(&[
        "run",
        "echo-attempts",
        "--input",
        small,
        "--record",
        log_arg,
        "--run-id",
        "small",
        "--config",
        config_arg,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = callai(&[
        "runlog",
        "prune",
        "--runlog",
        log_arg,
        "--before",
        "2999-01-01",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("pruned 2 finished runs"), "{stdout}");
    let out = callai(&[
        "run",
        "echo-attempts",
        "--replay",
        log_arg,
        "--run-id",
        "small",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not in this log"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bad = callai(&["runlog", "prune", "--runlog", log_arg, "--before", "soon"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("soon"));
}
