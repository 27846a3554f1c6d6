//! Tenants and their budgets on `callai serve` (issue 24), in one process:
//! the worst case reserved before any request and refused naming the key,
//! what the attempts really were charged (an attempt without usage at its
//! `maxTokens`), the remaining headers, `GET /v1/budget`, the metrics, a
//! pack run's calls each held to the budget, tokens and providers per
//! tenant.

use callai_tests::serve::{TestServer, metric_in};
use serde_json::{Value, json};

const CONFIG: &str = r#"
[server]
metricsTokenEnv = "METRICS_TOKEN"
[retry]
backoffBaseMs = 1
backoffMaxMs = 2
[tenants.bookai]
tokenEnv = "BOOKAI_TOKEN"
[tenants.bookai.budget]
requests = 10
outputTokens = 10000
window = "1d"
[tenants.free]
tokenEnv = "FREE_TOKEN"
allowedProviders = []
"#;

const BOOKAI: &str = "tok-bookai";
/// `/metrics` shows every tenant's figures: a scraper's token of its own.
const METRICS: &str = "tok-metrics";

async fn server(dir: &tempfile::TempDir) -> TestServer {
    let log = dir.path().join("runs.db");
    TestServer::start_with(CONFIG, Some(&log), |k| match k {
        "BOOKAI_TOKEN" => Some(BOOKAI.into()),
        "FREE_TOKEN" => Some("tok-free".into()),
        "METRICS_TOKEN" => Some(METRICS.into()),
        _ => None,
    })
    .await
}

/// A response's status, its headers of interest and its body.
struct Reply {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

impl Reply {
    fn header(&self, name: &str) -> Option<u64> {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap().parse().unwrap())
    }
}

async fn send(
    server: &TestServer,
    method: &str,
    path: &str,
    body: Option<&Value>,
    token: Option<&str>,
) -> Reply {
    let mut request = reqwest::Client::new().request(
        reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
        format!("{}{path}", server.url),
    );
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    Reply {
        status,
        headers,
        body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
    }
}

/// `GET /v1/budget` once every call has settled in the database (a host
/// settles its allotment a moment after its calls go idle).
async fn settled_budget(server: &TestServer, token: &str) -> Reply {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let b = send(server, "GET", "/v1/budget", None, Some(token)).await;
        if b.body["budget"]["reserved"]["requests"] == 0 {
            return b;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never settled: {}",
            b.body
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

fn request(max_tokens: u32, max_attempts: u32) -> Value {
    json!({
        "messages": [{"role": "user", "content": "a scene"}],
        "maxTokens": max_tokens,
        "retry": {"maxAttempts": max_attempts},
        "responseSchema": {"type": "object"},
    })
}

fn call(max_tokens: u32, max_attempts: u32, script: Value) -> Value {
    json!({"request": request(max_tokens, max_attempts), "script": script})
}

async fn mock_requests(server: &TestServer) -> f64 {
    let metrics = send(server, "GET", "/metrics", None, Some(METRICS)).await;
    let text = metrics.body.as_str().unwrap().to_owned();
    callai_tests::serve::samples(&text, "callai_provider_requests_total")
        .iter()
        .filter(|(labels, _)| labels.contains("provider=\"mock\""))
        .map(|(_, v)| v)
        .sum()
}

/// Issue 36 #7: a refusal says what to do about it. Two attempts (6000)
/// fit now; the daily window resets at the next midnight UTC, and
/// Retry-After counts the seconds to it.
fn the_refusal_says_what_to_do(r: &Reply) {
    let error = &r.body["error"];
    assert_eq!(error["details"]["fitsMaxAttempts"], 2);
    let resets: jiff::Timestamp = error["details"]["resetsAt"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let now = jiff::Timestamp::now();
    let next_midnight = (now.as_second() / 86_400 + 1) * 86_400;
    assert_eq!(resets.as_second(), next_midnight);
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("at most 2 attempts fits now") && message.contains(&resets.to_string()),
        "{message}"
    );
    let after = r.header("retry-after").expect("Retry-After");
    assert!(
        after >= 1 && after.abs_diff((next_midnight - now.as_second()) as u64) <= 2,
        "{after}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worst_case_is_reserved_and_what_was_spent_is_charged() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(&dir).await;
    // maxAttempts 3, maxTokens 2000, multiplier 2: 2000 + 4000 + 8000 =
    // 14000 output tokens reserved, more than the 10000 of the budget.
    let ok = json!([{"content": "{}", "outputTokens": 1500}]);
    let r = send(
        &server,
        "POST",
        "/v1/call",
        Some(&call(2000, 3, ok.clone())),
        Some(BOOKAI),
    )
    .await;
    assert_eq!(r.status, 429, "{}", r.body);
    let error = &r.body["error"];
    assert_eq!(error["code"], "budget_exceeded");
    assert_eq!(error["details"]["budget"], "outputTokens");
    assert_eq!(error["details"]["left"], 10000);
    assert_eq!(error["details"]["needed"], 14000);
    the_refusal_says_what_to_do(&r);
    assert_eq!(
        mock_requests(&server).await,
        0.0,
        "refused before any request"
    );

    // Two attempts (6000) fit; the call spends one request of 1500 tokens.
    let r = send(
        &server,
        "POST",
        "/v1/call",
        Some(&call(2000, 2, ok)),
        Some(BOOKAI),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.header("x-callai-budget-remaining-output-tokens"),
        Some(8500)
    );
    assert_eq!(r.header("x-callai-budget-remaining-requests"), Some(9));
    assert_eq!(
        r.header("x-callai-budget-remaining-input-tokens"),
        None,
        "unlimited"
    );

    // A truncation that reported no usage is charged its maxTokens (1000),
    // then the doubled retry what it reported.
    let script = json!([{"content": "{\"cut", "finishReason": "length"},
                        {"content": "{}", "outputTokens": 300}]);
    let r = send(
        &server,
        "POST",
        "/v1/call",
        Some(&call(1000, 2, script)),
        Some(BOOKAI),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["result"]["attempts"]["count"], 2);
    assert_eq!(
        r.header("x-callai-budget-remaining-output-tokens"),
        Some(7200)
    );

    let b = settled_budget(&server, BOOKAI).await;
    assert_eq!(b.status, 200, "{}", b.body);
    let budget = &b.body["budget"];
    assert_eq!(b.body["tenant"], "bookai");
    assert_eq!(budget["window"], "1d");
    assert_eq!(budget["spent"]["requests"], 3);
    assert_eq!(budget["spent"]["outputTokens"], 2800);
    assert_eq!(
        budget["reserved"],
        json!({"requests": 0, "outputTokens": 0, "inputTokens": 0})
    );
    assert_eq!(
        budget["remaining"],
        json!({"requests": 7, "outputTokens": 7200, "inputTokens": null})
    );
    assert_eq!(
        budget["windowEndMs"].as_u64().unwrap() - budget["windowStartMs"].as_u64().unwrap(),
        86_400_000
    );

    the_metrics_count_it(&server).await;
    server.shutdown().await;
}

/// `/metrics` counts what bookai spent (3 requests, 2800 output tokens)
/// and the call refused.
async fn the_metrics_count_it(server: &TestServer) {
    let text = send(server, "GET", "/metrics", None, Some(METRICS))
        .await
        .body;
    let text = text.as_str().unwrap();
    let spent = |kind: &str| {
        metric_in(
            text,
            &format!("callai_budget_spent_total{{tenant=\"bookai\",kind=\"{kind}\"}}"),
        )
    };
    assert_eq!((spent("requests"), spent("output_tokens")), (3.0, 2800.0));
    assert_eq!(
        metric_in(text, "callai_budget_refused_total{tenant=\"bookai\"}"),
        1.0
    );
    assert_eq!(
        metric_in(text, "callai_budget_refused_total{tenant=\"free\"}"),
        0.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_are_known_by_their_tokens_and_held_to_their_providers() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(&dir).await;
    let ok = call(10, 1, json!([{"content": "{}", "outputTokens": 1}]));
    for token in [None, Some("nope"), Some("TOK-BOOKAI"), Some("tok-bookai2")] {
        let r = send(&server, "POST", "/v1/call", Some(&ok), token).await;
        assert_eq!(r.status, 401, "{token:?}: {}", r.body);
    }
    let r = send(
        &server,
        "POST",
        "/v1/chat/completions",
        Some(&json!({})),
        Some("nope"),
    )
    .await;
    assert_eq!(r.status, 401);
    assert_eq!(
        r.body["error"]["type"], "authentication_error",
        "the OpenAI shape"
    );
    // `free` may reach no provider, and has no budget.
    let r = send(&server, "POST", "/v1/call", Some(&ok), Some("tok-free")).await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "policy_denied");
    let b = send(&server, "GET", "/v1/budget", None, Some("tok-free")).await;
    assert_eq!(
        b.body,
        json!({"tenant": "free", "budget": null, "limits": []})
    );
    // Each caller's model list is what it may reach.
    let ids = |r: Reply| -> Vec<String> {
        r.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let free = send(&server, "GET", "/v1/models", None, Some("tok-free")).await;
    assert_eq!(ids(free), Vec::<String>::new(), "free reaches no provider");
    let bookai = send(&server, "GET", "/v1/models", None, Some(BOOKAI)).await;
    assert_eq!(ids(bookai), ["mock/mock-1"]);
    // The drop-in endpoints answer a refusal in their own shape, 429.
    let chat = json!({"model": "mock", "max_tokens": 9000,
                      "messages": [{"role": "user", "content": "hi"}]});
    let r = send(
        &server,
        "POST",
        "/v1/chat/completions",
        Some(&chat),
        Some(BOOKAI),
    )
    .await;
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.body["error"]["type"], "rate_limit_error");
    assert_eq!(r.body["error"]["code"], "budget_exceeded");
    assert_eq!(r.headers["x-should-retry"], "false");
    assert!(r.header("retry-after").is_some(), "{:?}", r.headers);
    let message = r.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("resets at"), "{message}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_call_of_a_pack_run_is_held_to_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(&dir).await;
    let script = json!([{"content": "{\"cut", "finishReason": "length", "outputTokens": 100},
                        {"content": "{}", "outputTokens": 150}]);
    let run = json!({"pack": "echo-attempts", "input": request(100, 2), "script": script});
    let r = send(&server, "POST", "/v1/runs", Some(&run), Some(BOOKAI)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["status"], "ok", "{}", r.body);
    let b = settled_budget(&server, BOOKAI).await;
    assert_eq!(b.body["budget"]["spent"]["requests"], 2);
    assert_eq!(b.body["budget"]["spent"]["outputTokens"], 250);
    // A call past what is left: the pack sees policy_denied, naming the
    // budget, before any request.
    let run = json!({"pack": "echo-attempts", "input": request(9000, 2), "script": script});
    let before = mock_requests(&server).await;
    let r = send(&server, "POST", "/v1/runs", Some(&run), Some(BOOKAI)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let text = r.body.to_string();
    assert!(
        text.contains("policy_denied") && text.contains("budget_exceeded"),
        "{text}"
    );
    assert_eq!(mock_requests(&server).await, before);
    server.shutdown().await;
}

#[test]
fn a_bad_tenant_section_stops_start_up_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[tenants.a]\ntokenEnv = \"T\"\n[tenants.a.budget]\nrequests = -3\n",
            "tenants.a.budget.requests",
        ),
        ("[tenants.a]\ntokenEnv = \"T\"\nbudgetz = 1\n", "budgetz"),
        (
            "[tenants.a]\ntokenEnv = \"T\"\n[tenants.a.budget]\nwindow = \"1w\"\n",
            "tenants.a.budget.window",
        ),
        (
            "[tenants.a]\ntokenEnv = \"UNSET_IN_THIS_TEST\"\n",
            "tenants.a.tokenEnv",
        ),
        (
            "[tenants.a]\ntokenEnv = \"T\"\nallowedProviders = [\"nowhere\"]\n",
            "tenants.a.allowedProviders[0]",
        ),
        // A budget, or a limit, with nowhere to keep it.
        (
            "[tenants.a]\ntokenEnv = \"T\"\n[tenants.a.budget]\nrequests = 3\n",
            "tenants.a.budget",
        ),
        (
            "[tenants.a]\ntokenEnv = \"T\"\n[[tenants.a.limits]]\nrequests = 3\nper = \"1m\"\n",
            "tenants.a.limits",
        ),
        // Limits: a window that is none of the five; two on one account.
        (
            "[tenants.a]\ntokenEnv = \"T\"\n[[tenants.a.limits]]\nrequests = 3\nper = \"1s\"\n",
            "tenants.a.limits[0].per",
        ),
        (
            "[tenants.a]\ntokenEnv = \"T\"\n[[tenants.a.limits]]\nrequests = 3\nper = \"1m\"\n\
             [[tenants.a.limits]]\nrequests = 9\nper = \"1m\"\n",
            "tenants.a.limits[1].per",
        ),
    ];
    for (i, (toml, key)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("bad{i}.toml"));
        std::fs::write(&path, toml).unwrap();
        let mut child = crate::callai_command()
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&path)
            .env("T", "tok")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                child.kill().unwrap();
                panic!("{toml}: serve started");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert!(!status.success(), "{toml}");
        assert!(stderr.contains(key), "{toml}: {stderr}");
    }
}
