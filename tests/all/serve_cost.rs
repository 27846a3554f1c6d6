//! Cost in money (issue 35, items 3 to 5): each request priced at its own
//! provider and model, from `[providers.NAME.prices]` or a `[pricing]
//! file` in LiteLLM's format; a request without usage at its worst case,
//! marked incomplete; the cost in the answer's headers and body, in the
//! call's trace and in `callai_cost_total`.

use callai_config::Config;
use callai_tests::fake_server::FakeServer;
use callai_tests::serve::{TestServer, samples};
use callai_tests::wire::Api;
use serde_json::{Value, json};

/// `POST path`: the cost headers and the body.
async fn post(server: &TestServer, path: &str, body: &Value) -> (Option<(f64, String)>, Value) {
    let answer = server.exchange(path, body, None).await;
    let cost = answer.headers.get("x-callai-cost").map(|amount| {
        let currency = answer.headers.get("x-callai-cost-currency").unwrap();
        (amount.parse().unwrap(), currency.to_owned())
    });
    (cost, answer.body)
}

/// A config of provider `p` at `url` answering as `model`, priced by `file`.
fn priced(url: &str, model: &str, file: &std::path::Path) -> String {
    format!(
        "[providers.p]\nkind = \"openai\"\nbaseUrl = \"{url}\"\napiKeyEnv = \"\"\nmodel = \"{model}\"\n\
         [pricing]\nfile = \"{}\"\n",
        file.display()
    )
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_attempt_is_priced_and_the_call_costs_their_sum() {
    let replies = vec![
        Api::OpenAi.reply("{\"a\": ", None, "length", Some(100)),
        Api::OpenAi.reply("{\"a\": 1}", None, "stop", Some(20)),
    ];
    let prices = "prices = { input = 2.0, output = 10.0, currency = \"EUR\" }";
    let (server, _fake) = TestServer::before_fake("openai", prices, replies).await;
    let request = json!({"request": {"messages": [{"role": "user", "content": "hi"}], "maxTokens": 100,
                                     "responseSchema": {"type": "object", "required": ["a"]}}});
    let (cost, body) = post(&server, "/v1/call", &request).await;
    // 11 input tokens each; 100 then 20 output: (22 + 1000 + 22 + 200) per million.
    let (amount, currency) = cost.expect("the cost headers");
    assert!(close(amount, 0.001244), "{amount}");
    assert_eq!(currency, "EUR");
    assert_eq!(body["cost"]["complete"], true, "{body}");
    let traces = server.get("/v1/calls").await.body;
    let requests = traces["data"][0]["requests"].as_array().unwrap();
    assert!(close(
        requests[0]["cost"]["amount"].as_f64().unwrap(),
        0.001022
    ));
    assert!(close(
        requests[1]["cost"]["amount"].as_f64().unwrap(),
        0.000222
    ));
    assert!(close(
        traces["data"][0]["cost"]["amount"].as_f64().unwrap(),
        0.001244
    ));
    // What the retry cost shows by its reason.
    let metrics = server.metrics().await;
    let spent = samples(&metrics, "callai_cost_total");
    let by_reason = |reason: &str| {
        spent
            .iter()
            .find(|(labels, _)| labels.contains(&format!("reason=\"{reason}\"")))
            .map(|(_, n)| *n)
    };
    assert!(
        by_reason("truncation").is_some_and(|n| close(n, 0.000222)),
        "{spent:?}"
    );
    assert!(
        by_reason("first").is_some_and(|n| close(n, 0.001022)),
        "{spent:?}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_litellm_price_list_prices_by_model_and_a_reply_without_usage_at_its_worst_case() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("model_prices_and_context_window.json");
    std::fs::write(
        &file,
        json!({
            "sample_spec": {"input_cost_per_token": "0.0", "output_cost_per_token": "0.0"},
            "m-cheap": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6, "mode": "chat"},
            "p/m-cheap": {"input_cost_per_token": 3e-6, "output_cost_per_token": 4e-6}
        })
        .to_string(),
    )
    .unwrap();
    let fake = FakeServer::start(vec![
        Api::OpenAi.reply("hello", None, "stop", Some(5)),
        // No usage at all: priced at its worst case.
        Api::OpenAi.reply("hello", None, "stop", None),
    ])
    .await;
    let server = TestServer::start(&priced(fake.url(), "m-cheap", &file)).await;
    let request = |max: u32| {
        json!({"request": {"provider": "p", "maxTokens": max,
                           "messages": [{"role": "user", "content": "hi"}]}})
    };
    // The provider/model entry wins over the bare model's: 11 in, 5 out.
    let (cost, _) = post(&server, "/v1/call", &request(50)).await;
    assert!(close(cost.unwrap().0, 11.0 * 3e-6 + 5.0 * 4e-6));
    let (cost, body) = post(&server, "/v1/call", &request(50)).await;
    let (amount, currency) = cost.unwrap();
    assert_eq!(currency, "USD");
    assert_eq!(body["cost"]["complete"], false, "{body}");
    // Its worst case: its input bound (well past 11 tokens) and 50 out.
    assert!(amount > 50.0 * 4e-6 + 11.0 * 3e-6, "{amount}");
    server.shutdown().await;
    // A model no price names costs nothing said: no header.
    let fake = FakeServer::start(vec![Api::OpenAi.reply("hi", None, "stop", Some(1))]).await;
    let server = TestServer::start(&priced(fake.url(), "m-other", &file)).await;
    let (cost, body) = post(&server, "/v1/call", &request(50)).await;
    assert_eq!(cost, None, "{body}");
    assert_eq!(body.get("cost"), None);
    server.shutdown().await;
}

#[test]
fn a_price_list_that_cannot_be_read_or_prices_nothing_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, "{\"dall-e\": {\"output_cost_per_image\": 0.04}}").unwrap();
    let missing = dir.path().join("missing.json");
    for (file, says) in [(&empty, "names no model"), (&missing, "missing.json")] {
        let toml = format!("[pricing]\nfile = \"{}\"\n", file.display());
        let config = Config::from_toml(&toml).unwrap();
        let err = callai_server::check_config(&config, &|_| None).unwrap_err();
        assert_eq!(err.key(), Some("pricing.file"), "{err}");
        assert!(err.to_string().contains(says), "{err}");
    }
    let bad = "[providers.p]\nkind = \"openai\"\nprices = { input = -1.0, output = 1.0 }\n";
    let err = Config::from_toml(bad).unwrap_err();
    assert_eq!(err.key(), Some("providers.p.prices.input"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_read_from_a_prompt_cache_is_priced_at_its_own_price() {
    let reply = callai_tests::fake_server::Reply::ok(json!({
        "model": "m-1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 10,
                  "prompt_tokens_details": {"cached_tokens": 800}}
    }));
    let prices = "prices = { input = 2.0, cachedInput = 0.5, output = 10.0 }";
    let (server, _fake) = TestServer::before_fake("openai", prices, vec![reply]).await;
    let request = json!({"request": {"messages": [{"role": "user", "content": "hi"}]}});
    let (cost, _) = post(&server, "/v1/call", &request).await;
    // 200 fresh at 2, 800 cached at 0.5, 10 out at 10, per million.
    assert!(close(cost.unwrap().0, (400.0 + 400.0 + 100.0) / 1e6));
    let traces = server.get("/v1/calls").await.body;
    let first = &traces["data"][0]["requests"][0];
    assert_eq!(
        (&first["inputTokens"], &first["cachedInputTokens"]),
        (&json!(1000), &json!(800))
    );
    server.shutdown().await;
}

/// Issue 56, item 2: a price above `[pricing] maxPerMillion` (1,000 per
/// million tokens by default) is refused at start-up naming its key, in a
/// provider's section or in the price list, instead of turning a budget in
/// money into nothing.
#[test]
fn a_price_over_the_bound_is_refused_at_start_up_naming_its_key() {
    for (toml, key) in [
        (
            "[providers.p]\nkind = \"openai\"\nprices = { input = 1e308, output = 1e308 }\n",
            "providers.p.prices.input",
        ),
        (
            "[providers.p]\nkind = \"openai\"\nprices = { input = 1.0, output = 1000.5 }\n",
            "providers.p.prices.output",
        ),
        (
            "[providers.p]\nkind = \"openai\"\nprices = { input = 1.0, cachedInput = 2e3, output = 1.0 }\n",
            "providers.p.prices.cachedInput",
        ),
        ("[pricing]\nmaxPerMillion = 0\n", "pricing.maxPerMillion"),
    ] {
        let err = Config::from_toml(toml).unwrap_err();
        assert_eq!(err.key(), Some(key), "{toml}: {err}");
    }
    // An operator whose prices are that dear raises the bound.
    let dear = "[providers.p]\nkind = \"openai\"\nprices = { input = 1.0, output = 5000.0 }\n\
                [pricing]\nmaxPerMillion = 10000\n";
    Config::from_toml(dear).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("prices.json");
    std::fs::write(
        &list,
        r#"{"cheap": {"input_cost_per_token": 1e-7, "output_cost_per_token": 1e-7},
            "typo": {"input_cost_per_token": 1e300, "output_cost_per_token": 1e-6}}"#,
    )
    .unwrap();
    let config = Config::from_toml(&format!("[pricing]\nfile = \"{}\"\n", list.display())).unwrap();
    let err = callai_server::check_config(&config, &|_| None).unwrap_err();
    assert_eq!(err.key(), Some("pricing.file"), "{err}");
    assert!(
        err.to_string().contains("\"typo\"") && err.to_string().contains("maxPerMillion"),
        "{err}"
    );
}

/// Issue 56, item 2: at the largest price the bound allows and the
/// largest usage a provider may report (2^32 - 1 tokens each way), a call
/// costs what it says, a finite decimal, and its tenant's budget in money
/// is charged all of it: the next call is refused, never let through as a
/// cost of nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_price_and_usage_are_charged_in_full_never_as_nothing() {
    let most = u32::MAX;
    let reply = callai_tests::fake_server::Reply::ok(json!({
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": most, "completion_tokens": most}
    }));
    let fake = FakeServer::start(vec![reply.clone(), reply]).await;
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "[providers.p]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"\"\nmodel = \"m\"\n\
         prices = {{ input = 1000.0, output = 1000.0 }}\n[defaults]\nprovider = \"p\"\n\
         [tenants.t]\ntokenEnv = \"T\"\n[tenants.t.budget]\ncost = 1.0\n",
        fake.url()
    );
    let server = TestServer::start_with(&toml, Some(&dir.path().join("runs.db")), |k| {
        (k == "T").then(|| "tok-t".into())
    })
    .await;
    let request =
        json!({"request": {"messages": [{"role": "user", "content": "hi"}], "maxTokens": 10}});
    let first = server.exchange("/v1/call", &request, Some("tok-t")).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let billed = 2.0 * f64::from(most) * 1000.0 / 1e6;
    let said = first.headers.get("x-callai-cost").unwrap();
    assert!(!said.contains('e') && !said.contains("inf"), "{said}");
    let said: f64 = said.parse().unwrap();
    assert!((said - billed).abs() < 1e-3, "{said} against {billed}");
    let budget = server
        .send_as("GET", "/v1/budget", None, Some("tok-t"))
        .await;
    let spent = budget.body["budget"]["spent"]["cost"].as_f64().unwrap();
    assert!((spent - billed).abs() < 1e-3, "{}", budget.body);
    let second = server.exchange("/v1/call", &request, Some("tok-t")).await;
    assert_eq!(second.status, 429, "{}", second.body);
    assert_eq!(fake.count(), 1, "the second call reached the provider");
    server.shutdown().await;
}
