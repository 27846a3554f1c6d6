//! The bill matches the invoice (issue 51, items 1 and 2), against a real
//! `serve` and loopback fakes: a request refused with an error status
//! costs nothing, one cut or unanswered its worst case; amounts are exact
//! decimals in the headers, the bodies, the traces, the budget, the usage
//! sums and the metrics.

use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::serve::{TestServer, samples};
use callai_tests::wire::Api;
use serde_json::{Value, json};
use std::time::Duration;

const TOKEN: &str = "tok-acme";

/// `serve` with provider `p` at `url` (`prices`, `timeoutMs` 300), an
/// admin token and tenant `acme`, whose budget allows 10 USD a day; its run log in `dir`.
async fn serve(url: &str, prices: &str, dir: &tempfile::TempDir) -> TestServer {
    let toml = format!(
        "[providers.p]\nkind = \"openai\"\nbaseUrl = \"{url}\"\napiKeyEnv = \"\"\nmodel = \"m\"\n\
         timeoutMs = 300\nprices = {prices}\n[defaults]\nprovider = \"p\"\n\
         [retry]\nbackoffBaseMs = 1\nbackoffMaxMs = 2\n[server]\ntokenEnv = \"ADMIN_TOKEN\"\n\
         [tenants.acme]\ntokenEnv = \"ACME_TOKEN\"\n[tenants.acme.budget]\ncost = 10.0\n"
    );
    TestServer::start_with(&toml, Some(&dir.path().join("runs.db")), |k| match k {
        "ACME_TOKEN" => Some(TOKEN.into()),
        "ADMIN_TOKEN" => Some("tok-admin".into()),
        _ => None,
    })
    .await
}

/// `POST /v1/call` as acme: the status, the cost headers and the body's
/// text as it was written.
async fn call(server: &TestServer, request: Value) -> (u16, Option<String>, String) {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/call", server.url))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(json!({"request": request}).to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let cost = response
        .headers()
        .get("x-callai-cost")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, cost, response.text().await.unwrap())
}

/// `GET path` as acme, the body's text.
async fn read(server: &TestServer, path: &str) -> String {
    reqwest::Client::new()
        .get(format!("{}{path}", server.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

fn text_request(max_attempts: u32) -> Value {
    json!({"messages": [{"role": "user", "content": "hi"}], "maxTokens": 100,
           "retry": {"maxAttempts": max_attempts}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_with_an_error_status_costs_nothing_and_the_budget_is_charged_the_same() {
    let replies = vec![
        Reply::Json(503, json!({"error": {"message": "overloaded"}}), vec![]),
        Reply::Json(429, json!({"error": {"message": "slow down"}}), vec![]),
        Api::OpenAi.reply("ok", None, "stop", Some(20)),
    ];
    let fake = FakeServer::start(replies).await;
    let dir = tempfile::tempdir().unwrap();
    let server = serve(fake.url(), "{ input = 2.0, output = 10.0 }", &dir).await;
    let (status, cost, body) = call(&server, text_request(3)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(fake.count(), 3);
    // 11 input and 20 output tokens at 2 and 10 per million: the one
    // request the provider bills.
    assert_eq!(cost.as_deref(), Some("0.000222"));
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body["cost"],
        json!({"amount": 0.000222, "currency": "USD", "complete": true})
    );
    // The RFC 0248 record is unchanged: two requests reported no usage.
    assert_eq!(body["result"]["attempts"]["usageComplete"], false);

    let traces: Value = serde_json::from_str(&read(&server, "/v1/calls").await).unwrap();
    let requests = traces["data"][0]["requests"].as_array().unwrap();
    let priced: Vec<(u64, &Value)> = requests
        .iter()
        .map(|r| (r["status"].as_u64().unwrap(), &r["cost"]))
        .collect();
    let nothing = json!({"amount": 0, "currency": "USD", "complete": true});
    let billed = json!({"amount": 0.000222, "currency": "USD", "complete": true});
    assert_eq!(priced, [(503, &nothing), (429, &nothing), (200, &billed)]);
    assert_eq!(traces["data"][0]["cost"], billed);

    // The budget reserved the worst case and settled at the bill.
    let budget: Value = serde_json::from_str(&read(&server, "/v1/budget").await).unwrap();
    assert_eq!(budget["budget"]["spent"]["cost"], 0.000222, "{budget}");
    assert_eq!(budget["budget"]["spent"]["requests"], 3);
    assert_eq!(
        budget["budget"]["reserved"]["cost"], 0,
        "a whole amount is whole"
    );

    let metrics = server.metrics().await;
    let spent: f64 = samples(&metrics, "callai_cost_total")
        .iter()
        .map(|(_, n)| n)
        .sum();
    assert_eq!(spent, 0.000222, "{metrics}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_cut_or_unanswered_is_priced_at_its_worst_case_and_marked_so() {
    let replies = vec![
        // Past the provider's 300 ms timeout.
        Reply::Delay(
            Duration::from_secs(2),
            Box::new(Api::OpenAi.reply("late", None, "stop", Some(1))),
        ),
        // A success the host cannot read: what the provider billed is unknown.
        Reply::Raw(200, "{\"choices\": [".into()),
    ];
    let fake = FakeServer::start(replies).await;
    let dir = tempfile::tempdir().unwrap();
    let server = serve(fake.url(), "{ input = 2.0, output = 10.0 }", &dir).await;
    for _ in 0..2 {
        let (status, _, body) = call(&server, text_request(1)).await;
        assert_ne!(status, 200, "{body}");
    }
    let traces: Value = serde_json::from_str(&read(&server, "/v1/calls").await).unwrap();
    for trace in traces["data"].as_array().unwrap() {
        let cost = &trace["requests"][0]["cost"];
        // At most the input bound's tokens at 2 per million and 100 output
        // at 10: at least the output's 0.001.
        assert_eq!(cost["complete"], false, "{trace}");
        assert!(cost["amount"].as_f64().unwrap() >= 0.001, "{trace}");
        assert_eq!(trace["cost"], *cost);
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amounts_are_exact_decimals_wherever_they_are_shown() {
    // 0.1 and 0.2 of a dollar: as binary floats they sum to
    // 0.30000000000000004.
    let replies = vec![
        Api::OpenAi.reply("{\"a\": ", None, "length", Some(100_000)),
        Api::OpenAi.reply("{\"a\": 1}", None, "stop", Some(200_000)),
    ];
    let fake = FakeServer::start(replies).await;
    let dir = tempfile::tempdir().unwrap();
    let server = serve(fake.url(), "{ input = 0.0, output = 1.0 }", &dir).await;
    let mut request = text_request(2);
    request["responseSchema"] = json!({"type": "object", "required": ["a"]});
    let (status, cost, body) = call(&server, request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(cost.as_deref(), Some("0.3"));
    assert!(
        body.contains(r#""cost":{"amount":0.3,"currency":"USD","complete":true}"#),
        "{body}"
    );
    let traces = read(&server, "/v1/calls").await;
    for amount in [r#""amount":0.1,"#, r#""amount":0.2,"#, r#""amount":0.3,"#] {
        assert!(traces.contains(amount), "{amount} in {traces}");
    }
    let usage = read(&server, "/v1/usage?minutes=5").await;
    assert!(usage.contains(r#""amount":0.3,"#), "{usage}");
    let budget = read(&server, "/v1/budget").await;
    assert!(budget.contains(r#""cost":0.3"#), "{budget}");
    let metrics = server.metrics().await;
    for (reason, amount) in [("first", " 0.1"), ("truncation", " 0.2")] {
        assert!(
            metrics.lines().any(|l| l.starts_with("callai_cost_total")
                && l.contains(&format!("reason=\"{reason}\""))
                && l.ends_with(amount)),
            "{reason} {amount} in {metrics}"
        );
    }
    assert!(!format!("{traces}{usage}{budget}{metrics}").contains("0000000000"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_money_refusal_names_the_max_tokens_that_fits_and_a_tenant_default_lets_a_call_fit() {
    let fake = FakeServer::repeating(Api::OpenAi.reply("ok", None, "stop", Some(5))).await;
    let dir = tempfile::tempdir().unwrap();
    // 0.01 USD a day each; `lean`'s clients send no max_tokens.
    let toml = format!(
        "[providers.p]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"\"\nmodel = \"m\"\n\
         prices = {{ input = 2.0, output = 10.0 }}\n[defaults]\nprovider = \"p\"\n\
         [tenants.acme]\ntokenEnv = \"ACME_TOKEN\"\n[tenants.acme.budget]\ncost = 0.01\n\
         [tenants.lean]\ntokenEnv = \"LEAN_TOKEN\"\ndefaultMaxTokens = 200\n\
         [tenants.lean.budget]\ncost = 0.01\n",
        fake.url()
    );
    let server = TestServer::start_with(&toml, Some(&dir.path().join("runs.db")), |k| match k {
        "ACME_TOKEN" => Some(TOKEN.into()),
        "LEAN_TOKEN" => Some("tok-lean".into()),
        _ => None,
    })
    .await;
    let hi = json!({"messages": [{"role": "user", "content": "hi"}]});
    // Three attempts of the default 4000 tokens at 10 per million: 0.12.
    let (status, _, body) = call(&server, hi.clone()).await;
    assert_eq!(status, 429, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    let details = &body["error"]["details"];
    assert_eq!(details["budget"], "cost", "{body}");
    assert!(
        details.get("fitsMaxAttempts").is_none(),
        "one attempt of 4000 does not fit"
    );
    let fits = details["fitsMaxTokens"].as_u64().expect("fitsMaxTokens");
    assert!((100..334).contains(&fits), "{fits}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("maxTokens at most {fits} fits now")),
        "{message}"
    );
    assert_eq!(fake.count(), 0, "nothing sent");
    // What it names fits, one more does not.
    let mut asked = hi.clone();
    asked["maxTokens"] = json!(fits + 1);
    assert_eq!(call(&server, asked.clone()).await.0, 429);
    asked["maxTokens"] = json!(fits);
    let (status, _, body) = call(&server, asked).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(Api::OpenAi.max_tokens(&fake.received()[0]), fits);

    // A tenant whose default is 200 is admitted with the same request.
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", server.url))
        .bearer_auth("tok-lean")
        .header("content-type", "application/json")
        .body(json!({"model": "p", "messages": [{"role": "user", "content": "hi"}]}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    assert_eq!(Api::OpenAi.max_tokens(&fake.received()[1]), 200);
    server.shutdown().await;
}
