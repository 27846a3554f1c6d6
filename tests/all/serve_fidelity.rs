//! The fidelity gaps found beside issue 31's holes (items 11 to 17),
//! against a real `callai serve` process: a drop-in call to a provider its
//! caller may not reach is `403 policy_denied` naming it, script or not; an
//! `Idempotency-Key` is bound to the policy headers too and is visible
//! ASCII only; `callai.retry: null` is refused as on `/v1/call`; a stream
//! that ends without its end marker is a cut; the OpenAI `usage` keeps what
//! the final attempt reported; a run whose call row is damaged answers its
//! `GET` naming the call (SQLite and PostgreSQL); discovery lists the
//! conformance fixture.

use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::pg::PgCluster;
use callai_tests::process::Serve;
use callai_tests::wire::Api;
use serde_json::{Value, json};
use std::time::Duration;

const TOKEN: &str = "tok-narrow";
/// A tenant that may reach the mock alone.
const MOCK_ONLY: &str = "tok-mockonly";

/// A host with the fake provider at `fake` and a tenant `narrow` that may
/// reach it alone (not the mock); the admin is `tok-admin`.
fn start(dir: &std::path::Path, fake: &FakeServer, runlog: &str) -> Serve {
    let path = dir.join(format!("host-{}.toml", fake.port()));
    let toml = format!(
        r#"
[server]
tokenEnv = "ADMIN_TOKEN"
[retry]
backoffBaseMs = 1
backoffMaxMs = 2
[runlog]
url = "{runlog}"
[providers.fake]
kind = "openai"
baseUrl = "{}"
apiKeyEnv = ""
model = "m-1"
[tenants.narrow]
tokenEnv = "NARROW_TOKEN"
allowedProviders = ["fake"]
[tenants.mockonly]
tokenEnv = "MOCKONLY_TOKEN"
allowedProviders = ["mock"]
"#,
        fake.url()
    );
    std::fs::write(&path, toml).unwrap();
    Serve::start(
        env!("CARGO_BIN_EXE_callai"),
        &path,
        &[
            ("ADMIN_TOKEN", "tok-admin"),
            ("NARROW_TOKEN", TOKEN),
            ("MOCKONLY_TOKEN", MOCK_ONLY),
        ],
    )
}

fn hello() -> Value {
    json!([{"role": "user", "content": "hi"}])
}

/// Items 11 and 13: the policy before the script; `retry: null` refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drop_ins_check_the_policy_first_and_refuse_a_null_retry() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeServer::repeating(Api::OpenAi.reply("ok", None, "stop", Some(2))).await;
    let db = dir.path().join("runs.db");
    let serve = start(dir.path(), &fake, db.to_str().unwrap());
    // A provider the caller may not reach, with a script: the policy
    // speaks first, naming the provider (not the script).
    let script = json!([{"content": "scripted", "outputTokens": 1}]);
    let chat = json!({"model": "fake", "messages": hello(), "callai": {"script": script}});
    let messages = json!({"model": "fake", "max_tokens": 10, "messages": hello(),
                          "callai": {"script": script}});
    for (path, body) in [("/v1/chat/completions", chat), ("/v1/messages", messages)] {
        let r = serve.send("POST", path, Some(&body), Some(MOCK_ONLY)).await;
        assert_eq!(r.status, 403, "{path}: {}", r.body);
        assert_eq!(r.body["callai"]["error"]["code"], "policy_denied", "{path}");
        let message = r.body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("fake"),
            "{path}: names the provider: {message}"
        );
    }
    // As /v1/call does.
    let call = json!({"request": {"messages": hello(), "provider": "fake"}, "script": script});
    let r = serve
        .send("POST", "/v1/call", Some(&call), Some(MOCK_ONLY))
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    let chat = json!({"model": "fake", "messages": hello(), "callai": {"retry": null}});
    let messages = json!({"model": "fake", "max_tokens": 10, "messages": hello(),
                          "callai": {"retry": null}});
    for (path, body) in [("/v1/chat/completions", chat), ("/v1/messages", messages)] {
        let r = serve.send("POST", path, Some(&body), Some(TOKEN)).await;
        assert_eq!(r.status, 400, "{path}: {}", r.body);
        assert_eq!(
            r.body["callai"]["error"]["details"]["field"], "retry",
            "{path}: {}",
            r.body
        );
    }
    // As on /v1/call.
    let call = json!({"request": {"messages": hello(), "provider": "fake", "retry": null}});
    let r = serve
        .send("POST", "/v1/call", Some(&call), Some(TOKEN))
        .await;
    assert_eq!(
        (r.status, &r.body["error"]["details"]["field"]),
        (400, &json!("retry"))
    );
    assert_eq!(fake.count(), 0, "nothing reached the provider");
}

/// Item 12: a key binds the policy headers, and is visible ASCII only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_binds_the_policy_headers_and_takes_visible_ascii_only() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeServer::repeating(Api::OpenAi.reply("ok", None, "stop", Some(2))).await;
    let db = dir.path().join("runs.db");
    let serve = start(dir.path(), &fake, db.to_str().unwrap());
    let client = callai_tests::serve::http_client();
    let body = json!({"model": "fake", "messages": hello()}).to_string();
    let send = |key: &'static str, attempts: &'static str| {
        let (client, body, url) = (client.clone(), body.clone(), serve.url.clone());
        async move {
            let r = client
                .post(format!("{url}/v1/chat/completions"))
                .bearer_auth(TOKEN)
                .header("content-type", "application/json")
                .header("idempotency-key", key)
                .header("x-callai-max-attempts", attempts)
                .body(body)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let replayed = r.headers().contains_key("idempotent-replayed");
            let body: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
            (status, replayed, body)
        }
    };
    assert_eq!(send("order-1", "2").await.0, 200);
    let (status, replayed, _) = send("order-1", "2").await;
    assert_eq!(
        (status, replayed),
        (200, true),
        "a repeat is answered from the log"
    );
    let (status, _, body) = send("order-1", "3").await;
    assert_eq!(status, 422, "another policy is another request: {body}");
    assert_eq!(fake.count(), 1);
    for bad in ["a\tb", "a b"] {
        let (status, _, body) = send(bad, "2").await;
        assert_eq!(status, 400, "{bad:?}: {body}");
        assert_eq!(body["error"]["param"], "Idempotency-Key", "{body}");
    }
}

/// Items 14 and 15: a stream without its end is a cut; `usage` keeps what
/// was reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_without_its_end_is_a_cut_and_usage_keeps_what_was_reported() {
    let dir = tempfile::tempdir().unwrap();
    // Text, then the stream ends cleanly with neither a finish reason nor
    // [DONE].
    let chunk = |text: &str| {
        json!({"id": "c", "object": "chat.completion.chunk", "model": "m-1",
               "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
        .to_string()
    };
    let unfinished = Reply::Events {
        events: vec![(None, chunk("Half ")), (None, chunk("a story"))],
        pause: Duration::ZERO,
        cut: false,
    };
    let output_only = Reply::ok(json!({
        "model": "m-1", "usage": {"completion_tokens": 7},
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}));
    let fake = FakeServer::start(vec![unfinished, output_only]).await;
    let db = dir.path().join("runs.db");
    let serve = start(dir.path(), &fake, db.to_str().unwrap());
    let stream = json!({"model": "fake", "stream": true, "messages": hello()});
    let r = serve
        .send("POST", "/v1/chat/completions", Some(&stream), Some(TOKEN))
        .await;
    let text = r.body.as_str().unwrap();
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    let last = events.last().unwrap();
    assert_eq!(
        last["error"]["code"], "provider_unavailable",
        "a cut: {text}"
    );
    assert!(
        last["error"]["message"].as_str().unwrap().contains("cut"),
        "{last}"
    );
    let chat = json!({"model": "fake", "messages": hello()});
    let r = serve
        .send("POST", "/v1/chat/completions", Some(&chat), Some(TOKEN))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["usage"], json!({"completion_tokens": 7}));
    assert_eq!(r.body["callai"]["attempts"]["outputTokens"], 7);
}

/// Item 16: a run whose call row is damaged answers its `GET` with the run
/// and an error naming the call, on both backends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_a_damaged_call_answers_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeServer::repeating(Api::OpenAi.reply("ok", None, "stop", Some(2))).await;
    let file = dir.path().join("runs.db");
    let cluster = PgCluster::shared();
    let mut logs = vec![("sqlite", file.to_str().unwrap().to_owned())];
    if let Some(cluster) = &cluster {
        logs.push(("postgres", cluster.database()));
    }
    for (name, runlog) in logs {
        let serve = start(dir.path(), &fake, &runlog);
        let run = json!({"pack": "echo-attempts", "runId": "damaged",
                         "input": {"messages": hello()}});
        let r = serve
            .send("POST", "/v1/runs", Some(&run), Some("tok-admin"))
            .await;
        assert_eq!(r.status, 200, "{name}: {}", r.body);
        let tamper = "UPDATE calls SET outcome = 'not json' WHERE run_id = 'damaged'";
        match (&cluster, name) {
            (Some(c), "postgres") => {
                c.psql(&runlog, &tamper.replace("calls", "callai_calls"));
            }
            _ => {
                rusqlite::Connection::open(&file)
                    .unwrap()
                    .execute(tamper, [])
                    .unwrap();
            }
        }
        // Another process reads it: not this one's memory.
        drop(serve);
        let serve = start(dir.path(), &fake, &runlog);
        let r = serve
            .send("GET", "/v1/runs/damaged", None, Some("tok-admin"))
            .await;
        assert_eq!(r.status, 200, "{name}: {}", r.body);
        assert_eq!(r.body["status"], "ok", "{name}: {}", r.body);
        assert_eq!(r.body["error"]["kind"], "corrupt", "{name}: {}", r.body);
        let message = r.body["error"]["message"].as_str().unwrap();
        assert!(message.contains("call 0"), "{name}: {message}");
    }
}

/// Item 17: discovery lists RFC 0248's fixture as its contract names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_lists_the_conformance_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeServer::repeating(Api::OpenAi.reply("ok", None, "stop", Some(2))).await;
    let db = dir.path().join("runs.db");
    let serve = start(dir.path(), &fake, db.to_str().unwrap());
    let doc = serve
        .send("GET", "/.well-known/openwop", None, None)
        .await
        .body;
    let pack: Value = serde_json::from_str(include_str!(
        "../fixtures/conformance-callai-attempt-accounting/pack.json"
    ))
    .unwrap();
    let fixtures = doc["fixtures"].as_array().unwrap();
    assert_eq!(fixtures.len(), 1, "{doc}");
    let f = &fixtures[0];
    assert_eq!(f["id"], pack["id"]);
    assert_eq!(f["version"], pack["version"]);
    assert_eq!(f["nodes"], json!([pack["nodes"][0]["id"]]));
    assert_eq!(f["pack"], "echo-attempts");
}
