//! Model names an app sends unchanged (issue 51, item 5), against a real
//! `serve` and loopback fakes: a bare name no `[models]` entry routes goes
//! to `[defaults] provider` as that model, on both drop-ins, and is listed
//! by `/v1/models`; a family entry (`[models."gpt-4o*"]`) routes every name
//! it starts with, a target without a model asked for the name sent.

use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::serve::TestServer;
use callai_tests::wire::Api;
use serde_json::{Value, json};

fn ok(text: &str) -> Reply {
    Api::OpenAi.reply(text, None, "stop", Some(3))
}

fn down() -> Reply {
    Reply::Json(503, json!({"error": {"message": "overloaded"}}), vec![])
}

async fn server(a: &str, b: &str, more: &str) -> TestServer {
    let toml = format!(
        "[providers.a]\nkind = \"openai\"\nbaseUrl = \"{a}\"\napiKeyEnv = \"\"\nmodel = \"gpt-4o-mini\"\n\
         [providers.b]\nkind = \"openai\"\nbaseUrl = \"{b}\"\napiKeyEnv = \"\"\nmodel = \"b-own\"\n\
         [retry]\nbackoffBaseMs = 1\nbackoffMaxMs = 2\n{more}"
    );
    TestServer::start(&toml).await
}

fn ids(models: &Value) -> Vec<(String, String)> {
    models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["id"].as_str().unwrap().to_owned(),
                m["owned_by"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_name_goes_to_the_default_provider_as_that_model_on_both_drop_ins() {
    let a = FakeServer::repeating(ok("from a")).await;
    let b = FakeServer::repeating(ok("from b")).await;
    let server = server(a.url(), b.url(), "[defaults]\nprovider = \"a\"\n").await;
    let chat = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]});
    let answer = server.post("/v1/chat/completions", &chat).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["choices"][0]["message"]["content"], "from a");
    assert_eq!(
        a.received()[0].body["model"],
        "gpt-4o",
        "the name sent, unchanged"
    );
    let messages = json!({"model": "claude-sonnet-4-5", "max_tokens": 50,
                          "messages": [{"role": "user", "content": "hi"}]});
    let answer = server.post("/v1/messages", &messages).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(a.received()[1].body["model"], "claude-sonnet-4-5");
    assert_eq!(b.count(), 0);
    // Listed: the default provider's own model by its bare name.
    let models = server.get("/v1/models").await.body;
    assert_eq!(
        ids(&models),
        [
            ("gpt-4o-mini".into(), "a".into()),
            ("a/gpt-4o-mini".into(), "a".into()),
            ("b/b-own".into(), "b".into()),
            ("mock/mock-1".into(), "mock".into())
        ]
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_family_routes_every_name_it_starts_with_and_falls_over_as_a_route_does() {
    let a = FakeServer::repeating(down()).await;
    let b = FakeServer::repeating(ok("from b")).await;
    let routes = "[models.\"gpt-4o*\"]\ntargets = [\"a\", \"b/pinned\"]\n";
    let server = server(a.url(), b.url(), routes).await;
    let chat =
        json!({"model": "gpt-4o-2024-08-06", "messages": [{"role": "user", "content": "hi"}]});
    let answer = server.post("/v1/chat/completions", &chat).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        answer.body["model"], "gpt-4o-2024-08-06",
        "the name the app sent"
    );
    assert_eq!(a.received()[0].body["model"], "gpt-4o-2024-08-06");
    assert_eq!(b.received()[0].body["model"], "pinned");
    let trace = &server.get("/v1/calls").await.body["data"][0];
    assert_eq!(trace["route"], "gpt-4o*", "{trace}");
    let models = server.get("/v1/models").await.body;
    assert_eq!(ids(&models)[0], ("gpt-4o*".into(), "callai".into()));
    // A name it does not start with, with the mock as the default, is
    // refused as before: no app is answered by the mock unawares.
    let other = json!({"model": "o3", "messages": [{"role": "user", "content": "hi"}]});
    let answer = server.post("/v1/chat/completions", &other).await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    assert_eq!(answer.body["error"]["param"], "model");
    server.shutdown().await;
}
