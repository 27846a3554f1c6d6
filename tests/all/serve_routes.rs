//! Model names routed (issue 34, item 1): `[models.NAME]` sends a bare model
//! name to its targets, a chain falls over when a target is unavailable,
//! every request that reached a target counted, weights spread load.
//! Checked against a real `serve` and what each loopback fake received.

use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::serve::{TestServer, samples};
use callai_tests::wire::Api;
use serde_json::{Value, json};
use std::path::Path;

/// A server with OpenAI-kind providers `a` and `b` at `a_url` and `b_url`,
/// the config's extra `more` (its `[models]`, its tenants), backoff 1 ms.
async fn server(a_url: &str, b_url: &str, more: &str) -> TestServer {
    logged(a_url, Some(b_url), more, None).await
}

/// [`server`] with a run log (for budgets); without `b_url`, `more`
/// declares `b` itself.
async fn logged(a_url: &str, b_url: Option<&str>, more: &str, log: Option<&Path>) -> TestServer {
    let b = b_url.map_or(String::new(), |b_url| {
        format!(
            "[providers.b]\nkind = \"openai\"\nbaseUrl = \"{b_url}\"\napiKeyEnv = \"FAKE_KEY\"\n\
             model = \"b-default\"\n"
        )
    });
    let toml = format!(
        "[providers.a]\nkind = \"openai\"\nbaseUrl = \"{a_url}\"\napiKeyEnv = \"FAKE_KEY\"\n\
         model = \"a-default\"\n{b}\
         [retry]\nbackoffBaseMs = 1\nbackoffMaxMs = 2\n{more}"
    );
    TestServer::start_with(&toml, log, |k| match k {
        "FAKE_KEY" => Some("sk-t".into()),
        "A_TOKEN" => Some("tok-a".into()),
        _ => None,
    })
    .await
}

fn ok(text: &str) -> Reply {
    Api::OpenAi.reply(text, None, "stop", Some(3))
}

fn down() -> Reply {
    Reply::Json(503, json!({"error": {"message": "overloaded"}}), vec![])
}

fn chat(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "hi"}]})
}

/// `/v1/call` of a model name, with its events.
fn call(model: &str) -> Value {
    json!({"request": {"model": model, "messages": [{"role": "user", "content": "hi"}]},
           "events": true})
}

/// The provider and reason of each `provider.usage` event of an answer.
fn usage(answer: &Value) -> Vec<(String, String)> {
    let events = answer["events"].as_array().expect("events");
    events
        .iter()
        .filter(|e| e["type"] == "provider.usage")
        .map(|e| {
            let p = &e["payload"];
            (
                p["provider"].as_str().unwrap().into(),
                p["reason"].as_str().unwrap().into(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_model_name_is_routed_on_every_api_and_listed() {
    let a = FakeServer::repeating(ok("from a")).await;
    let b = FakeServer::repeating(ok("from b")).await;
    let routes = "[models.\"gpt-4o-mini\"]\ntargets = [\"a/gpt-4o-mini\"]\n\
                  [models.claude]\ntargets = [\"b\"]\n";
    let server = server(a.url(), b.url(), routes).await;

    let answer = server
        .post("/v1/chat/completions", &chat("gpt-4o-mini"))
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["choices"][0]["message"]["content"], "from a");
    assert_eq!(
        answer.body["model"], "gpt-4o-mini",
        "the name the client sent"
    );
    assert_eq!(a.received()[0].body["model"], "gpt-4o-mini");

    // A target naming only its provider asks for the provider's model.
    let mut messages = chat("claude");
    messages["max_tokens"] = json!(50);
    let answer = server.post("/v1/messages", &messages).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["content"][0]["text"], "from b");
    assert_eq!(b.received()[0].body["model"], "b-default");

    let answer = server.post("/v1/call", &call("gpt-4o-mini")).await;
    assert_eq!(
        answer.body["result"]["content"], "from a",
        "{}",
        answer.body
    );
    assert_eq!(usage(&answer.body), [("a".into(), "first".into())]);
    assert_eq!(a.count(), 2);

    let models = server.get("/v1/models").await.body;
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "claude",
            "gpt-4o-mini",
            "a/a-default",
            "b/b-default",
            "mock/mock-1"
        ]
    );
    let metrics = server.metrics().await;
    let served = samples(&metrics, "callai_routed_calls_total");
    assert!(
        served.contains(&(
            r#"{model="gpt-4o-mini",target="a/gpt-4o-mini"}"#.into(),
            2.0
        )),
        "{served:?}"
    );
    // A name no route, provider or PROVIDER/MODEL holds says what would do.
    let answer = server.post("/v1/chat/completions", &chat("gpt-5")).await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("[models]") && message.contains("gpt-4o-mini"),
        "{message}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_answering_503_hands_the_call_to_the_next_every_request_counted() {
    let a = FakeServer::repeating(down()).await;
    let b = FakeServer::repeating(ok("from b")).await;
    let routes = "[models.fast]\ntargets = [\"a/m-a\", \"b/m-b\"]\n";
    let server = server(a.url(), b.url(), routes).await;

    let answer = server.post("/v1/call", &call("fast")).await;
    let result = &answer.body["result"];
    assert_eq!(result["content"], "from b", "{}", answer.body);
    assert_eq!(
        result["attempts"]["count"], 2,
        "both requests reached a target"
    );
    assert_eq!(
        usage(&answer.body),
        [
            ("a".into(), "first".into()),
            ("b".into(), "x-host-callai-provider-fallback".into())
        ]
    );
    let events = answer.body["events"].as_array().unwrap();
    let retry = events
        .iter()
        .find(|e| e["type"] == "envelope.retry.attempted")
        .unwrap();
    assert_eq!(
        retry["payload"]["reason"],
        "x-host-callai-provider-fallback"
    );
    assert_eq!((a.count(), b.count()), (1, 1));
    assert_eq!(b.received()[0].body["model"], "m-b");
    // The call's trace shows where each request went, and why.
    let traces = server.get("/v1/calls?model=fast").await.body;
    let requests = traces["data"][0]["requests"].as_array().unwrap().clone();
    let hops: Vec<(&str, &str, Option<u64>)> = requests
        .iter()
        .map(|r| {
            (
                r["provider"].as_str().unwrap(),
                r["reason"].as_str().unwrap(),
                r["status"].as_u64(),
            )
        })
        .collect();
    assert_eq!(
        hops,
        [
            ("a", "first", Some(503)),
            ("b", "provider_fallback", Some(200))
        ]
    );
    assert_eq!(traces["data"][0]["route"], "fast");

    // Through the drop-in, the same: its attempts header counts both.
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", server.url))
        .body(chat("fast").to_string())
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-callai-attempts-count"], "2");

    let metrics = server.metrics().await;
    let requests = samples(&metrics, "callai_provider_requests_total");
    for (labels, n) in [
        (r#"{provider="a",reason="first"}"#, 2.0),
        (
            r#"{provider="b",reason="x-host-callai-provider-fallback"}"#,
            2.0,
        ),
    ] {
        assert!(
            requests.contains(&(labels.into(), n)),
            "{labels} {requests:?}"
        );
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_all_down_spends_the_calls_one_ceiling_over_its_targets() {
    let a = FakeServer::repeating(down()).await;
    let c = FakeServer::repeating(down()).await;
    let server = server(
        a.url(),
        c.url(),
        "[models.fast]\ntargets = [\"a\", \"b\"]\n",
    )
    .await;
    let answer = server.post("/v1/call", &call("fast")).await;
    assert_eq!(
        answer.body["error"]["code"], "provider_unavailable",
        "{}",
        answer.body
    );
    assert_eq!(answer.body["error"]["details"]["totalAttempts"], 3);
    assert_eq!(
        (a.count(), c.count()),
        (2, 1),
        "a, b, then a again after a backoff"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_refusing_connections_is_no_attempt_and_the_next_answers() {
    // A port nothing listens on: bound, then closed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let refused = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let b = FakeServer::repeating(ok("from b")).await;
    let routes = "[models.fast]\ntargets = [\"a\", \"b\"]\n";
    let server = server(&refused, b.url(), routes).await;
    let answer = server.post("/v1/call", &call("fast")).await;
    let result = &answer.body["result"];
    assert_eq!(result["content"], "from b", "{}", answer.body);
    assert_eq!(
        result["attempts"]["count"], 1,
        "a refused connection is no request"
    );
    assert_eq!(
        usage(&answer.body),
        [("b".into(), "x-host-callai-provider-fallback".into())]
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_reaches_only_the_targets_it_is_allowed() {
    let a = FakeServer::repeating(ok("from a")).await;
    let b = FakeServer::repeating(ok("from b")).await;
    let more = "[models.fast]\ntargets = [\"b\", \"a\"]\n[models.only-b]\ntargets = [\"b\"]\n\
                [tenants.t]\ntokenEnv = \"A_TOKEN\"\nallowedProviders = [\"a\"]\n";
    let server = server(a.url(), b.url(), more).await;
    let as_tenant = |path: &'static str, body: Value| {
        let body = serde_json::to_vec(&body).unwrap();
        server.send_as("POST", path, Some(body), Some("tok-a"))
    };
    // The chain skips what the tenant may not reach.
    let answer = as_tenant("/v1/call", call("fast")).await;
    assert_eq!(
        answer.body["result"]["content"], "from a",
        "{}",
        answer.body
    );
    assert_eq!(b.count(), 0);
    let answer = as_tenant("/v1/call", call("only-b")).await;
    assert_eq!(answer.status, 403, "{}", answer.body);
    assert_eq!(answer.body["error"]["code"], "policy_denied");
    assert_eq!(answer.body["error"]["details"]["model"], "only-b");
    let models = server
        .send_as("GET", "/v1/models", None, Some("tok-a"))
        .await
        .body;
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["fast", "a/a-default"]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_spread_a_thousand_calls_within_five_points_of_their_shares() {
    let a = FakeServer::repeating(ok("a")).await;
    let b = FakeServer::repeating(ok("b")).await;
    let routes = "[models.spread]\ntargets = [\"a\", \"b\"]\nweights = [3, 1]\n";
    let server = server(a.url(), b.url(), routes).await;
    let body = json!({"request": {"model": "spread",
                                  "messages": [{"role": "user", "content": "hi"}]}});
    let (calls, batch) = (1000, 25);
    let (client, url) = (reqwest::Client::new(), format!("{}/v1/call", server.url));
    for _ in 0..calls / batch {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..batch {
            let send = client
                .post(&url)
                .header("content-type", "application/json")
                .body(body.to_string())
                .send();
            set.spawn(async move { send.await.unwrap().status().as_u16() });
        }
        assert!(set.join_all().await.iter().all(|&s| s == 200));
    }
    let (to_a, to_b) = (a.count(), b.count());
    assert_eq!(to_a + to_b, calls, "one request per call");
    // Shares 3/4 and 1/4; five points is about 3.6 standard deviations of
    // 1,000 independent draws.
    let share_b = to_b as f64 / calls as f64;
    assert!((share_b - 0.25).abs() <= 0.05, "a {to_a}, b {to_b}");
    let metrics = server.metrics().await;
    let served = samples(&metrics, "callai_routed_calls_total");
    let total: f64 = served.iter().map(|(_, n)| n).sum();
    assert_eq!(total, calls as f64, "{served:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_reserves_for_the_whole_chain() {
    // `b` adds 5000 input tokens unseen: a call that may reach it must
    // fit them, even though its first target is `a`.
    let a = FakeServer::repeating(ok("from a")).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.db");
    let more = format!(
        "[providers.b]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"FAKE_KEY\"\n\
         inputOverheadTokens = 5000\n\
         [models.fast]\ntargets = [\"a\", \"b\"]\n[models.near]\ntargets = [\"a\"]\n\
         [tenants.t]\ntokenEnv = \"A_TOKEN\"\n[tenants.t.budget]\ninputTokens = 3000\n",
        a.url()
    );
    let server = logged(a.url(), None, &more, Some(&log)).await;
    let to = |model: &str| {
        let request = json!({"request": {"model": model, "maxTokens": 10, "retry": {"maxAttempts": 1},
                                         "messages": [{"role": "user", "content": "hi"}]}});
        server.send_as(
            "POST",
            "/v1/call",
            Some(request.to_string().into_bytes()),
            Some("tok-a"),
        )
    };
    let refused = to("fast").await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert_eq!(refused.body["error"]["details"]["budget"], "inputTokens");
    assert!(refused.body["error"]["details"]["needed"].as_u64().unwrap() > 5000);
    assert_eq!(a.count(), 0, "refused before any request");
    let fits = to("near").await;
    assert_eq!(fits.status, 200, "{}", fits.body);
    server.shutdown().await;
}
