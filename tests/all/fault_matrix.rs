//! The fault matrix: each way a provider fails, through a wasm pack, the
//! OpenAI-compatible adapter and a recorded run. For each: what the pack
//! sees, the events, the attempts, a run log that is intact and replays the
//! same, and a known fake API key that appears nowhere. (A host process
//! killed while recording is in `host/tests/replay.rs`, which can spawn the
//! `callai` binary.)

use callai_engine::{Journal, Recording, RunLog};
use callai_runlog_sqlite::SqliteRunLog;
use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::pack;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

const KEY: &str = "sk-fault-matrix-SECRET-7f3a";

fn ok(out: Option<u32>) -> Reply {
    let mut body = json!({"model": "m-1", "choices": [{"index": 0,
        "message": {"role": "assistant", "content": "fine", "refusal": null}, "finish_reason": "stop"}]});
    if let Some(o) = out {
        body["usage"] = json!({"prompt_tokens": 3, "completion_tokens": o});
    }
    Reply::ok(body)
}

/// A server error whose body echoes the key, as some gateways do.
fn echo_500() -> Reply {
    Reply::Json(
        500,
        json!({"error": {"message": format!("internal error for key {KEY}")}}),
        vec![],
    )
}

struct Row {
    name: &'static str,
    replies: Vec<Reply>,
    /// The pack's output must contain these (JSON pointer, value) pairs.
    expect: Vec<(&'static str, Value)>,
    /// Event types, in order, of the call.
    events: Vec<&'static str>,
}

fn rows() -> Vec<Row> {
    let mut rows = transient_rows();
    rows.extend(terminal_rows());
    rows
}

/// A transient failure's events, then the good reply's.
fn retried() -> Vec<&'static str> {
    vec![
        "provider.usage",
        "envelope.retry.attempted",
        "provider.usage",
    ]
}

/// The faults a retry gets past.
fn transient_rows() -> Vec<Row> {
    vec![
        Row {
            name: "timeout",
            replies: vec![
                Reply::Delay(Duration::from_millis(1500), Box::new(ok(Some(1)))),
                ok(Some(4)),
            ],
            expect: vec![
                ("/attempts/count", json!(2)),
                ("/attempts/usageComplete", json!(false)),
                ("/attempts/outputTokens", json!(4)),
            ],
            events: retried(),
        },
        Row {
            name: "reset connection",
            replies: vec![Reply::Reset, ok(Some(4))],
            expect: vec![("/attempts/count", json!(2)), ("/content", json!("fine"))],
            events: retried(),
        },
        Row {
            name: "429",
            replies: vec![
                Reply::Json(
                    429,
                    json!({"error": {"message": format!("slow down, {KEY}")}}),
                    vec![("retry-after", "0".into())],
                ),
                ok(Some(4)),
            ],
            expect: vec![
                ("/attempts/count", json!(2)),
                ("/usage/outputTokens", json!(4)),
            ],
            events: retried(),
        },
    ]
}

/// The faults that end a call, or that it answers with less than it
/// would.
fn terminal_rows() -> Vec<Row> {
    vec![
        Row {
            name: "500",
            replies: vec![echo_500(), echo_500(), echo_500()],
            expect: vec![
                ("/error/code", json!("provider_unavailable")),
                ("/error/details/totalAttempts", json!(3)),
            ],
            events: vec![
                "provider.usage",
                "envelope.retry.attempted",
                "provider.usage",
                "envelope.retry.attempted",
                "provider.usage",
                "envelope.retry.exhausted",
            ],
        },
        Row {
            name: "malformed body",
            replies: vec![
                Reply::Raw(200, format!("<html>oops {KEY}</html>")),
                ok(Some(4)),
            ],
            expect: vec![
                ("/attempts/count", json!(2)),
                ("/attempts/usageComplete", json!(false)),
            ],
            events: retried(),
        },
        Row {
            name: "truncated body",
            replies: vec![
                Reply::Truncated("{\"choices\": [{\"message\"".into()),
                ok(Some(4)),
            ],
            expect: vec![("/attempts/count", json!(2))],
            events: retried(),
        },
        Row {
            name: "refusal",
            replies: vec![Reply::ok(
                json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                "refusal": "no"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}),
            )],
            expect: vec![
                ("/error/code", json!("envelope_refusal")),
                ("/error/details/totalAttempts", json!(1)),
            ],
            events: vec![
                "provider.usage",
                "envelope.refusal",
                "envelope.retry.exhausted",
            ],
        },
        Row {
            name: "missing usage",
            replies: vec![ok(None)],
            expect: vec![
                ("/attempts/count", json!(1)),
                ("/attempts/usageComplete", json!(false)),
            ],
            events: vec!["provider.usage"],
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_is_seen_counted_recorded_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("faults.db");
    let log: Arc<dyn RunLog> = Arc::new(SqliteRunLog::open(&log_path).unwrap());
    let echo = pack("echo-attempts");
    let request = json!({"messages": [{"role": "user", "content": "hi"}]}).to_string();
    for (i, row) in rows().into_iter().enumerate() {
        let fake = FakeServer::start(row.replies).await;
        let config = callai_config::Config::from_toml(&format!(
            "[defaults]\nprovider = \"openai\"\n[providers.openai]\nbaseUrl = \"{}\"\napiKeyEnv = \"K\"\nmodel = \"m-1\"\ntimeoutMs = 300\n",
            fake.url()
        ))
        .unwrap();
        let host = config
            .host_builder(&|_| Some(KEY.to_owned()))
            .unwrap()
            .sleeper(Arc::new(callai_tests::NoWait::default()))
            .build()
            .unwrap();
        let run_id = format!("row-{i}");
        let journal = Journal::record(log.clone(), &run_id, "fault.node", Recording::default())
            .await
            .unwrap();
        let live = echo
            .run_journaled(&host, "fault.node", &request, journal)
            .await;
        let output: Value = serde_json::from_str(live.result.as_ref().unwrap()).unwrap();
        for (pointer, value) in &row.expect {
            assert_eq!(
                output.pointer(pointer),
                Some(value),
                "{}: {output}",
                row.name
            );
        }
        let types: Vec<&str> = live.events.iter().map(|e| e.type_name()).collect();
        assert_eq!(types, row.events, "{}", row.name);

        // The log is intact: it holds the call's outcome, and a replay (with
        // the fake now answering nothing) returns the same output and events.
        let served = fake.received().len();
        let recorded = log.load((&run_id).into()).await.unwrap();
        assert_eq!(recorded.calls.len(), 1, "{}", row.name);
        let replayed = echo
            .run_journaled(
                &host,
                "fault.node",
                &request,
                Journal::replay(log.as_ref(), &run_id).await.unwrap(),
            )
            .await;
        assert_eq!(replayed.result, live.result, "{}", row.name);
        assert_eq!(replayed.events, live.events, "{}", row.name);
        assert_eq!(
            fake.received().len(),
            served,
            "{}: replay made no request",
            row.name
        );

        // The key went to the provider and nowhere else.
        assert!(
            fake.received()
                .iter()
                .all(|r| r.headers["authorization"] == format!("Bearer {KEY}"))
        );
        let shown = format!("{output} {}", serde_json::to_string(&live.events).unwrap());
        assert!(
            !shown.contains(KEY),
            "{}: the key leaked into output or events",
            row.name
        );
    }
    drop(log);
    let bytes = std::fs::read(&log_path).unwrap();
    let wal = std::fs::read(log_path.with_extension("db-wal")).unwrap_or_default();
    for file in [&bytes, &wal] {
        assert!(
            !file.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
            "the key is in the run log"
        );
    }
    // And the log reopens cleanly.
    let reopened = SqliteRunLog::open_existing(&log_path).unwrap();
    assert_eq!(reopened.load("row-7".into()).await.unwrap().calls.len(), 1);
}
