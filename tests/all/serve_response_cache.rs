//! The response cache (`[responseCache] mode = "exact"`, issue 53, item 5)
//! through `callai serve` with an SQLite run log, against a loopback fake:
//! an identical request within the ttl is answered from the log byte for
//! byte with its recorded attempts, no provider request, `x-callai-cache:
//! hit`; a stream too; `Cache-Control: no-cache`, another body and a run
//! are not; an error is not kept; hits and misses are counted, and each is
//! in the traces (a miss on its call's, a hit in a trace of its own naming
//! the call it was given). A host with
//! the cache on and no run log does not start; a ttl that is not one is
//! refused by name.

use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::serve::TestServer;
use callai_tests::wire::Api;
use serde_json::json;
use std::time::Duration;

async fn server(fake: &FakeServer, log: &std::path::Path) -> TestServer {
    let toml = format!(
        "[providers.p]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"FAKE_KEY\"\nmodel = \"m-1\"\n\
         [retry]\nbackoffBaseMs = 1\nbackoffMaxMs = 2\n[defaults]\nprovider = \"p\"\n\
         [responseCache]\nmode = \"exact\"\nttl = \"10m\"\n",
        fake.url()
    );
    TestServer::start_with(&toml, Some(log), |k| {
        (k == "FAKE_KEY").then(|| "sk-cache".into())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identical_request_is_answered_from_the_cache_without_a_provider_request() {
    let api = Api::OpenAi;
    let fake = FakeServer::start(vec![
        api.reply("First.", None, "stop", Some(3)),
        api.reply("Fresh.", None, "stop", Some(3)),
        api.reply("Other.", None, "stop", Some(3)),
        api.stream_reply(&["Stream", "ed."], "stop", Some(2), Duration::ZERO),
        Reply::Json(400, json!({"error": {"message": "no"}}), vec![]),
        api.reply("After the error.", None, "stop", Some(3)),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let server = server(&fake, &dir.path().join("runs.db")).await;
    let body = json!({"model": "p", "messages": [{"role": "user", "content": "hi"}]});
    let first = server.exchange("/v1/chat/completions", &body, None).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.headers.get("x-callai-cache"), Some("miss"));
    let again = server.exchange("/v1/chat/completions", &body, None).await;
    assert_eq!(again.headers.get("x-callai-cache"), Some("hit"));
    assert_eq!(
        again.body, first.body,
        "the first answer, its attempts with it"
    );
    assert_eq!(again.body["callai"]["attempts"]["count"], 1);
    assert_eq!(fake.received().len(), 1, "no provider request for the hit");

    // Asked for a fresh answer, or another body: run.
    let fresh = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", server.url))
        .header("content-type", "application/json")
        .header("cache-control", "no-cache")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert!(fresh.headers().get("x-callai-cache").is_none(), "skipped");
    let fresh: serde_json::Value = serde_json::from_str(&fresh.text().await.unwrap()).unwrap();
    assert_eq!(
        fresh["choices"][0]["message"]["content"], "Fresh.",
        "{fresh}"
    );
    let other = json!({"model": "p", "messages": [{"role": "user", "content": "hello"}]});
    let answer = server.exchange("/v1/chat/completions", &other, None).await;
    assert_eq!(answer.body["choices"][0]["message"]["content"], "Other.");
    assert_eq!(fake.received().len(), 3);

    // A stream is answered as the stream it was.
    let streamed =
        json!({"model": "p", "stream": true, "messages": [{"role": "user", "content": "s"}]});
    let live = server.events("/v1/chat/completions", &streamed, None).await;
    let kept = server.events("/v1/chat/completions", &streamed, None).await;
    assert_eq!(live, kept);
    assert!(kept.len() > 2, "{kept:?}");
    assert_eq!(fake.received().len(), 4);

    // An error is not kept: the same request runs again.
    let failing = json!({"model": "p", "messages": [{"role": "user", "content": "err"}]});
    let refused = server
        .exchange("/v1/chat/completions", &failing, None)
        .await;
    assert_ne!(refused.status, 200);
    assert_eq!(refused.headers.get("x-callai-cache"), None);
    let answer = server
        .exchange("/v1/chat/completions", &failing, None)
        .await;
    assert_eq!(
        answer.body["choices"][0]["message"]["content"],
        "After the error."
    );
    assert_eq!(fake.received().len(), 6);

    let metrics = server.metrics().await;
    assert!(
        metrics.contains("callai_response_cache_total{result=\"hit\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("callai_response_cache_total{result=\"miss\"} 4"),
        "{metrics}"
    );

    let first_id = first.headers.get("x-callai-call-id").unwrap().to_owned();
    traces_say_hits_and_misses(&server, &first_id).await;
    server.shutdown().await;
}

#[test]
fn a_host_with_the_cache_on_and_no_run_log_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.toml");
    std::fs::write(&config, "[responseCache]\nmode = \"exact\"\n").unwrap();
    let out = crate::callai_command()
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("responseCache.mode"), "{stderr}");
    assert!(stderr.contains("[runlog] url"), "{stderr}");
    // A ttl that is not one is refused by name, at start-up too.
    std::fs::write(
        &config,
        "[responseCache]\nmode = \"exact\"\nttl = \"soon\"\n",
    )
    .unwrap();
    let out = crate::callai_command()
        .args(["config", "check"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr) + String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("responseCache.ttl"), "{said}");
}

/// Hits and misses in the traces: the first call's says `miss`; each hit
/// has a trace of its own, no request in it, naming the call whose answer
/// it gave and carrying that call's attempts (a stream's too, whose answer
/// carries no attempts headers).
async fn traces_say_hits_and_misses(server: &TestServer, first_id: &str) {
    let trace = server.get(&format!("/v1/calls/{first_id}")).await.body;
    assert_eq!(trace["cache"], "miss", "{trace}");
    let listed = server.get("/v1/calls?limit=50").await.body;
    let hits: Vec<&serde_json::Value> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["cache"] == "hit")
        .collect();
    assert_eq!(hits.len(), 2, "{listed}");
    let of_first = hits
        .iter()
        .find(|t| t["cachedFrom"] == first_id)
        .unwrap_or_else(|| panic!("a hit of {first_id}: {listed}"));
    assert_eq!(of_first["endpoint"], "chat_completions");
    assert_eq!(of_first["attempts"]["count"], 1);
    assert_eq!(of_first["requests"], json!([]));
    assert!(of_first.get("cost").is_none(), "no charge: {of_first}");
    let of_stream = hits.iter().find(|t| t["cachedFrom"] != first_id).unwrap();
    assert_eq!(of_stream["attempts"]["count"], 1, "{of_stream}");
    let stream_id = of_stream["cachedFrom"].as_str().unwrap();
    let stream_trace = server.get(&format!("/v1/calls/{stream_id}")).await.body;
    assert_eq!(stream_trace["cache"], "miss", "{stream_trace}");
}
