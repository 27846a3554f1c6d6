//! `Idempotency-Key` on `callai serve` (issue 24): a repeat of a settled key
//! is answered from the run log byte for byte with no provider request and
//! no budget charge, on every endpoint that takes one; a repeat while the
//! first is in flight waits for it; another body under the same key is 422;
//! and the OpenAI client's own retry after a connection reset pays the
//! provider once.

use callai_tests::clients::{Client, Clients};
use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::serve::TestServer;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOKEN: &str = "tok-keys";
const METRICS_TOKEN: &str = "tok-metrics";

fn reply(delay: Duration) -> Reply {
    let body = Reply::ok(json!({
        "model": "m-1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "{\"scene\": \"ok\"}"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 30}
    }));
    Reply::Delay(delay, Box::new(body))
}

async fn server(fake: &FakeServer, dir: &tempfile::TempDir) -> TestServer {
    let toml = format!(
        "[providers.fake]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"FAKE_KEY\"\nmodel = \"m-1\"\n\
         [defaults]\nprovider = \"fake\"\n\
         [server]\nmetricsTokenEnv = \"METRICS_TOKEN\"\n\
         [tenants.keys]\ntokenEnv = \"KEYS_TOKEN\"\n[tenants.keys.budget]\noutputTokens = 1000000\n",
        fake.url()
    );
    let log = dir.path().join("runs.db");
    TestServer::start_with(&toml, Some(&log), |k| match k {
        "FAKE_KEY" => Some("sk-fake".into()),
        "KEYS_TOKEN" => Some(TOKEN.into()),
        "METRICS_TOKEN" => Some(METRICS_TOKEN.into()),
        _ => None,
    })
    .await
}

async fn post(
    url: &str,
    path: &str,
    body: &Value,
    key: Option<&str>,
) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let mut request = reqwest::Client::new()
        .post(format!("{url}{path}"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    let r = request.send().await.unwrap();
    let (status, headers) = (r.status().as_u16(), r.headers().clone());
    (status, headers, r.bytes().await.unwrap().to_vec())
}

/// What the tenant spent, once every call has settled in the database
/// (a host settles its allotment a moment after its calls go idle).
async fn spent(url: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = reqwest::Client::new()
            .get(format!("{url}/v1/budget"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        let budget =
            serde_json::from_str::<Value>(&r.text().await.unwrap()).unwrap()["budget"].clone();
        if budget["reserved"]["outputTokens"] == 0 {
            return budget["spent"].clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never settled: {budget}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn request() -> Value {
    json!({"messages": [{"role": "user", "content": "a scene"}], "maxTokens": 100})
}

/// A body for each endpoint that takes a key.
fn bodies() -> Vec<(&'static str, Value)> {
    let messages = json!([{"role": "user", "content": "a scene"}]);
    vec![
        ("/v1/call", json!({"request": request()})),
        (
            "/v1/chat/completions",
            json!({"model": "fake", "messages": messages, "max_tokens": 100}),
        ),
        (
            "/v1/chat/completions",
            json!({"model": "fake", "messages": messages, "max_tokens": 100, "stream": true,
                   "stream_options": {"include_usage": true}}),
        ),
        (
            "/v1/messages",
            json!({"model": "fake", "messages": messages, "max_tokens": 100}),
        ),
        (
            "/v1/runs",
            json!({"pack": "echo-attempts", "input": request()}),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settled_key_is_answered_from_the_log_with_no_request_and_no_charge() {
    let fake = FakeServer::repeating(reply(Duration::ZERO)).await;
    let dir = tempfile::tempdir().unwrap();
    let server = server(&fake, &dir).await;
    for (i, (path, body)) in bodies().into_iter().enumerate() {
        let key = format!("key-{i}");
        let (status, headers, first) = post(&server.url, path, &body, Some(&key)).await;
        assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&first));
        assert!(headers.get("idempotent-replayed").is_none());
        let (seen, charged) = (fake.count(), spent(&server.url).await);
        assert_eq!(seen, i + 1, "{path}: one provider request");
        let (status, headers, again) = post(&server.url, path, &body, Some(&key)).await;
        assert_eq!(status, 200, "{path}");
        assert_eq!(headers["idempotent-replayed"], "true", "{path}");
        assert_eq!(first, again, "{path}: the same answer, byte for byte");
        let kind = headers["content-type"].to_str().unwrap();
        let expected = match body.get("stream") {
            Some(_) => "text/event-stream",
            None => "application/json",
        };
        assert!(kind.starts_with(expected), "{path}: {kind}");
        assert_eq!(fake.count(), seen, "{path}: no provider request");
        assert_eq!(spent(&server.url).await, charged, "{path}: no charge");
    }
    // Without a key, the same body is a call of its own.
    let (path, body) = &bodies()[0];
    assert_eq!(post(&server.url, path, body, None).await.0, 200);
    assert_eq!(fake.count(), bodies().len() + 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeat_waits_for_the_first_and_another_body_is_refused() {
    let fake = FakeServer::repeating(reply(Duration::from_millis(400))).await;
    let dir = tempfile::tempdir().unwrap();
    let server = server(&fake, &dir).await;
    let body = json!({"request": request()});
    let (a, b) = tokio::join!(post(&server.url, "/v1/call", &body, Some("same")), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        post(&server.url, "/v1/call", &body, Some("same")).await
    });
    assert_eq!((a.0, b.0), (200, 200));
    assert_eq!(a.2, b.2, "the repeat got the first one's answer");
    assert_eq!(b.1["idempotent-replayed"], "true");
    assert_eq!(fake.count(), 1, "the provider was asked once");

    let other = json!({"request": {"messages": [{"role": "user", "content": "another"}]}});
    let (status, _, answer) = post(&server.url, "/v1/call", &other, Some("same")).await;
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["error"]["code"], "idempotency_mismatch");
    assert_eq!(answer["error"]["details"]["field"], "Idempotency-Key");
    let chat = json!({"model": "fake", "messages": [{"role": "user", "content": "x"}]});
    let (status, _, answer) = post(
        &server.url,
        "/v1/chat/completions",
        &chat,
        Some(&"k".repeat(256)),
    )
    .await;
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(status, 400, "{answer}");
    assert_eq!(
        answer["error"]["param"], "Idempotency-Key",
        "the OpenAI shape"
    );
    assert_eq!(fake.count(), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_run_log_a_key_is_refused_naming_it() {
    let server = TestServer::start("").await;
    let body = json!({"request": request()});
    let (status, _, answer) = post(&server.url, "/v1/call", &body, Some("k")).await;
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["details"]["field"], "Idempotency-Key");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("run log")
    );
    server.shutdown().await;
}

/// A proxy in front of `target` that, on its first connection, forwards
/// the request and reads the whole answer, then resets the connection
/// instead of passing the answer on; later connections go through.
async fn resetting_proxy(target: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut first = true;
        while let Ok((mut client, _)) = listener.accept().await {
            let mut upstream = tokio::net::TcpStream::connect(&target).await.unwrap();
            if !std::mem::take(&mut first) {
                tokio::spawn(async move {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                });
                continue;
            }
            tokio::spawn(async move {
                let request = read_message(&mut client).await;
                upstream.write_all(&request).await.unwrap();
                let _answer = read_message(&mut upstream).await;
                // The answer was made (and kept); the client never gets it.
                client.set_zero_linger().unwrap();
                drop(client);
            });
        }
    });
    url
}

/// One HTTP/1.1 message with a `content-length` body.
async fn read_message(stream: &mut tokio::net::TcpStream) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the peer closed mid-message");
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        if buf.len() >= end + 4 + length {
            return buf;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_clients_retry_after_a_reset_pays_the_provider_once() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let fake = FakeServer::repeating(reply(Duration::ZERO)).await;
    let dir = tempfile::tempdir().unwrap();
    let server = server(&fake, &dir).await;
    let proxy = resetting_proxy(server.url.trim_start_matches("http://").to_owned()).await;
    let plan = json!({
        "max_retries": 2,
        "api_key": TOKEN,
        "calls": [{"args": {
            "model": "fake",
            "messages": [{"role": "user", "content": "a scene"}],
            "max_tokens": 100,
            "extra_headers": {"Idempotency-Key": "client-key-1"},
        }}]
    });
    let out = tokio::task::spawn_blocking(move || clients.run(Client::OpenAiPython, &proxy, &plan))
        .await
        .unwrap();
    let completion = &out[0]["completion"];
    assert_eq!(
        completion["choices"][0]["message"]["content"], "{\"scene\": \"ok\"}",
        "{out:?}"
    );
    assert_eq!(out[0]["headers"]["x-callai-attempts-count"], "1");
    assert_eq!(fake.count(), 1, "the provider was paid once");
    let charged = spent(&server.url).await;
    assert_eq!(charged["requests"], 1, "{charged}");
    assert_eq!(charged["outputTokens"], 30, "{charged}");
    let metrics = reqwest::Client::new()
        .get(format!("{}/metrics", server.url))
        .bearer_auth(METRICS_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let retries = callai_tests::serve::metric_in(
        &metrics,
        "callai_client_retries_total{endpoint=\"chat_completions\"}",
    );
    assert_eq!(retries, 1.0, "the client's retry was counted");
    server.shutdown().await;
}
