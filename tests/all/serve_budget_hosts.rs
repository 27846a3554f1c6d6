//! Budgets shared by hosts (issue 24): two `callai serve` processes on one
//! run log (an SQLite file, and a throwaway PostgreSQL under CI), 500
//! concurrent calls against a budget that fits 100 calls' worst case. The
//! window is sampled while the load runs: what is spent and reserved never
//! passes the budget; every refusal came before any provider request; at the
//! end what was spent is what the fake provider saw. Then a host killed
//! with -9 while it holds reservations: they lapse with its lease.

use callai_tests::fake_server::{FakeServer, Reply};
use serde_json::{Value, json};
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const TOKEN: &str = "tok-load";
/// A tenant of its own for the calls of the host that is killed.
const HELD: &str = "tok-held";
/// 100 worst cases: each call may make 2 requests of 100 tokens.
const REQUESTS: u64 = 200;
const OUTPUT: u64 = 20_000;
const CALLS: usize = 500;
/// The hosts' `wallMs`: wide enough that no call of the load reaches it on
/// a busy shared machine (at 3 s one did, beside the rest of the suite);
/// a dead host's reservations lapse after it and the lease.
const WALL_MS: u64 = 10_000;
/// The hosts' `leaseMs`.
const LEASE_MS: u64 = 500;

struct Host {
    child: Child,
    url: String,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(config: &std::path::Path) -> Host {
    let config = config.to_str().unwrap();
    let (child, addr) = callai_tests::serve::spawn_serve(
        env!("CARGO_BIN_EXE_callai"),
        &["--listen", "127.0.0.1:0", "--config", config],
        &[
            ("LOAD_TOKEN", TOKEN),
            ("HELD_TOKEN", HELD),
            ("FAKE_KEY", "sk-fake"),
        ],
    );
    Host {
        child,
        url: format!("http://{addr}"),
    }
}

fn config(fake: &FakeServer, slow: &FakeServer, log: &str) -> String {
    format!(
        r#"
[limits]
wallMs = {WALL_MS}
[runlog]
url = "{log}"
leaseMs = {LEASE_MS}
[providers.fake]
kind = "openai"
baseUrl = "http://127.0.0.1:{}/v1"
apiKeyEnv = "FAKE_KEY"
model = "m"
[providers.slow]
kind = "openai"
baseUrl = "http://127.0.0.1:{}/v1"
apiKeyEnv = "FAKE_KEY"
model = "m"
[tenants.load]
tokenEnv = "LOAD_TOKEN"
[tenants.load.budget]
requests = {REQUESTS}
outputTokens = {OUTPUT}
window = "none"
[tenants.held]
tokenEnv = "HELD_TOKEN"
[tenants.held.budget]
requests = 100
window = "none"
"#,
        fake.port(),
        slow.port()
    )
}

fn call(provider: &str) -> Value {
    json!({"request": {"messages": [{"role": "user", "content": "hi"}], "provider": provider,
                       "maxTokens": 100, "retry": {"maxAttempts": 2}}})
}

async fn budget(client: &reqwest::Client, host: &str) -> Value {
    budget_of(client, host, TOKEN).await
}

async fn budget_of(client: &reqwest::Client, host: &str, token: &str) -> Value {
    let r = client
        .get(format!("{host}/v1/budget"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    serde_json::from_str::<Value>(&r.text().await.unwrap()).unwrap()["budget"].clone()
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("a number, not {v}"))
}

async fn load_on(log: &str, dir: &std::path::Path) {
    let reply = Reply::ok(json!({
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 40}
    }));
    let fake =
        FakeServer::repeating(Reply::Delay(Duration::from_millis(20), Box::new(reply))).await;
    let slow = FakeServer::repeating(Reply::Delay(
        Duration::from_secs(120),
        Box::new(Reply::Reset),
    ))
    .await;
    let path = dir.join(format!("hosts-{}.toml", log.len()));
    std::fs::write(&path, config(&fake, &slow, log)).unwrap();
    let hosts = [start(&path), start(&path)];
    let urls: Vec<String> = hosts.iter().map(|h| h.url.clone()).collect();
    let client = callai_tests::serve::http_client();

    let settled = contend(&client, &urls, &fake).await;
    let [a, b_host] = hosts;
    die_holding(&client, a, &b_host, &settled).await;
}

/// CALLS calls spread over both hosts while a sampler checks the window
/// never passes the budget; every request the fake saw is an answered
/// call's, and charged once the hosts settle: the window then.
async fn contend(client: &reqwest::Client, urls: &[String], fake: &FakeServer) -> Value {
    // The sampler: the window as host A's database shows it, while the load runs.
    let running = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (client, url, running) = (client.clone(), urls[0].clone(), running.clone());
        tokio::spawn(async move {
            let mut samples = 0;
            while running.load(Ordering::Relaxed) {
                let b = budget(&client, &url).await;
                let used = |k: &str| n(&b["spent"][k]) + n(&b["reserved"][k]);
                assert!(used("requests") <= REQUESTS, "past the budget: {b}");
                assert!(used("outputTokens") <= OUTPUT, "past the budget: {b}");
                samples += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            samples
        })
    };
    let calls: Vec<_> = (0..CALLS)
        .map(|i| {
            let (client, url) = (client.clone(), urls[i % 2].clone());
            tokio::spawn(async move {
                let r = client
                    .post(format!("{url}/v1/call"))
                    .bearer_auth(TOKEN)
                    .header("content-type", "application/json")
                    .body(call("fake").to_string())
                    .send()
                    .await
                    .unwrap();
                let status = r.status().as_u16();
                (
                    status,
                    serde_json::from_str::<Value>(&r.text().await.unwrap()).unwrap(),
                )
            })
        })
        .collect();
    let mut answers = Vec::with_capacity(CALLS);
    for call in calls {
        answers.push(call.await);
    }
    running.store(false, Ordering::Relaxed);
    let samples = sampler.await.unwrap();
    assert!(samples > 3, "the window was sampled {samples} times");

    let (mut ok, mut refused, mut attempts) = (0, 0, 0);
    for answer in answers {
        let (status, body) = answer.unwrap();
        match status {
            200 => {
                ok += 1;
                attempts += n(&body["result"]["attempts"]["count"]);
            }
            429 => {
                refused += 1;
                assert_eq!(body["error"]["code"], "budget_exceeded", "{body}");
                assert!(
                    body["error"]["details"].get("totalAttempts").is_none(),
                    "{body}"
                );
            }
            other => panic!("{other}: {body}"),
        }
    }
    assert!(ok >= 100 && refused > 0, "{ok} answered, {refused} refused");
    let seen = fake.count() as u64;
    assert_eq!(
        attempts, seen,
        "every request the fake saw was an answered call's"
    );
    // Each host settles its allotment a moment after its calls go idle.
    let deadline = Instant::now() + Duration::from_secs(10);
    let b = loop {
        let b = budget(client, &urls[1]).await;
        if n(&b["reserved"]["requests"]) == 0 {
            break b;
        }
        assert!(Instant::now() < deadline, "never settled: {b}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(n(&b["spent"]["requests"]), seen, "{b}");
    assert_eq!(n(&b["spent"]["outputTokens"]), 40 * seen, "{b}");
    assert_eq!(n(&b["spent"]["inputTokens"]), 10 * seen, "{b}");
    assert_eq!(
        b["reserved"],
        json!({"requests": 0, "outputTokens": 0, "inputTokens": 0})
    );

    b
}

/// Host A dies with five calls' reservations held (their provider never
/// answers); they lapse with its lease, and nothing is charged: the
/// window stays `settled`.
async fn die_holding(client: &reqwest::Client, mut a: Host, b_host: &Host, settled: &Value) {
    let held: Vec<_> = (0..5)
        .map(|_| {
            let (client, url) = (client.clone(), a.url.clone());
            tokio::spawn(async move {
                let _ = client
                    .post(format!("{url}/v1/call"))
                    .bearer_auth(HELD)
                    .header("content-type", "application/json")
                    .body(call("slow").to_string())
                    .send()
                    .await;
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while n(&budget_of(client, &b_host.url, HELD).await["reserved"]["requests"]) < 10 {
        assert!(Instant::now() < deadline, "A never held its reservations");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    for h in held {
        h.abort();
    }
    // They lapse after wallMs + leaseMs: wait that, then look until they
    // are gone, with a margin.
    tokio::time::sleep(Duration::from_millis(WALL_MS + LEASE_MS)).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let after = loop {
        let after = budget(client, &b_host.url).await;
        if n(&after["reserved"]["requests"]) == 0 || Instant::now() > deadline {
            break after;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        after["reserved"],
        json!({"requests": 0, "outputTokens": 0, "inputTokens": 0}),
        "{after}"
    );
    assert_eq!(
        after["spent"], settled["spent"],
        "the dead host's calls were never charged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hosts_on_one_sqlite_file_never_spend_past_a_budget() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.db");
    load_on(log.to_str().unwrap(), dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hosts_on_one_postgres_never_spend_past_a_budget() {
    let Some(cluster) = callai_tests::pg::PgCluster::shared() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    load_on(&cluster.database(), dir.path()).await;
}
