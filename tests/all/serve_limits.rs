//! Several limits per tenant, per minute across hosts (issue 53, item 3),
//! against real `callai serve` processes on each run-log backend (an SQLite
//! file; a PostgreSQL database of the throwaway cluster):
//!
//! - a per-minute limit beside an hourly one and a daily budget: each holds,
//!   the answers say the tightest in OpenAI's `x-ratelimit-*` headers, and
//!   the refusal is a 429 naming the limit, with `Retry-After` (and
//!   `retry-after-ms`) to the end of its minute;
//! - `[limits] queueMs`: a call that does not fit waits for room that a
//!   settling call gives back, instead of being refused;
//! - two hosts on one database under 200 concurrent calls never pass a
//!   per-minute limit (the window sampled while the load runs).

use callai_tests::fake_server::{FakeServer, Gate, Reply, short_completion};
use callai_tests::paced::minute_with;
use callai_tests::process::{Reply as Answer, Serve};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const TOKEN: &str = "tok-team";

/// A host config: the fake provider at `port`, the run log at `runlog`, a
/// tenant `team` with `limits` (TOML), and `[limits] queueMs`.
fn config(dir: &std::path::Path, runlog: &str, port: u16, limits: &str, queue_ms: u64) -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!("limits-{n}.toml"));
    let toml = format!(
        r#"
[limits]
wallMs = 30000
queueMs = {queue_ms}
[runlog]
url = "{runlog}"
[providers.fake]
kind = "openai"
baseUrl = "http://127.0.0.1:{port}/v1"
apiKeyEnv = ""
model = "m"
[tenants.team]
tokenEnv = "TEAM_TOKEN"
{limits}
"#
    );
    std::fs::write(&path, toml).unwrap();
    path.to_str().unwrap().to_owned()
}

fn host(config: &str) -> Serve {
    Serve::start(
        env!("CARGO_BIN_EXE_callai"),
        std::path::Path::new(config),
        &[("TEAM_TOKEN", TOKEN)],
    )
}

fn call(max_attempts: u32) -> Value {
    json!({"request": {"messages": [{"role": "user", "content": "hi"}], "provider": "fake",
                       "maxTokens": 10, "retry": {"maxAttempts": max_attempts}}})
}

fn header(r: &Answer, name: &str) -> Option<String> {
    r.headers.get(name).map(|v| v.to_str().unwrap().to_owned())
}

fn number(r: &Answer, name: &str) -> u64 {
    header(r, name)
        .unwrap_or_else(|| panic!("no {name}: {:?}", r.headers))
        .parse()
        .unwrap()
}

/// Issue 53 #3: three requests a minute, 5,000 output tokens an hour and
/// a daily budget at once. Three calls pass, each answer saying what is
/// left of the tightest limit; the fourth is refused before any request,
/// naming the per-minute limit, with `Retry-After` to the minute's end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_limits_hold_at_once_and_a_refusal_says_when_to_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeServer::repeating(Reply::ok(short_completion())).await;
    let runlog = dir.path().join("runs.db");
    let limits = "[tenants.team.budget]\noutputTokens = 100000\nwindow = \"1d\"\n\
                  [[tenants.team.limits]]\nrequests = 3\nper = \"1m\"\n\
                  [[tenants.team.limits]]\noutputTokens = 5000\nper = \"1h\"\n";
    let config = config(dir.path(), runlog.to_str().unwrap(), fake.port(), limits, 0);
    let serve = host(&config);
    minute_with(Duration::from_secs(20)).await;
    for left in [2, 1, 0] {
        let r = serve
            .send("POST", "/v1/call", Some(&call(1)), Some(TOKEN))
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(number(&r, "x-ratelimit-limit-requests"), 3);
        assert_eq!(number(&r, "x-ratelimit-remaining-requests"), left);
        let reset = header(&r, "x-ratelimit-reset-requests").unwrap();
        assert!(reset.ends_with('s') && !reset.contains('h'), "{reset}");
        // The tightest of the output-token limits: the hour's.
        assert_eq!(number(&r, "x-ratelimit-limit-output-tokens"), 5000);
        assert_eq!(number(&r, "x-callai-budget-remaining-requests"), left);
    }
    let r = serve
        .send("POST", "/v1/call", Some(&call(1)), Some(TOKEN))
        .await;
    assert_eq!(r.status, 429, "{}", r.body);
    let error = &r.body["error"];
    assert_eq!(error["code"], "budget_exceeded", "{}", r.body);
    let d = &error["details"];
    assert_eq!(
        (&d["budget"], &d["per"], &d["limit"], &d["left"]),
        (&json!("requests"), &json!("1m"), &json!(3), &json!(0)),
        "{}",
        r.body
    );
    let resets: jiff::Timestamp = d["resetsAt"].as_str().unwrap().parse().unwrap();
    let now = jiff::Timestamp::now();
    assert_eq!(
        resets.as_second(),
        (now.as_second() / 60 + 1) * 60,
        "the minute's end"
    );
    let after = number(&r, "retry-after");
    let to_reset = (resets.as_second() - now.as_second()) as u64;
    assert!(
        (1..=60).contains(&after) && after.abs_diff(to_reset) <= 1,
        "{after}"
    );
    let after_ms = number(&r, "retry-after-ms");
    assert!(
        after_ms <= 60_000 && after_ms.div_ceil(1000).abs_diff(after) <= 1,
        "{after_ms}"
    );
    assert_eq!(number(&r, "x-ratelimit-remaining-requests"), 0);
    assert_eq!(fake.count(), 3, "refused before any request");

    // Each limit in its window, the budget among them.
    let b = serve
        .send("GET", "/v1/budget", None, Some(TOKEN))
        .await
        .body;
    assert_eq!(b["budget"]["window"], "1d", "{b}");
    let windows: Vec<&str> = b["limits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["window"].as_str().unwrap())
        .collect();
    assert_eq!(windows, ["1d", "1m", "1h"], "{b}");
    let minute = &b["limits"][1];
    let used = minute["spent"]["requests"].as_u64().unwrap()
        + minute["reserved"]["requests"].as_u64().unwrap();
    assert_eq!(used, 3, "{b}");
}

/// Issue 53 #3: with `queueMs`, a call that does not fit waits for room.
/// A call of worst case 3 requests holds the whole limit at the provider;
/// a second waits (not refused), and is admitted once the first settles
/// having spent 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waits_within_queue_ms_for_room_a_settling_call_gives_back() {
    let dir = tempfile::tempdir().unwrap();
    let gate = Gate::new();
    let held = Reply::Gated(gate.clone(), Box::new(Reply::ok(short_completion())));
    let fake = FakeServer::start(vec![held, Reply::ok(short_completion())]).await;
    let runlog = dir.path().join("runs.db");
    let limits = "[[tenants.team.limits]]\nrequests = 3\nper = \"1m\"\n\
                  [[tenants.team.limits]]\noutputTokens = 1000\nper = \"1m\"\n";
    let config = config(
        dir.path(),
        runlog.to_str().unwrap(),
        fake.port(),
        limits,
        20_000,
    );
    let serve = Arc::new(host(&config));
    minute_with(Duration::from_secs(30)).await;
    let first = {
        let serve = serve.clone();
        tokio::spawn(async move {
            serve
                .send("POST", "/v1/call", Some(&call(3)), Some(TOKEN))
                .await
        })
    };
    fake.reached(1).await;
    let second = {
        let serve = serve.clone();
        tokio::spawn(async move {
            serve
                .send("POST", "/v1/call", Some(&call(1)), Some(TOKEN))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!second.is_finished(), "the second call waits for room");
    assert_eq!(fake.count(), 1);
    gate.open();
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(second.status, 200, "{}", second.body);
    assert_eq!(fake.count(), 2);
    // A call bigger than a whole limit is refused at once, not queued.
    let started = Instant::now();
    let mut big = call(1);
    big["request"]["maxTokens"] = json!(2000);
    let r = serve
        .send("POST", "/v1/call", Some(&big), Some(TOKEN))
        .await;
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.body["error"]["details"]["budget"], "outputTokens");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}: {}",
        started.elapsed(),
        r.body
    );
}

/// Issue 53 tests: two hosts on one database, 200 calls at once against
/// 50 requests a minute: the minute's spent and reserved, sampled while
/// the load runs, never pass 50; exactly what fits is admitted (each
/// spends what it reserved), and every refusal says when the minute ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hosts_on_one_database_never_pass_a_per_minute_limit() {
    const LIMIT: u64 = 50;
    const CALLS: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    for (name, runlog, _cluster) in callai_tests::runlog_backends::urls(dir.path()) {
        let fake = FakeServer::repeating(Reply::ok(short_completion())).await;
        let limits = format!("[[tenants.team.limits]]\nrequests = {LIMIT}\nper = \"1m\"\n");
        let config = config(dir.path(), &runlog, fake.port(), &limits, 0);
        let hosts = [Arc::new(host(&config)), Arc::new(host(&config))];
        minute_with(Duration::from_secs(30)).await;
        let running = Arc::new(AtomicBool::new(true));
        let sampler = {
            let (serve, running) = (hosts[0].clone(), running.clone());
            tokio::spawn(async move {
                let mut most = 0;
                while running.load(Ordering::Relaxed) {
                    let b = serve
                        .send("GET", "/v1/budget", None, Some(TOKEN))
                        .await
                        .body;
                    let l = &b["limits"][0];
                    let used = l["spent"]["requests"].as_u64().unwrap()
                        + l["reserved"]["requests"].as_u64().unwrap();
                    most = most.max(used);
                }
                most
            })
        };
        let tasks: Vec<_> = (0..CALLS)
            .map(|i| {
                let serve = hosts[i % 2].clone();
                tokio::spawn(async move {
                    serve
                        .send("POST", "/v1/call", Some(&call(1)), Some(TOKEN))
                        .await
                })
            })
            .collect();
        let mut admitted = 0;
        for task in tasks {
            let r = task.await.unwrap();
            match r.status {
                200 => admitted += 1,
                429 => {
                    assert_eq!(r.body["error"]["details"]["per"], "1m", "{}", r.body);
                    let after = number(&r, "retry-after");
                    assert!((1..=60).contains(&after), "{name}: {after}");
                    assert_eq!(number(&r, "x-ratelimit-limit-requests"), LIMIT);
                }
                other => panic!("{name}: {other}: {}", r.body),
            }
        }
        running.store(false, Ordering::Relaxed);
        let most = sampler.await.unwrap();
        assert!(most <= LIMIT, "{name}: {most} used of {LIMIT}");
        assert_eq!(admitted, LIMIT as usize, "{name}: exactly what fits");
        assert_eq!(
            fake.count(),
            admitted,
            "{name}: the provider saw what was admitted"
        );
    }
}

/// Issue 53 tests: the `openai` Python client backs off on a rate limit's
/// 429 by the headers it reads. One request a minute; the client's two
/// calls are sent about 5 s before the minute ends: the second is refused
/// with `retry-after-ms` to the minute's end (and `x-should-retry: true`),
/// the client waits that long (its own backoff of two retries would give
/// up within 3 s) and gets in, in the next minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_client_waits_out_a_rate_limit_by_its_headers() {
    let Some(clients) = callai_tests::clients::Clients::installed() else {
        return;
    };
    let fake = FakeServer::repeating(Reply::ok(short_completion())).await;
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "[server]\ntokenEnv = \"ADMIN_TOKEN\"\n[retry]\nmaxRetryAttempts = 1\n\
         [providers.fake]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"FAKE_KEY\"\nmodel = \"m\"\n\
         [tenants.team]\ntokenEnv = \"TEAM_TOKEN\"\n\
         [[tenants.team.limits]]\nrequests = 1\nper = \"1m\"\n",
        fake.url()
    );
    let log = dir.path().join("runs.db");
    let server = callai_tests::serve::TestServer::start_with(&toml, Some(&log), |k| match k {
        "ADMIN_TOKEN" => Some("tok-admin".into()),
        "TEAM_TOKEN" => Some(TOKEN.into()),
        "FAKE_KEY" => Some("sk-fake".into()),
        _ => None,
    })
    .await;
    // Start 6.5 s before a minute ends.
    let now = callai_engine::events::now_ms();
    let to_end = 60_000 - now % 60_000;
    let wait = (to_end + 60_000 - 6_500) % 60_000;
    tokio::time::sleep(Duration::from_millis(wait)).await;
    let minute = callai_engine::events::now_ms() / 60_000;
    let hi = json!([{"role": "user", "content": "hi"}]);
    let plan = json!({"api_key": TOKEN, "max_retries": 2, "calls": [
        {"args": {"model": "fake", "messages": hi, "max_tokens": 10}},
        {"args": {"model": "fake", "messages": hi, "max_tokens": 10}},
    ]});
    let base = server.url.clone();
    let client = callai_tests::clients::Client::OpenAiPython;
    let out = tokio::task::spawn_blocking(move || clients.run(client, &base, &plan))
        .await
        .unwrap();
    for (i, answer) in out.iter().enumerate() {
        assert!(answer["completion"].is_object(), "call {i}: {answer}");
    }
    assert_eq!(fake.count(), 2, "each call reached the provider once");
    let refused = server
        .metric("callai_budget_refused_total{tenant=\"team\"}")
        .await;
    assert_eq!(
        refused, 1.0,
        "the second call was refused once, then waited"
    );
    assert!(
        callai_engine::events::now_ms() / 60_000 > minute,
        "it got in in the next minute"
    );
}

/// Issue 53 #3: on `/v1/messages` the limits are also said as Anthropic's
/// API says them (`anthropic-ratelimit-*`, the reset an RFC 3339 time at
/// the minute's end), on an answer and on the refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_messages_drop_in_says_the_limits_as_anthropic_does() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeServer::repeating(Reply::ok(short_completion())).await;
    let runlog = dir.path().join("runs.db");
    // A call reserves its three attempts and spends one: the second does
    // not fit in the two left.
    let limits = "[[tenants.team.limits]]\nrequests = 3\nper = \"1m\"\n";
    let config = config(dir.path(), runlog.to_str().unwrap(), fake.port(), limits, 0);
    let serve = host(&config);
    minute_with(Duration::from_secs(10)).await;
    let body = json!({"model": "fake/m", "max_tokens": 10,
                      "messages": [{"role": "user", "content": "hi"}]});
    let minute_end = (jiff::Timestamp::now().as_second() / 60 + 1) * 60;
    for (status, remaining) in [(200, "2"), (429, "2")] {
        let r = serve
            .send("POST", "/v1/messages", Some(&body), Some(TOKEN))
            .await;
        assert_eq!(r.status, status, "{}", r.body);
        assert_eq!(
            header(&r, "anthropic-ratelimit-requests-limit").as_deref(),
            Some("3")
        );
        assert_eq!(
            header(&r, "anthropic-ratelimit-requests-remaining").as_deref(),
            Some(remaining)
        );
        let reset: jiff::Timestamp = header(&r, "anthropic-ratelimit-requests-reset")
            .unwrap()
            .parse()
            .unwrap();
        assert!((reset.as_second() - minute_end).abs() <= 1, "{reset}");
    }
}
