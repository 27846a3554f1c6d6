//! Provider quotas (issue 53, item 4): `[providers.NAME.limits]` holds
//! every host on one run log to a provider's requests and tokens a
//! minute, against real `callai serve` processes and fakes that count
//! what they were sent:
//!
//! - two hosts on one database (SQLite and PostgreSQL) under 60 concurrent
//!   calls never send a provider past its quota: exactly the quota reaches
//!   the fake, the rest are 429 `provider_quota_exceeded` naming the
//!   provider, the quota and when the minute ends;
//! - a chain moves to its next target when a target's quota is full (no
//!   attempt counted for the request held back), and the refusals are in
//!   `/metrics`;
//! - a tokens quota counts input and output together, and a request
//!   larger than the whole quota is refused at once; the drop-in says so
//!   in OpenAI's shape, without asking its client to retry;
//! - a quota without a run log is refused at start-up, naming its key.

use callai_tests::fake_server::{FakeServer, Gate, Reply, short_completion};
use callai_tests::paced::minute_with;
use callai_tests::process::Serve;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

const TOKEN: &str = "tok-quota";

/// A config of `providers` (TOML), the run log at `runlog` and the admin's
/// token.
fn config(dir: &std::path::Path, runlog: &str, providers: &str) -> String {
    queued(dir, runlog, providers, 0)
}

/// [`config`] with `[limits] queueMs`.
fn queued(dir: &std::path::Path, runlog: &str, providers: &str, queue_ms: u64) -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!("quota-{n}.toml"));
    let toml = format!(
        "[server]\ntokenEnv = \"QUOTA_TOKEN\"\n[limits]\nwallMs = 30000\n\
         queueMs = {queue_ms}\n[runlog]\nurl = \"{runlog}\"\n{providers}"
    );
    std::fs::write(&path, toml).unwrap();
    path.to_str().unwrap().to_owned()
}

fn provider(name: &str, port: u16, limits: &str) -> String {
    format!(
        "[providers.{name}]\nkind = \"openai\"\nbaseUrl = \"http://127.0.0.1:{port}/v1\"\n\
         apiKeyEnv = \"\"\nmodel = \"m\"\n{limits}"
    )
}

fn host(config: &str) -> Serve {
    Serve::start(
        env!("CARGO_BIN_EXE_callai"),
        std::path::Path::new(config),
        &[("QUOTA_TOKEN", TOKEN)],
    )
}

fn call(provider: Option<&str>, model: Option<&str>) -> Value {
    let mut request = json!({"messages": [{"role": "user", "content": "hi"}],
                             "maxTokens": 10, "retry": {"maxAttempts": 1}});
    if let Some(p) = provider {
        request["provider"] = json!(p);
    }
    if let Some(m) = model {
        request["model"] = json!(m);
    }
    json!({ "request": request })
}

/// Issue 53 tests: a provider quota holds across two hosts on one
/// database: 60 calls at once against 20 requests a minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hosts_never_send_a_provider_past_its_quota() {
    const QUOTA: usize = 20;
    const CALLS: usize = 60;
    let dir = tempfile::tempdir().unwrap();
    for (name, runlog, _cluster) in callai_tests::runlog_backends::urls(dir.path()) {
        let fake = FakeServer::repeating(Reply::ok(short_completion())).await;
        let limits = format!("[providers.fake.limits]\nrequests = {QUOTA}\n");
        let config = config(dir.path(), &runlog, &provider("fake", fake.port(), &limits));
        let hosts = [Arc::new(host(&config)), Arc::new(host(&config))];
        minute_with(Duration::from_secs(25)).await;
        let tasks: Vec<_> = (0..CALLS)
            .map(|i| {
                let serve = hosts[i % 2].clone();
                tokio::spawn(async move {
                    let body = call(Some("fake"), None);
                    serve
                        .send("POST", "/v1/call", Some(&body), Some(TOKEN))
                        .await
                })
            })
            .collect();
        let mut answered = 0;
        for task in tasks {
            let r = task.await.unwrap();
            match r.status {
                200 => answered += 1,
                429 => {
                    let e = &r.body["error"];
                    assert_eq!(e["code"], "provider_quota_exceeded", "{name}: {}", r.body);
                    let d = &e["details"];
                    assert_eq!(
                        (&d["provider"], &d["quota"], &d["limit"], &d["per"]),
                        (
                            &json!("fake"),
                            &json!("requests"),
                            &json!(QUOTA),
                            &json!("1m")
                        ),
                        "{name}: {}",
                        r.body
                    );
                    let message = e["message"].as_str().unwrap();
                    assert!(
                        message.contains("[providers.fake.limits] requests = 20 per 1m"),
                        "{message}"
                    );
                    let after: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
                    assert!((1..=60).contains(&after), "{name}: {after}");
                    assert!(r.headers.contains_key("retry-after-ms"));
                }
                other => panic!("{name}: {other}: {}", r.body),
            }
        }
        assert_eq!(fake.count(), QUOTA, "{name}: the provider saw its quota");
        assert_eq!(
            answered, QUOTA,
            "{name}: every request the quota let through was answered"
        );
    }
}

/// Issue 53 tests: a route's chain goes to its next target when the first
/// one's quota is full; the request held back is no attempt, and
/// `/metrics` counts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_moves_on_when_a_targets_quota_is_full() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        FakeServer::repeating(Reply::ok(short_completion())).await,
        FakeServer::repeating(Reply::ok(short_completion())).await,
    );
    let providers = format!(
        "{}{}[models.fast]\ntargets = [\"a\", \"b\"]\n",
        provider("a", a.port(), "[providers.a.limits]\nrequests = 2\n"),
        provider("b", b.port(), "")
    );
    let runlog = dir.path().join("runs.db");
    let serve = host(&config(dir.path(), runlog.to_str().unwrap(), &providers));
    minute_with(Duration::from_secs(15)).await;
    let mut went_to = Vec::new();
    for _ in 0..4 {
        let body = call(None, Some("fast"));
        let r = serve
            .send("POST", "/v1/call", Some(&body), Some(TOKEN))
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.body["result"]["attempts"]["count"], 1, "{}", r.body);
        went_to.push((a.count(), b.count()));
    }
    assert_eq!(went_to, [(1, 0), (2, 0), (2, 1), (2, 2)]);
    let metrics = serve.send("GET", "/metrics", None, Some(TOKEN)).await;
    let text = metrics.body.as_str().unwrap_or_default();
    assert!(
        text.contains("callai_provider_quota_refused_total{provider=\"a\"} 2"),
        "{text}"
    );
}

/// Issue 53 tests: at its chain's end a request waits within `[limits]
/// queueMs` for room in its provider's quota: 15 output tokens a minute,
/// two calls of `maxTokens` 10 at once; the second waits until the first,
/// which used 3, gives back the 7 it held but did not spend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_waits_within_queue_ms_for_its_providers_room() {
    let dir = tempfile::tempdir().unwrap();
    let gate = Gate::new();
    let held = Reply::Gated(gate.clone(), Box::new(Reply::ok(short_completion())));
    let fake = FakeServer::start(vec![held, Reply::ok(short_completion())]).await;
    let limits = "[providers.fake.limits]\noutputTokens = 15\n";
    let runlog = dir.path().join("runs.db");
    let providers = provider("fake", fake.port(), limits);
    let serve = Arc::new(host(&queued(
        dir.path(),
        runlog.to_str().unwrap(),
        &providers,
        20_000,
    )));
    minute_with(Duration::from_secs(30)).await;
    let send = |serve: Arc<Serve>| {
        tokio::spawn(async move {
            let body = call(Some("fake"), None);
            serve
                .send("POST", "/v1/call", Some(&body), Some(TOKEN))
                .await
        })
    };
    let first = send(serve.clone());
    fake.reached(1).await;
    let second = send(serve.clone());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!second.is_finished(), "the second call waits for room");
    assert_eq!(fake.count(), 1);
    gate.open();
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(second.status, 200, "{}", second.body);
    assert_eq!(fake.count(), 2);
}

/// Issue 53 tests: `tokens` counts input and output together; a request
/// whose worst case is larger than the whole quota is refused at once,
/// and the drop-in answers it in OpenAI's shape, telling its client not to
/// retry (it never fits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokens_quota_refuses_a_request_larger_than_itself() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeServer::repeating(Reply::ok(short_completion())).await;
    let limits = "[providers.fake.limits]\ntokens = 200\n";
    let runlog = dir.path().join("runs.db");
    let serve = host(&config(
        dir.path(),
        runlog.to_str().unwrap(),
        &provider("fake", fake.port(), limits),
    ));
    minute_with(Duration::from_secs(15)).await;
    // 10 output tokens and a short input fit; 300 output tokens never do.
    let r = serve
        .send(
            "POST",
            "/v1/call",
            Some(&call(Some("fake"), None)),
            Some(TOKEN),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let big = json!({"model": "fake/m", "max_tokens": 300,
                     "messages": [{"role": "user", "content": "hi"}]});
    let r = serve
        .send("POST", "/v1/chat/completions", Some(&big), Some(TOKEN))
        .await;
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.body["error"]["type"], "rate_limit_error", "{}", r.body);
    assert_eq!(
        r.body["error"]["code"], "provider_quota_exceeded",
        "{}",
        r.body
    );
    assert_eq!(r.headers["x-should-retry"], "false", "it never fits");
    assert_eq!(fake.count(), 1, "held back before it was sent");
}

/// Issue 53 tests: a quota is kept in the run log: without one, `serve`
/// refuses to start, naming the key.
#[test]
fn a_quota_without_a_run_log_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.toml");
    let toml = format!(
        "[server]\ntokenEnv = \"QUOTA_TOKEN\"\n{}",
        provider("fake", 9, "[providers.fake.limits]\nrequests = 5\n")
    );
    std::fs::write(&path, toml).unwrap();
    let out = crate::callai_command()
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&path)
        .env("QUOTA_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("providers.fake.limits") && stderr.contains("[runlog] url"),
        "{stderr}"
    );
}
