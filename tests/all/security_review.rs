//! The low holes of the security review of `serve` (issue 56, items 5 and
//! 8 to 12), each against a real server: a page cursor of another tenant's
//! call, an image or a tool call over its limit answered as the client's
//! (and naming its size), a cap on images, the answers' caching headers and
//! unique tool-call ids, a price list that never ends, and a half-sent body
//! at shutdown.

use callai_tests::fake_server::FakeServer;
use callai_tests::serve::TestServer;
use callai_tests::wire::Api;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ADMIN: &str = "tok-admin-review";
const A: &str = "tok-a-review";
const B: &str = "tok-b-review";

/// A server with the admin and tenants `a` and `b`, its run log at `log`
/// when given.
async fn tenants(log: Option<&std::path::Path>) -> TestServer {
    let toml = "[server]\ntokenEnv = \"ADMIN\"\n[tenants.a]\ntokenEnv = \"A\"\n[tenants.b]\ntokenEnv = \"B\"\n";
    TestServer::start_with(toml, log, |k| match k {
        "ADMIN" => Some(ADMIN.into()),
        "A" => Some(A.into()),
        "B" => Some(B.into()),
        _ => None,
    })
    .await
}

/// A call of `token`'s on the mock: its id.
async fn call(server: &TestServer, token: &str) -> String {
    let body = json!({"request": {"messages": [{"role": "user", "content": "hi"}]},
                      "script": [{"content": "hello", "outputTokens": 1}]});
    let answer = server
        .send_as(
            "POST",
            "/v1/call",
            Some(body.to_string().into_bytes()),
            Some(token),
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let calls = server
        .send_as("GET", "/v1/calls?limit=1", None, Some(token))
        .await;
    calls.body["data"][0]["id"].as_str().unwrap().to_owned()
}

/// Item 5: `?before=` is a place in the caller's own list; another
/// tenant's call id pages nothing, as an id nobody holds, in memory and in
/// the run log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_naming_another_tenants_call_pages_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for log in [None, Some(dir.path().join("runs.db"))] {
        let server = tenants(log.as_deref()).await;
        let a1 = call(&server, A).await;
        let b1 = call(&server, B).await;
        let a2 = call(&server, A).await;
        let page = |before: &str| format!("/v1/calls?before={before}");
        let own = server.send_as("GET", &page(&a2), None, Some(A)).await;
        assert_eq!(own.body["data"][0]["id"], a1.as_str(), "{}", own.body);
        let theirs = server.send_as("GET", &page(&b1), None, Some(A)).await;
        assert_eq!(theirs.status, 200);
        assert_eq!(
            theirs.body["data"],
            json!([]),
            "log {log:?}: {}",
            theirs.body
        );
        let unknown = server
            .send_as("GET", &page("call_0000000000000000"), None, Some(A))
            .await;
        assert_eq!(
            unknown.body, theirs.body,
            "another's id reads as an unknown one"
        );
        // The admin pages every tenant's, from anyone's call.
        let admin = server.send_as("GET", &page(&b1), None, Some(ADMIN)).await;
        assert_eq!(admin.body["data"][0]["id"], a1.as_str(), "{}", admin.body);
        server.shutdown().await;
    }
}

/// A PNG of `bytes` bytes as a `data:` URL.
fn png(bytes: usize) -> String {
    use base64::Engine;
    let data = base64::engine::general_purpose::STANDARD.encode(vec![7u8; bytes]);
    format!("data:image/png;base64,{data}")
}

/// Items 8 and 9: an image over `[limits] maxImageBytes`, and more images
/// than `[limits] maxImages`, are the client's request refused naming them
/// (413, `limit_exceeded`), never a provider's fault (502); no request is
/// sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_large_an_image_or_too_many_are_the_clients_refused_naming_them() {
    let fake = FakeServer::start(vec![]).await;
    let toml = format!(
        "[providers.p]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"\"\n\
         [defaults]\nprovider = \"p\"\n[limits]\nmaxImageBytes = 1024\nmaxImages = 3\n",
        fake.url()
    );
    let server = TestServer::start(&toml).await;
    let part = |url: &str| json!({"type": "image_url", "image_url": {"url": url}});
    let chat =
        |parts: Vec<Value>| json!({"model": "p", "messages": [{"role": "user", "content": parts}]});
    let big = server
        .post("/v1/chat/completions", &chat(vec![part(&png(2000))]))
        .await;
    assert_eq!(big.status, 413, "{}", big.body);
    let message = big.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("limits.maxImageBytes") && message.contains("messages[0].images[0]"),
        "{message}"
    );
    let call = json!({"request": {"provider": "p", "messages": [{"role": "user", "content": "look",
                                  "images": [{"url": png(2000)}]}]}});
    let big = server.post("/v1/call", &call).await;
    assert_eq!(big.status, 413, "{}", big.body);
    assert_eq!(big.body["error"]["code"], "limit_exceeded");
    let four = vec![
        part(&png(10)),
        part(&png(10)),
        part(&png(10)),
        part(&png(10)),
    ];
    let many = server.post("/v1/chat/completions", &chat(four)).await;
    assert_eq!(many.status, 413, "{}", many.body);
    let message = many.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("limits.maxImages") && message.contains('4'),
        "{message}"
    );
    assert_eq!(fake.count(), 0, "a request was sent");
    server.shutdown().await;
}

/// Item 8: a provider's answer over `[limits] maxResponseBytes` is refused
/// saying its size, tool calls and all (it said "a reply of 0 bytes").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_too_large_in_its_tool_calls_is_refused_saying_its_size() {
    let arguments = format!("{{\"q\": \"{}\"}}", "x".repeat(200_000));
    let reply = Api::OpenAi.tool_reply("", &[("call_1", "search", &arguments)], Some(10));
    let fake = FakeServer::start(vec![reply]).await;
    let toml = format!(
        "[providers.p]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"\"\n\
         [defaults]\nprovider = \"p\"\n[limits]\nmaxResponseBytes = 65536\n",
        fake.url()
    );
    let server = TestServer::start(&toml).await;
    let request = json!({"request": {
        "messages": [{"role": "user", "content": "find it"}],
        "tools": [{"name": "search", "parameters": {"type": "object"}}]}});
    let answer = server.post("/v1/call", &request).await;
    let message = answer.body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains("limits.maxResponseBytes"),
        "{}",
        answer.body
    );
    assert!(!message.contains("a reply of 0 bytes"), "{message}");
    let size: u64 = message
        .split("a reply of ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no size in {message}"));
    assert!(size > 200_000, "{message}");
    server.shutdown().await;
}

/// Item 10: an answer of a caller's own is never cached by a browser or a
/// proxy, nor sniffed into another type; a provider's tool calls that
/// share an id are answered with one id each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_not_stored_nor_sniffed_and_tool_call_ids_are_unique() {
    let reply = Api::OpenAi.tool_reply(
        "",
        &[
            ("call_1", "a", "{}"),
            ("call_1", "b", "{}"),
            ("call_1", "a", "{}"),
        ],
        Some(10),
    );
    let (server, _fake) = TestServer::before_fake("openai", "", vec![reply]).await;
    let client = reqwest::Client::new();
    let body = json!({"model": "p", "messages": [{"role": "user", "content": "go"}],
                      "tools": [{"type": "function", "function": {"name": "a"}},
                                {"type": "function", "function": {"name": "b"}}]});
    let answer = client
        .post(format!("{}/v1/chat/completions", server.url))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let headers = answer.headers().clone();
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let answer: Value = serde_json::from_str(&answer.text().await.unwrap()).unwrap();
    let calls = answer["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap();
    let ids: std::collections::BTreeSet<&str> =
        calls.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!((calls.len(), ids.len()), (3, 3), "{answer}");
    assert!(ids.contains("call_1"), "the first keeps its id: {ids:?}");
    for path in ["/v1/calls", "/v1/facet", "/v1/packs"] {
        let got = client
            .get(format!("{}{path}", server.url))
            .send()
            .await
            .unwrap();
        assert_eq!(got.headers()["cache-control"], "no-store", "{path}");
        assert_eq!(got.headers()["x-content-type-options"], "nosniff", "{path}");
    }
    server.shutdown().await;
}

/// Item 11: a price list is read up to 64 MiB and no further: one that
/// never ends (`/dev/zero`) or is larger is refused naming `pricing.file`.
#[test]
fn a_price_list_past_its_size_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let large = dir.path().join("large.json");
    std::fs::File::create(&large)
        .unwrap()
        .set_len((64 << 20) + 1)
        .unwrap();
    for file in [std::path::Path::new("/dev/zero"), &large] {
        let toml = format!("[pricing]\nfile = \"{}\"\n", file.display());
        let config = callai_config::Config::from_toml(&toml).unwrap();
        let started = Instant::now();
        let err = callai_server::check_config(&config, &|_| None).unwrap_err();
        assert_eq!(err.key(), Some("pricing.file"), "{err}");
        assert!(err.to_string().contains("64 MiB"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(30), "it read on");
    }
}

/// Item 12: a request whose body is not finished when shutdown begins is
/// cut after a few seconds, not the whole grace period, and its client is
/// told so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_body_does_not_hold_a_shutdown_for_its_grace() {
    let mut server = TestServer::start("[server]\nshutdownGraceMs = 60000\n").await;
    let addr = server.url.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /v1/call HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: 1000\r\n\r\n{{\"request\": "
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let began = Instant::now();
    server.begin_shutdown();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut answer)).await;
    assert!(
        read.is_ok(),
        "the half-sent request held the shutdown past 20 s"
    );
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("shutting_down"), "{answer}");
    server.stopped().await;
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "{:?}",
        began.elapsed()
    );
}

/// Item 4: with `[runlog] keepText`, the traces kept in memory hold at
/// most `[server] keepTextBytes` of text together: past it the oldest go,
/// however many `keepCalls` would keep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_text_is_bounded_by_bytes_not_only_by_calls() {
    let toml = "[server]\nkeepCalls = 10000\nkeepTextBytes = 200000\n[runlog]\nkeepText = true\n";
    let server = TestServer::start(toml).await;
    let prompt = "p".repeat(64 << 10);
    for _ in 0..20 {
        let body = json!({"request": {"messages": [{"role": "user", "content": prompt}]},
                          "script": [{"content": "ok", "outputTokens": 1}]});
        let answer = server.post("/v1/call", &body).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    let listed = server.get("/v1/calls?limit=500").await;
    let kept = listed.body["data"].as_array().unwrap();
    let text: usize = kept
        .iter()
        .map(|t| t["prompt"]["text"].as_str().map_or(0, str::len))
        .sum();
    assert!(
        !kept.is_empty() && kept.len() <= 3,
        "{} traces kept",
        kept.len()
    );
    assert!(text <= 200_000, "{text} bytes of text kept");
    server.shutdown().await;
}

/// Item 7: no image bytes are kept. A run's input with a `data:` image is
/// in the run log as its digest; a trace keeping text keeps the image as
/// its digest; a durable run, which would be resumed from its input, is
/// refused rather than keep the bytes or lose them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_image_bytes_are_kept_in_the_run_log_or_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.db");
    let server = TestServer::start_with("[server]\nkeepCalls = 100\n", Some(&log), |_| None).await;
    let image = format!("data:image/png;base64,{}", "SU1BR0VCWVRFUw".repeat(500));
    let input =
        json!({"messages": [{"role": "user", "content": "look", "images": [{"url": image}]}]});
    let run = json!({"pack": "echo-attempts", "input": input, "runId": "r-image",
                     "script": [{"content": "a cat", "outputTokens": 2}]});
    let answer = server.post("/v1/runs", &run).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["status"], "ok", "{}", answer.body);
    let mut durable = run.clone();
    durable["durable"] = json!(true);
    durable["runId"] = json!("r-durable");
    let refused = server.post("/v1/runs", &durable).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(refused.body["error"]["details"]["field"], "durable");
    server.shutdown().await;
    let mut kept = Vec::new();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        // A `-wal` or `-shm` file may go as the log closes: what is left.
        if let Ok(bytes) = std::fs::read(entry.unwrap().path()) {
            kept.extend(bytes);
        }
    }
    let needle = "SU1BR0VCWVRFUw".repeat(4);
    assert!(
        !kept.windows(needle.len()).any(|w| w == needle.as_bytes()),
        "the run log holds the image's bytes"
    );

    // A trace that keeps text keeps the image as its digest.
    let server = TestServer::start("[runlog]\nkeepText = true\n").await;
    let call = json!({"request": input, "script": [{"content": "a cat", "outputTokens": 2}]});
    let answer = server.exchange("/v1/call", &call, None).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let id = answer.headers.get("x-callai-call-id").unwrap().to_owned();
    let trace = server.get(&format!("/v1/calls/{id}")).await;
    let text = trace.body["prompt"]["text"].as_str().unwrap();
    assert!(
        text.contains("image/png") && !text.contains(&needle),
        "{}",
        &text[..200.min(text.len())]
    );
    server.shutdown().await;
}

/// A function tool's parameters: eight described properties, about a
/// kilobyte of text, unique by `seed`.
fn tool(seed: usize) -> Value {
    let properties: serde_json::Map<String, Value> = (0..8)
        .map(|i| {
            let described = json!({"type": "string",
                                   "description": format!("the {i}th detail of request {seed}, in a few words")});
            (format!("field_{seed}_{i}"), described)
        })
        .collect();
    json!({"name": format!("tool_{seed}"), "description": "looks something up",
           "parameters": {"type": "object", "properties": properties}})
}

/// Item 3: a caller sending new tool schemas without end holds the server
/// to what its schema cache says (its compiled schemas counted as what they
/// hold, not their text), and more tools than `[limits] maxTools` are
/// refused before any is compiled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_tool_schemas_without_end_hold_memory_to_the_caches_bound() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.toml");
    std::fs::write(&config, "[log]\nformat = \"off\"\n").unwrap();
    let serve = callai_tests::process::Serve::start(env!("CARGO_BIN_EXE_callai"), &config, &[]);
    let call = |tools: Vec<Value>| {
        json!({"request": {"messages": [{"role": "user", "content": "go"}], "tools": tools},
               "script": [{"content": "done", "outputTokens": 1}]})
    };
    let warm = serve
        .send("POST", "/v1/call", Some(&call(vec![tool(0)])), None)
        .await;
    assert_eq!(warm.status, 200, "{}", warm.body);
    let before = serve.resident_kib();
    for request in 0..80 {
        let tools = (0..128).map(|i| tool(1 + request * 128 + i)).collect();
        let answer = serve
            .send("POST", "/v1/call", Some(&call(tools)), None)
            .await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    let grown_mib = serve.resident_kib().saturating_sub(before) / 1024;
    // 10,240 schemas compiled (220 MiB kept by a cache counting their text,
    // as before); the cache keeps what it charges 64 MiB for.
    assert!(grown_mib < 120, "the server grew by {grown_mib} MiB");
    let too_many = (0..129).map(tool).collect();
    let refused = serve
        .send("POST", "/v1/call", Some(&call(too_many)), None)
        .await;
    assert_eq!(refused.status, 413, "{}", refused.body);
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("limits.maxTools") && message.contains("129"),
        "{message}"
    );
}
