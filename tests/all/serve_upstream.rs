//! What goes upstream is what the model expects (issue 34, items 2 and 3):
//! the token limit in the field the model takes (`maxTokensField`, `auto`
//! by the model's family), a provider's `headers`, `query` and `extraBody`
//! on every request, and what the host sets itself or the key refused at
//! start-up. Checked on what a loopback fake received.

use callai_config::Config;
use callai_tests::fake_server::{Received, Reply};
use callai_tests::serve::TestServer;
use callai_tests::wire::Api;
use serde_json::{Value, json};

/// A server whose OpenAI-kind provider `p` (its section's extra `keys`)
/// answers `replies`; what the fake received for `request` on `/v1/call`.
async fn received(keys: &str, replies: Vec<Reply>, request: Value) -> (Value, Vec<Received>) {
    let (server, fake) = TestServer::before_fake("openai", keys, replies).await;
    let answer = server.post("/v1/call", &json!({"request": request})).await;
    server.shutdown().await;
    (answer.body, fake.received())
}

fn hello(max_tokens: u32) -> Value {
    json!({"messages": [{"role": "user", "content": "hi"}], "maxTokens": max_tokens})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_limit_goes_in_the_field_the_model_takes() {
    let ok = || vec![Api::OpenAi.reply("hello", None, "stop", Some(2))];
    for (keys, completion) in [
        ("model = \"o3-mini\"", true),
        ("model = \"gpt-5-mini-2025-08-07\"", true),
        ("model = \"gpt-4o-mini\"", false),
        (
            "model = \"o3-mini\"\nmaxTokensField = \"max_tokens\"",
            false,
        ),
        (
            "model = \"llama3\"\nmaxTokensField = \"max_completion_tokens\"",
            true,
        ),
    ] {
        let (answer, seen) = received(keys, ok(), hello(50)).await;
        assert_eq!(answer["result"]["content"], "hello", "{keys}: {answer}");
        let body = &seen[0].body;
        let (sent, absent) = match completion {
            true => ("max_completion_tokens", "max_tokens"),
            false => ("max_tokens", "max_completion_tokens"),
        };
        assert_eq!(body[sent], 50, "{keys}: {body}");
        assert!(body.get(absent).is_none(), "{keys}: {body}");
    }
    // A request naming a reasoning model picks the field by that model.
    let mut request = hello(50);
    request["model"] = json!("o1");
    let (_, seen) = received("model = \"gpt-4o-mini\"", ok(), request).await;
    assert_eq!(seen[0].body["max_completion_tokens"], 50);
    // Budget growth grows whichever field is sent.
    let schema = json!({"type": "object", "required": ["a"]});
    let mut request = hello(100);
    request["responseSchema"] = schema;
    let replies = vec![
        Api::OpenAi.reply("{\"a\": ", None, "length", Some(100)),
        Api::OpenAi.reply("{\"a\": 1}", None, "stop", Some(20)),
    ];
    let (answer, seen) = received("model = \"o4-mini\"", replies, request).await;
    assert_eq!(answer["result"]["attempts"]["count"], 2, "{answer}");
    assert_eq!(seen[0].body["max_completion_tokens"], 100);
    assert_eq!(seen[1].body["max_completion_tokens"], 200);
    assert!(seen[1].body.get("max_tokens").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drop_in_keeps_the_field_its_client_sent() {
    // A client's max_completion_tokens to a model auto would send
    // max_tokens: kept, and grown on a truncation.
    let replies = vec![
        Api::OpenAi.reply("{\"a\": ", None, "length", Some(100)),
        Api::OpenAi.reply("{\"a\": 1}", None, "stop", Some(20)),
    ];
    let (server, fake) =
        TestServer::before_fake("openai", "model = \"gpt-4o-mini\"", replies).await;
    let body = json!({
        "model": "p", "max_completion_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "a",
            "schema": {"type": "object", "required": ["a"]}}}
    });
    let answer = server.post("/v1/chat/completions", &body).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let seen = fake.received();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].body["max_completion_tokens"], 100);
    assert_eq!(seen[1].body["max_completion_tokens"], 200);
    assert!(seen.iter().all(|r| r.body.get("max_tokens").is_none()));
    // A client's max_tokens goes by the model, as a /v1/call's does.
    let ok = vec![Api::OpenAi.reply("hello", None, "stop", Some(2))];
    let body = json!({"model": "p", "max_tokens": 30,
                      "messages": [{"role": "user", "content": "hi"}]});
    let (server2, fake2) = TestServer::before_fake("openai", "model = \"gpt-4o-mini\"", ok).await;
    assert_eq!(
        server2.post("/v1/chat/completions", &body).await.status,
        200
    );
    assert_eq!(fake2.received()[0].body["max_tokens"], 30);
    server.shutdown().await;
    server2.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_query_and_extra_body_go_on_every_request() {
    let keys = "model = \"gpt-4o-mini\"\n\
                headers = { \"x-ms-client\" = \"callai\", \"HTTP-Referer\" = \"https://app.example\" }\n\
                query = { \"api-version\" = \"2024-10-21\" }\n\
                extraBody = { user = \"app-1\", seed = 7, metadata = { team = \"books\" } }";
    let replies = vec![
        Reply::Json(503, json!({"error": {"message": "busy"}}), vec![]),
        Api::OpenAi.reply("hello", None, "stop", Some(2)),
    ];
    let (answer, seen) = received(keys, replies, hello(20)).await;
    assert_eq!(answer["result"]["attempts"]["count"], 2, "{answer}");
    for r in &seen {
        assert_eq!(r.path, "/v1/chat/completions?api-version=2024-10-21");
        assert_eq!(r.headers["x-ms-client"], "callai");
        assert_eq!(r.headers["http-referer"], "https://app.example");
        assert_eq!(r.headers["authorization"], "Bearer sk-t");
        assert_eq!(r.body["user"], "app-1");
        assert_eq!(r.body["seed"], 7);
        assert_eq!(r.body["metadata"], json!({"team": "books"}));
        assert_eq!(
            r.body["messages"][0]["content"], "hi",
            "the host's own fields stay"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_goes_in_the_header_the_provider_takes() {
    // Azure OpenAI takes its API keys in `api-key`, never as a bearer token.
    let keys = "model = \"gpt-4o-mini\"\nkeyHeader = \"api-key\"\n\
                query = { \"api-version\" = \"2024-10-21\" }";
    let replies = vec![Api::OpenAi.reply("hello", None, "stop", Some(2))];
    let (answer, seen) = received(keys, replies, hello(20)).await;
    assert_eq!(answer["result"]["content"], "hello", "{answer}");
    assert_eq!(seen[0].headers["api-key"], "sk-t");
    assert!(
        !seen[0].headers.contains_key("authorization"),
        "{:?}",
        seen[0].headers
    );
    // By default, a bearer token.
    let replies = vec![Api::OpenAi.reply("hello", None, "stop", Some(2))];
    let (_, seen) = received("model = \"gpt-4o-mini\"", replies, hello(20)).await;
    assert_eq!(seen[0].headers["authorization"], "Bearer sk-t");
    assert!(!seen[0].headers.contains_key("api-key"));
}

#[test]
fn what_the_host_sets_and_the_key_are_refused_at_start_up_naming_them() {
    let section = "[providers.p]\nkind = \"openai\"\napiKeyEnv = \"\"\n";
    for (keys, named) in [
        (
            "extraBody = { messages = [] }",
            "providers.p.extraBody.messages",
        ),
        (
            "extraBody = { max_tokens = 5 }",
            "providers.p.extraBody.max_tokens",
        ),
        (
            "headers = { Authorization = \"Bearer x\" }",
            "providers.p.headers.Authorization",
        ),
        // A value of no variant is TOML's error, at its line and column.
        (
            "maxTokensField = \"max_output\"",
            "expected one of `max_tokens`",
        ),
        (
            "keyHeader = \"bearer\"",
            "expected one of `authorization`, `api-key`, `x-api-key`",
        ),
        (
            "headers = { api-key = \"x\" }",
            "providers.p.headers.api-key",
        ),
    ] {
        let e = Config::from_toml(&format!("{section}{keys}\n")).unwrap_err();
        assert!(e.to_string().contains(named), "{keys}: {e}");
    }
    let anthropic =
        "[providers.a]\nkind = \"anthropic\"\nmaxTokensField = \"max_completion_tokens\"\n";
    let e = Config::from_toml(anthropic).unwrap_err();
    assert_eq!(e.key(), Some("providers.a.maxTokensField"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_holding_the_key_is_refused_at_start_up() {
    let toml = "[providers.p]\nkind = \"openai\"\nbaseUrl = \"http://127.0.0.1:9/v1\"\n\
                apiKeyEnv = \"FAKE_KEY\"\nquery = { key = \"sk-up-0248\" }\n";
    let config = Config::from_toml(toml).expect("the key is not known before start-up");
    let env = |k: &str| (k == "FAKE_KEY").then(|| "sk-up-0248".to_owned());
    let e =
        callai_providers::start(&config.providers, &env, &config.host.limits).expect_err("refused");
    assert_eq!(e.key(), Some("providers.p.query.key"), "{e}");
    assert!(
        !e.to_string().contains("sk-up-0248"),
        "the key is never echoed: {e}"
    );
}
