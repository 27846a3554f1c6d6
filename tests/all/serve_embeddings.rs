//! `POST /v1/embeddings` through `callai serve` (issue 52), with the
//! `openai` client unchanged but for its base URL, against a loopback fake:
//! a list input whose first request meets a 429 (two attempts counted, the
//! vectors as the provider sent them), the client's options passed on, a
//! budget in input tokens that refuses before any request, and what cannot
//! be embedded refused by name.

use callai_tests::clients::Clients;
use callai_tests::fake_server::{FakeServer, Received, Reply};
use callai_tests::serve::TestServer;
use serde_json::{Value, json};

const TOKEN: &str = "tok-embeddings-small-0248";
const BIG: &str = "tok-embeddings-big-0248";

/// An embeddings answer of `vectors` (each as base64 or floats), having
/// counted `input` tokens.
fn embedded(vectors: &[Value], input: u32) -> Reply {
    let data: Vec<Value> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v}))
        .collect();
    Reply::ok(json!({"object": "list", "model": "e-1", "data": data,
                     "usage": {"prompt_tokens": input, "total_tokens": input}}))
}

/// A server whose provider `p` (OpenAI-kind, model `e-1`, 0.02 USD a
/// million input tokens) is `fake`, with
/// a tenant `small` whose budget is 10 input tokens a day and a tenant
/// `big` with none.
async fn server(fake: &FakeServer, log: &std::path::Path) -> TestServer {
    let toml = format!(
        "[providers.p]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"FAKE_KEY\"\nmodel = \"e-1\"\n\
         [providers.p.prices]\ninput = 0.02\noutput = 0.0\n\
         [models.\"text-embed\"]\ntargets = [\"p/e-1\"]\nkind = \"embedding\"\n\
         [providers.a]\nkind = \"anthropic\"\nbaseUrl = \"{}\"\napiKeyEnv = \"FAKE_KEY\"\nmodel = \"c-1\"\n\
         [retry]\nbackoffBaseMs = 1\nbackoffMaxMs = 2\n[defaults]\nprovider = \"p\"\n\
         [tenants.big]\ntokenEnv = \"BIG_TOKEN\"\n[tenants.small]\ntokenEnv = \"SMALL_TOKEN\"\n\
         [tenants.small.budget]\ninputTokens = 10\nwindow = \"1d\"\n",
        fake.url(),
        fake.url()
    );
    TestServer::start_with(&toml, Some(log), |k| match k {
        "FAKE_KEY" => Some("sk-fake-vector-key-0248".into()),
        "SMALL_TOKEN" => Some(TOKEN.into()),
        "BIG_TOKEN" => Some(BIG.into()),
        _ => None,
    })
    .await
}

async fn run(clients: &Clients, server: &TestServer, scenario: &'static str, key: &str) -> Value {
    let (clients, base, key) = (clients.clone(), server.url.clone(), key.to_owned());
    tokio::task::spawn_blocking(move || clients.embeddings(scenario, &base, &key))
        .await
        .unwrap()
}

fn path_and_body(r: &Received) -> (&str, &Value) {
    (r.path.as_str(), &r.body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_client_embeds_a_list_after_a_429_and_is_refused_past_its_budget() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    // [0.5, -1.0] and [1.0, 2.0] as little-endian f32s, base64.
    let busy = Reply::Json(429, json!({"error": {"message": "slow down"}}), vec![]);
    let fake = FakeServer::start(vec![
        busy,
        embedded(&[json!("AAAAPwAAgL8="), json!("AACAPwAAAEA=")], 4),
        embedded(&[json!([0.25, 0.75])], 2),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let server = server(&fake, &dir.path().join("runs.db")).await;

    let out = run(&clients, &server, "list", BIG).await;
    assert_eq!(out["embeddings"], json!([[0.5, -1.0], [1.0, 2.0]]), "{out}");
    assert_eq!(out["usage"]["prompt_tokens"], 4);
    assert_eq!(out["headers"]["x-callai-attempts-count"], "2", "{out}");
    assert_eq!(out["callai"]["attempts"]["count"], 2, "{out}");
    assert_eq!(out["callai"]["attempts"]["outputTokens"], 0);
    // Priced by its input: 4 tokens at 0.02 USD a million.
    assert_eq!(out["headers"]["x-callai-cost"], "0.00000008", "{out}");
    // The 429 reported no usage (RFC 0248 §A.2).
    assert_eq!(out["callai"]["attempts"]["usageComplete"], false);
    let seen = fake.received();
    assert_eq!(seen.len(), 2, "the 429 and the answer");
    let (path, body) = path_and_body(&seen[1]);
    assert_eq!(path, "/v1/embeddings");
    assert_eq!(body["model"], "e-1");
    assert_eq!(body["input"], json!(["first text", "second text"]));
    assert_eq!(
        body["encoding_format"], "base64",
        "the client's default, passed on"
    );

    let out = run(&clients, &server, "floats", BIG).await;
    assert_eq!(out["embeddings"], json!([[0.25, 0.75]]), "{out}");
    let seen = fake.received();
    let (_, body) = path_and_body(&seen[2]);
    assert_eq!(
        (&body["dimensions"], &body["encoding_format"]),
        (&json!(2), &json!("float"))
    );

    // Ten input tokens a day hold less than the input's worst case.
    let out = run(&clients, &server, "list", TOKEN).await;
    assert_eq!(out["status"], 429, "{out}");
    assert_eq!(out["body"]["code"], "budget_exceeded", "{out}");
    assert_eq!(fake.received().len(), 3, "refused before any request");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_be_embedded_is_refused_by_name() {
    let fake = FakeServer::start(vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let server = server(&fake, &dir.path().join("runs.db")).await;
    let cases = [
        (json!({"model": "p", "input": []}), "input"),
        (json!({"model": "p", "input": ["a", ""]}), "input"),
        (json!({"model": "p", "input": {"text": "a"}}), "input"),
        (
            json!({"model": "p", "input": "a", "encoding_format": "int8"}),
            "encoding_format",
        ),
        (
            json!({"model": "p", "input": "a", "stream": true}),
            "stream",
        ),
        (json!({"model": "a", "input": "a"}), "embedding"),
    ];
    for (body, named) in cases {
        let answer = server.exchange("/v1/embeddings", &body, Some(BIG)).await;
        assert_eq!(answer.status, 400, "{body}: {}", answer.body);
        let message = answer.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(named), "{body}: {message}");
    }
    assert!(fake.received().is_empty());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedding_route_is_listed_as_one_and_refuses_a_completion() {
    let fake = FakeServer::start(vec![embedded(&[json!([1.0])], 1)]).await;
    let dir = tempfile::tempdir().unwrap();
    let server = server(&fake, &dir.path().join("runs.db")).await;
    let models = server
        .send_as("GET", "/v1/models", None, Some(BIG))
        .await
        .body;
    let listed = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "text-embed")
        .cloned()
        .expect("the route is listed");
    assert_eq!(listed["callai"]["kind"], "embedding", "{models}");
    let chat = json!({"model": "text-embed", "messages": [{"role": "user", "content": "hi"}]});
    let answer = server
        .exchange("/v1/chat/completions", &chat, Some(BIG))
        .await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    assert_eq!(answer.body["error"]["param"], "model", "{}", answer.body);
    let body = json!({"model": "text-embed", "input": "a"});
    let answer = server.exchange("/v1/embeddings", &body, Some(BIG)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["model"], "text-embed");
    assert_eq!(answer.body["data"][0]["embedding"], json!([1.0]));
    assert_eq!(fake.received().len(), 1, "the completion never reached it");
    assert_eq!(fake.received()[0].body["model"], "e-1");
    server.shutdown().await;
}
