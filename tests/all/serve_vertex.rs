//! Vertex AI (issue 55, item 1): a Gemini-kind provider with `vertex = {
//! project, location, credentialsFile | tokenCommand }`, through `callai
//! serve`, against a loopback fake that takes only the bearer tokens its
//! own token endpoint made, for a JWT signed by the service account's key
//! (a throwaway RSA key Python's `cryptography` makes for the test).

use callai_tests::clients::Clients;
use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::serve::TestServer;
use callai_tests::vertex_fake::{RsaKey, VertexFake};
use serde_json::json;
use std::time::Duration;

const GENERATE: &str =
    "/v1/projects/proj-1/locations/us-central1/publishers/google/models/gemini-2.5-flash";

async fn server(fake: &VertexFake, how: &str) -> TestServer {
    let toml = format!(
        "[providers.vertex_ai]\nkind = \"gemini\"\nbaseUrl = \"{}/v1\"\n\
         model = \"gemini-2.5-flash\"\n\
         vertex = {{ project = \"proj-1\", location = \"us-central1\", {how} }}\n\
         [defaults]\nprovider = \"vertex_ai\"\n[retry]\nbackoffBaseMs = 1\nbackoffMaxMs = 2\n",
        fake.url()
    );
    TestServer::start_with(&toml, None, |_| None).await
}

fn call() -> serde_json::Value {
    json!({"request": {"messages": [{"role": "user", "content": "Hello."}], "maxTokens": 20}})
}

/// A service account's key file, and a fake that trusts its key and makes
/// tokens living `life` seconds; `None` when the clients' venv (which
/// makes the key) is not installed.
async fn account(life: u64) -> Option<(VertexFake, tempfile::TempDir, String)> {
    let clients = Clients::installed()?;
    let key = RsaKey::make(clients.python());
    let fake = VertexFake::start(&key.public, life, &[]).await;
    let (dir, how) = credentials(&key, fake.url());
    Some((fake, dir, how))
}

/// `key`'s key file, naming `server`'s `/token` as its token endpoint, in
/// a folder of its own; and the `vertex` setting that reads it.
fn credentials(key: &RsaKey, server: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = key.key_file(dir.path(), &format!("{server}/token"));
    let how = format!("credentialsFile = {:?}", file.display().to_string());
    (dir, how)
}

/// Issue 55 tests: each call carries a token the token endpoint made from
/// the account's signed JWT; one token serves the calls until it is due,
/// streamed or not, and it never shows in a trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_token_authorizes_each_call_and_is_reused() {
    let Some((fake, _dir, how)) = account(3600).await else {
        return;
    };
    let server = server(&fake, &how).await;
    for _ in 0..3 {
        let r = server.exchange("/v1/call", &call(), None).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.body["result"]["content"], "From Vertex.");
    }
    let body = json!({"model": "vertex_ai", "stream": true,
                      "messages": [{"role": "user", "content": "Hi"}]});
    let events = server.events("/v1/chat/completions", &body, None).await;
    let text: String = events
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "From Vertex.");
    let seen = fake.seen();
    assert_eq!(seen.grants.len(), 1, "{seen:?}");
    let claims = &seen.grants[0];
    assert_eq!(claims["iss"], "callai@proj-1.iam.gserviceaccount.com");
    assert_eq!(
        claims["scope"],
        "https://www.googleapis.com/auth/cloud-platform"
    );
    let paths: Vec<&str> = seen.requests.iter().map(|(p, _)| p.as_str()).collect();
    let whole = format!("{GENERATE}:generateContent");
    let streamed = format!("{GENERATE}:streamGenerateContent?alt=sse");
    assert_eq!(paths, [&whole, &whole, &whole, &streamed]);
    assert!(seen.requests.iter().all(|(_, a)| a == "Bearer ya29.fake-1"));
    let id = server.exchange("/v1/call", &call(), None).await.headers;
    let id = id.get("x-callai-call-id").unwrap().to_owned();
    let trace = server.get(&format!("/v1/calls/{id}")).await.body;
    assert!(!trace.to_string().contains("ya29."), "{trace}");
}

/// Issue 55 tests: a token is made again before it expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_near_its_end_is_made_again() {
    // A token that lives 1 s is renewed after half of it.
    let Some((fake, _dir, how)) = account(1).await else {
        return;
    };
    let server = server(&fake, &how).await;
    for _ in 0..2 {
        let r = server.exchange("/v1/call", &call(), None).await;
        assert_eq!(r.status, 200, "{}", r.body);
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    let seen = fake.seen();
    assert_eq!(seen.grants.len(), 2, "{seen:?}");
    let auths: Vec<&str> = seen.requests.iter().map(|(_, a)| a.as_str()).collect();
    assert_eq!(auths, ["Bearer ya29.fake-1", "Bearer ya29.fake-2"]);
}

/// Issue 55 tests: a key the token endpoint refuses ends the call with an
/// error naming the endpoint and what it said, before any request reaches
/// the model: no attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_service_account_fails_the_call_before_any_request() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let (signer, trusted) = (
        RsaKey::make(clients.python()),
        RsaKey::make(clients.python()),
    );
    let fake = VertexFake::start(&trusted.public, 3600, &[]).await;
    let (_dir, how) = credentials(&signer, fake.url());
    let server = server(&fake, &how).await;
    let r = server.exchange("/v1/call", &call(), None).await;
    let error = r.body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        error.contains("Vertex AI token endpoint") && error.contains("Invalid JWT Signature"),
        "{}",
        r.body
    );
    assert!(!error.contains("PRIVATE KEY"), "{error}");
    let seen = fake.seen();
    assert_eq!((seen.grants.len(), seen.refused.len()), (0, 1), "{seen:?}");
    assert!(seen.requests.is_empty(), "{seen:?}");
}

/// A token endpoint that answers more than 64 KiB, streamed without a
/// length or declared in one, fails the call saying so, before any request
/// reaches the model; the streamed answer is not read to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_endpoints_answer_over_64_kib_is_refused_unread() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let key = RsaKey::make(clients.python());
    let fake = VertexFake::start(&key.public, 3600, &[]).await;
    let long = format!("{{\"access_token\": \"{}\"}}", "y".repeat(100 << 10));
    for reply in [Reply::Huge(1 << 30), Reply::Raw(200, long)] {
        let endpoint = FakeServer::repeating(reply.clone()).await;
        let (_dir, how) = credentials(&key, endpoint.url());
        let server = server(&fake, &how).await;
        let r = server.exchange("/v1/call", &call(), None).await;
        let error = r.body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            error.contains("Vertex AI token endpoint: its answer is over 64 KiB"),
            "{reply:?}: {}",
            r.body
        );
        assert!(
            endpoint.count() >= 1,
            "{reply:?}: the endpoint was not asked"
        );
        assert!(
            endpoint.body_bytes_sent() < 256 << 20,
            "{} bytes sent",
            endpoint.body_bytes_sent()
        );
    }
    assert!(fake.seen().requests.is_empty(), "{:?}", fake.seen());
}

/// Issue 55 tests: `tokenCommand`'s output is the bearer token; a 401
/// drops it, and the next call runs the command again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_commands_output_is_the_token_and_a_401_makes_it_run_again() {
    let fake = VertexFake::start(&[], 3600, &["ya29.cmd-2"]).await;
    let dir = tempfile::tempdir().unwrap();
    let count = dir.path().join("runs");
    // Prints ya29.cmd-1 the first time it runs, ya29.cmd-2 the second.
    let command = format!(
        "n=$(cat '{0}' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '{0}'; echo ya29.cmd-$n",
        count.display()
    );
    let server = server(&fake, &format!("tokenCommand = {command:?}")).await;
    let first = server.exchange("/v1/call", &call(), None).await;
    assert_eq!(first.status, 502, "{}", first.body);
    assert!(!first.body.to_string().contains("ya29."), "{}", first.body);
    let second = server.exchange("/v1/call", &call(), None).await;
    assert_eq!(second.status, 200, "{}", second.body);
    let third = server.exchange("/v1/call", &call(), None).await;
    assert_eq!(third.status, 200, "{}", third.body);
    let auths: Vec<String> = fake.seen().requests.into_iter().map(|(_, a)| a).collect();
    assert_eq!(
        auths,
        [
            "Bearer ya29.cmd-1",
            "Bearer ya29.cmd-2",
            "Bearer ya29.cmd-2"
        ]
    );
    assert_eq!(std::fs::read_to_string(&count).unwrap().trim(), "2");
}

/// Issue 55 tests: `/v1/embeddings` to a Vertex AI provider goes to the
/// model's `:predict` with the texts as `instances` and the dimensions as
/// `outputDimensionality`; the predictions come back as OpenAI's `data`
/// in order, and their token counts are the call's input tokens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_go_to_the_models_predict() {
    let fake = VertexFake::start(&[], 3600, &["ya29.embed"]).await;
    let how = "tokenCommand = \"echo ya29.embed\"";
    let server = server(&fake, how).await;
    let body = json!({"model": "vertex_ai/text-embedding-005",
                      "input": ["high tide", "a new moon rises"], "dimensions": 2});
    let r = server.exchange("/v1/embeddings", &body, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let vectors: Vec<&serde_json::Value> = r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| &d["embedding"])
        .collect();
    assert_eq!(vectors, [&json!([9, 0.5]), &json!([16, 0.5])]);
    assert_eq!(r.body["usage"]["prompt_tokens"], 6, "{}", r.body);
    let requests = fake.seen().requests;
    assert_eq!(
        requests,
        [(
            "/v1/projects/proj-1/locations/us-central1/publishers/google/models/\
             text-embedding-005:predict"
                .to_owned(),
            "Bearer ya29.embed".to_owned()
        )]
    );
}
