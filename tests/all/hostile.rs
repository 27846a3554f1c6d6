//! What a hostile pack or provider can make the host spend is bounded: one
//! regression test for each way the host fell (issue 13), each checking the
//! bound with a generous margin, never a timing.

use callai_engine::wire::ErrorCode;
use callai_engine::{HostConfig, Journal, Recording, RunLog};
use callai_runlog_sqlite::SqliteRunLog;
use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::schemas::{FORMS, doubling_in_form};
use callai_tests::wire::{Api, KEY, host};
use callai_tests::{block_on, echo, pack, run, run_journaled};
use serde_json::{Value, json};
use std::sync::Arc;

fn with(edit: impl FnOnce(&mut HostConfig)) -> HostConfig {
    let mut c = HostConfig::default();
    edit(&mut c);
    c
}

#[test]
fn a_log_flood_is_cut_at_the_runs_log_limit() {
    let config = with(|c| c.limits.memory_bytes = 32 << 20);
    let out = run(
        &pack("log_flood"),
        config,
        &json!([]),
        &json!({"lines": 40, "bytes": 8 << 20}).to_string(),
    );
    assert_eq!(out.ok(), &json!(40), "the pack ran to its end");
    let kept: usize = out
        .events_named("pack.log")
        .iter()
        .map(|e| e["message"].as_str().unwrap().len())
        .sum();
    assert!(
        kept <= 1 << 20,
        "{kept} bytes of log kept over a 1 MiB limit"
    );
    let dropped = &out.events_named("pack.log.dropped")[0];
    assert_eq!(
        dropped["lines"], 39,
        "one line, cut to fit; the rest dropped"
    );
    assert_eq!(
        dropped["bytes"].as_u64().unwrap() + kept as u64,
        40 * (8 << 20)
    );
    // And the line limit.
    let out = run(
        &pack("log_flood"),
        with(|c| c.limits.max_log_lines = 5),
        &json!([]),
        &json!({"lines": 100, "bytes": 3}).to_string(),
    );
    assert_eq!(out.events_named("pack.log").len(), 5);
    assert_eq!(out.events_named("pack.log.dropped")[0]["lines"], 95);
}

/// Issue 36 #4: what a pack writes to its standard output and error is
/// in its log, in order with its calls, within the same limits.
#[test]
fn a_packs_stdout_and_stderr_are_its_log_lines_within_its_limits() {
    let out = run(
        &pack("print_lines"),
        HostConfig::default(),
        &json!([{"content": "ok", "outputTokens": 1}]),
        &json!({"lines": 3}).to_string(),
    );
    assert_eq!(out.ok(), &json!(3));
    let lines: Vec<(String, String)> = out
        .events_named("pack.log")
        .iter()
        .map(|e| {
            let text = |k: &str| e[k].as_str().unwrap().to_owned();
            (text("level"), text("message"))
        })
        .collect();
    let expected = [
        ("info", "line 0"),
        ("info", "line 1"),
        ("info", "line 2"),
        ("info", "no newline"),
        ("warn", "on stderr"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(l, m)| ((*l).to_owned(), (*m).to_owned()))
        .collect();
    assert_eq!(lines, expected);
    // "line 0" was logged before the call, the rest after it.
    let types: Vec<&str> = out
        .events
        .iter()
        .map(callai_engine::Event::type_name)
        .collect();
    let first_line = types.iter().position(|t| *t == "pack.log").unwrap();
    let usage = types.iter().position(|t| *t == "provider.usage").unwrap();
    let second_line = types.iter().rposition(|t| *t == "pack.log").unwrap();
    assert!(first_line < usage && usage < second_line, "{types:?}");
    // The same line limit as the log import.
    let out = run(
        &pack("print_lines"),
        with(|c| c.limits.max_log_lines = 2),
        &json!([{"content": "ok", "outputTokens": 1}]),
        &json!({"lines": 50}).to_string(),
    );
    assert_eq!(out.events_named("pack.log").len(), 2);
    assert_eq!(out.events_named("pack.log.dropped")[0]["lines"], 50);
}

#[test]
fn a_request_of_many_empty_messages_is_counted_on_what_would_be_sent() {
    let config = with(|c| c.limits.max_request_bytes = 1 << 20);
    let out = run(
        &pack("many_messages"),
        config,
        &json!([{"content": "x"}]),
        &json!({"count": 200_000}).to_string(),
    );
    match &out.output {
        Err(callai_engine::RunError::Limit { key, message }) => {
            assert_eq!(*key, "limits.maxRequestBytes");
            assert!(message.contains("bytes is over the limit"), "{message}");
        }
        other => panic!("expected the request limit, got {other:?}"),
    }
    assert!(out.mock_log.is_empty(), "nothing reached the provider");
}

#[test]
fn a_schema_whose_check_would_explode_is_refused_up_front() {
    let out = echo(
        HostConfig::default(),
        json!([{"content": "{}", "outputTokens": 1}]),
        json!({"messages": [{"role": "user", "content": "hi"}], "responseSchema": doubling_in_form("pointer", 31)}),
    );
    let error = &out.ok()["error"];
    assert_eq!(error["code"], "validation_error");
    assert_eq!(error["details"]["field"], "responseSchema");
    assert!(
        error["message"].as_str().unwrap().contains("maxSchemaWork"),
        "{error}"
    );
    assert!(out.mock_log.is_empty(), "refused before any request");
    // The same shape, shallow: an ordinary schema.
    let out = echo(
        HostConfig::default(),
        json!([{"content": "{}", "outputTokens": 1}]),
        json!({"messages": [{"role": "user", "content": "hi"}], "responseSchema": doubling_in_form("pointer", 8)}),
    );
    assert_eq!(out.ok()["data"], json!({}));
}

#[test]
fn every_form_of_reference_is_judged_or_refused_never_walked_around() {
    for form in FORMS {
        let out = echo(
            HostConfig::default(),
            json!([{"content": "{\"a\": 1, \"b\": 2}", "outputTokens": 1}]),
            json!({"messages": [{"role": "user", "content": "hi"}],
                   "responseSchema": doubling_in_form(form, 30)}),
        );
        let error = &out.ok()["error"];
        assert_eq!(error["code"], "validation_error", "{form}: {error}");
        assert_eq!(error["details"]["field"], "responseSchema", "{form}");
        assert!(
            out.mock_log.is_empty(),
            "{form}: refused before any request"
        );
    }
    // A percent-encoded pointer is followed, not refused: shallow, it is
    // an ordinary schema.
    let out = echo(
        HostConfig::default(),
        json!([{"content": "{}", "outputTokens": 1}]),
        json!({"messages": [{"role": "user", "content": "hi"}],
               "responseSchema": doubling_in_form("percent-encoded pointer", 8)}),
    );
    assert_eq!(out.ok()["data"], json!({}), "{}", out.ok());
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_the_key_goes_nowhere_else() {
    for api in [Api::OpenAi, Api::Anthropic] {
        for status in [307, 302, 301, 308] {
            let elsewhere =
                FakeServer::start(vec![api.reply("stolen", None, "stop", Some(1))]).await;
            let location = format!(
                "{}{}",
                elsewhere.url(),
                api.path().trim_start_matches("/v1")
            );
            let fake = FakeServer::start(vec![Reply::Redirect(status, location)]).await;
            let host = host(api.config(fake.url(), true, 5000));
            let err = callai_tests::wire::failed_text_call(&host).await;
            assert_eq!(err.code, ErrorCode::ProviderRejected, "{api:?} {status}");
            assert!(err.message.contains("redirect"), "{}", err.message);
            assert!(
                elsewhere.received().is_empty(),
                "{api:?} {status}: followed to another server"
            );
            assert_eq!(fake.received().len(), 1, "and not retried");
        }
    }
}

#[tokio::test]
async fn a_retry_after_of_1e20_seconds_gives_up_cleanly() {
    for value in ["1e20", "1e400", "99999999999999999999999"] {
        let fake = FakeServer::start(vec![Reply::Json(
            503,
            json!({"error": {"message": "later"}}),
            vec![("retry-after", value.into())],
        )])
        .await;
        let dir = tempfile::tempdir().unwrap();
        let log: Arc<dyn RunLog> = Arc::new(SqliteRunLog::open(&dir.path().join("r.db")).unwrap());
        let host = host(Api::OpenAi.config(fake.url(), true, 5000));
        let journal = Journal::record(log.clone(), "r", "n", Recording::default())
            .await
            .unwrap();
        let input = json!({"messages": [{"role": "user", "content": "hi"}]}).to_string();
        let out = pack("echo-attempts")
            .run_journaled(&host, "n", &input, journal)
            .await;
        let output: Value = serde_json::from_str(out.result.as_ref().unwrap()).unwrap();
        assert_eq!(output["error"]["code"], "provider_unavailable", "{value}");
        assert!(
            output["error"]["message"]
                .as_str()
                .unwrap()
                .contains("asked to wait"),
            "{output}"
        );
        let recorded = log.load("r".into()).await.unwrap();
        assert_eq!(
            recorded.status,
            callai_engine::runlog::RunStatus::Ok,
            "the run finished"
        );
    }
}

#[tokio::test]
async fn a_huge_body_is_not_read_past_the_limit() {
    let body_limit = 1 << 20;
    for api in [Api::OpenAi, Api::Anthropic] {
        let fake = FakeServer::start(vec![Reply::Huge(1 << 30)]).await;
        let mut config = api.config(fake.url(), true, 60_000);
        config.host.limits.max_provider_body_bytes = body_limit;
        let host = host(config);
        let err = callai_tests::wire::failed_text_call(&host).await;
        assert_eq!(err.code, ErrorCode::LimitExceeded, "{api:?}: {err}");
        assert!(
            err.message.contains("limits.maxProviderBodyBytes"),
            "{}",
            err.message
        );
        assert_eq!(fake.received().len(), 1, "not retried");
        // The host stopped reading: the fake wrote far less than 1 GiB
        // (what the kernel buffers on loopback, at most tens of MiB).
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(
            fake.body_bytes_sent() < 256 << 20,
            "{} bytes sent",
            fake.body_bytes_sent()
        );
    }
}

#[tokio::test]
async fn the_key_echoed_in_any_encoding_reaches_no_pack_event_or_run_log() {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let encodings = [
        KEY.to_owned(),
        KEY.to_uppercase(),
        KEY.replace('-', "\\u002d"),
        KEY.replace('-', "%2D"),
        b64(&format!("user:{KEY}")),
    ];
    let api = Api::OpenAi;
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("keys.db");
    let log: Arc<dyn RunLog> = Arc::new(SqliteRunLog::open(&log_path).unwrap());
    let mut shown = String::new();
    for (i, echoed) in encodings.iter().enumerate() {
        // First an error body that echoes it, then a 200 whose content does.
        let fake = FakeServer::start(vec![
            Reply::Json(
                401,
                json!({"error": {"message": format!("bad key {echoed}")}}),
                vec![],
            ),
            api.reply(&format!("your key is {echoed}"), None, "stop", Some(3)),
        ])
        .await;
        let host = host(api.config(fake.url(), true, 5000));
        for (j, _) in ["error", "content"].iter().enumerate() {
            let run_id = format!("k{i}-{j}");
            let journal = Journal::record(log.clone(), &run_id, "n", Recording::default())
                .await
                .unwrap();
            let input = json!({"messages": [{"role": "user", "content": "hi"}]}).to_string();
            let out = pack("echo-attempts")
                .run_journaled(&host, "n", &input, journal)
                .await;
            let text = out.result.unwrap();
            assert!(text.contains("[redacted]"), "{echoed}: {text}");
            shown.push_str(&text);
            shown.push_str(&serde_json::to_string(&out.events).unwrap());
        }
    }
    let secret = "SUPERSECRET";
    assert!(
        !shown.contains(secret) && !shown.to_lowercase().contains(&secret.to_lowercase()),
        "{shown}"
    );
    drop(log);
    let mut stored = std::fs::read(&log_path).unwrap();
    stored.extend(std::fs::read(log_path.with_extension("db-wal")).unwrap_or_default());
    let stored = String::from_utf8_lossy(&stored).to_lowercase();
    assert!(
        !stored.contains(&secret.to_lowercase()),
        "the key is in the run log"
    );
}

#[test]
fn the_sandbox_clock_and_random_source_are_recorded_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let log: Arc<dyn RunLog> = Arc::new(SqliteRunLog::open(&dir.path().join("c.db")).unwrap());
    let script = json!([{"content": "a", "outputTokens": 1}]);
    let p = pack("clock_random");
    let journal = block_on(Journal::record(
        log.clone(),
        "c",
        "test.node",
        Recording::default(),
    ))
    .unwrap();
    let recorded = run_journaled(&p, HostConfig::default(), &script, "{}", journal);
    let journal = block_on(Journal::replay(log.as_ref(), "c")).unwrap();
    let replayed = run_journaled(&p, HostConfig::default(), &json!([]), "{}", journal);
    assert_eq!(
        replayed.ok(),
        recorded.ok(),
        "a replay sees the same clocks and randomness"
    );
    let live_a = run(&p, HostConfig::default(), &script, "{}");
    let live_b = run(&p, HostConfig::default(), &script, "{}");
    assert_ne!(
        live_a.ok()["random"],
        live_b.ok()["random"],
        "each run its own seed"
    );
    // The clock is the run's, not the host's: the call's provider wait is
    // not seen, and elapsed time is counted in reads, not in host time.
    let elapsed: u64 = recorded.ok()["elapsedNanos"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(elapsed < 1_000_000, "{elapsed} ns");
}
