//! A trace per call (issue 35, item 1): every answer of `/v1/call`, the
//! drop-ins and a pack run's calls has a call id; `GET /v1/calls/{id}`
//! gives each attempt in order, owner-scoped; `GET /v1/calls` pages them,
//! newest first, with filters. No prompt or answer text in a trace, only
//! their hashes, unless `[runlog] keepText = true`.

use callai_tests::serve::{TestServer, truncating};
use serde_json::{Value, json};

const CONFIG: &str = "[server]\ntokenEnv = \"ADMIN\"\n\
                      [tenants.a]\ntokenEnv = \"A\"\n[tenants.b]\ntokenEnv = \"B\"\n";

async fn server() -> TestServer {
    TestServer::start_with(CONFIG, None, |k| match k {
        "ADMIN" => Some("tok-admin".into()),
        "A" => Some("tok-a".into()),
        "B" => Some("tok-b".into()),
        _ => None,
    })
    .await
}

/// `POST path` as `token`: the status, the call id header and the body.
async fn post(server: &TestServer, token: &str, path: &str, body: &Value) -> (u16, String, Value) {
    let answer = server.exchange(path, body, Some(token)).await;
    let id = answer
        .headers
        .get("x-callai-call-id")
        .unwrap_or_default()
        .to_owned();
    (answer.status, id, answer.body)
}

async fn get(server: &TestServer, token: &str, path: &str) -> (u16, Value) {
    let answer = server.send_as("GET", path, None, Some(token)).await;
    (answer.status, answer.body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_traced_attempt_by_attempt_under_the_id_its_answer_names() {
    let server = server().await;
    let (request, script) = truncating(2);
    let body = json!({"request": request, "script": script});
    let (status, id, answer) = post(&server, "tok-a", "/v1/call", &body).await;
    assert_eq!(status, 200, "{answer}");
    assert!(id.starts_with("call_"), "{id}");
    let (status, trace) = get(&server, "tok-a", &format!("/v1/calls/{id}")).await;
    assert_eq!(status, 200, "{trace}");
    assert_eq!(
        (
            &trace["id"],
            &trace["tenant"],
            &trace["endpoint"],
            &trace["outcome"]
        ),
        (&json!(id), &json!("a"), &json!("call"), &json!("ok"))
    );
    assert_eq!(
        trace["attempts"], answer["result"]["attempts"],
        "the RFC record"
    );
    let requests = trace["requests"].as_array().unwrap();
    let summary: Vec<(u64, &str, &str, u64, &str)> = requests
        .iter()
        .map(|r| {
            (
                r["n"].as_u64().unwrap(),
                r["reason"].as_str().unwrap(),
                r["provider"].as_str().unwrap(),
                r["maxTokens"].as_u64().unwrap(),
                r["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (1, "first", "mock", 100, "length"),
            (2, "truncation", "mock", 200, "stop")
        ],
        "the budget growth is visible"
    );
    assert_eq!(requests[0]["outputTokens"], 100);
    assert!(requests[0]["latencyMs"].is_u64());
    assert!(
        !trace.to_string().contains("\"hi\""),
        "no prompt text: {trace}"
    );
    // Only hashes: of the prompt, and of each answer; the two answers
    // differ, so do their hashes.
    let sha = |v: &Value| v["sha256"].as_str().map(str::len);
    assert_eq!(sha(&trace["prompt"]), Some(64), "{trace}");
    assert!(trace["prompt"].get("text").is_none());
    assert_eq!(sha(&requests[1]["answer"]), Some(64));
    assert_ne!(requests[0]["answer"], requests[1]["answer"]);

    // Another tenant's call is no call; the admin sees it, and may name a
    // tenant; a tenant may not name another.
    let (status, _) = get(&server, "tok-b", &format!("/v1/calls/{id}")).await;
    assert_eq!(status, 404);
    let (status, _) = get(&server, "tok-admin", &format!("/v1/calls/{id}")).await;
    assert_eq!(status, 200);
    let (status, _) = get(&server, "tok-b", "/v1/calls?tenant=a").await;
    assert_eq!(status, 403);
    let (_, page) = get(&server, "tok-b", "/v1/calls").await;
    assert_eq!(page["data"], json!([]));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_in_answer_id_is_its_call_id_and_failures_are_traced_too() {
    let server = server().await;
    let chat = json!({"model": "mock", "messages": [{"role": "user", "content": "hi"}],
                      "callai": {"script": [{"content": "hello", "outputTokens": 2}]}});
    let (status, id, answer) = post(&server, "tok-a", "/v1/chat/completions", &chat).await;
    assert_eq!(status, 200, "{answer}");
    assert!(id.starts_with("chatcmpl-"), "{id}");
    assert_eq!(answer["id"], id.as_str());
    let messages = json!({"model": "mock", "max_tokens": 20,
                          "messages": [{"role": "user", "content": "hi"}],
                          "callai": {"script": [{"content": "hello", "outputTokens": 2}]}});
    let (_, id2, answer) = post(&server, "tok-a", "/v1/messages", &messages).await;
    assert!(id2.starts_with("msg_"), "{id2}");
    assert_eq!(answer["id"], id2.as_str());
    let (_, trace) = get(&server, "tok-a", &format!("/v1/calls/{id2}")).await;
    assert_eq!(trace["endpoint"], "messages");
    // A call that fails (the script runs out after one transient reply) is
    // traced with its outcome.
    let failing = json!({"model": "mock", "messages": [{"role": "user", "content": "hi"}],
                         "callai": {"retry": {"maxAttempts": 1},
                                    "script": [{"error": {"status": 503, "message": "down"}}]}});
    let (status, id3, _) = post(&server, "tok-a", "/v1/chat/completions", &failing).await;
    assert_eq!(status, 502);
    let (_, trace) = get(&server, "tok-a", &format!("/v1/calls/{id3}")).await;
    assert_eq!(trace["outcome"], "provider_unavailable", "{trace}");
    assert_eq!(trace["requests"][0]["status"], 503, "{trace}");
    assert_eq!(trace["requests"][0]["outcome"], "error");

    // The list: newest first, paged, filtered.
    let (_, page) = get(&server, "tok-a", "/v1/calls?limit=2").await;
    let ids: Vec<&str> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [id3.as_str(), id2.as_str()]);
    let (_, next) = get(
        &server,
        "tok-a",
        &format!(
            "/v1/calls?limit=2&before={}",
            page["next"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(next["data"][0]["id"], id.as_str());
    assert_eq!(next["next"], Value::Null);
    let (_, failed) = get(&server, "tok-a", "/v1/calls?outcome=provider_unavailable").await;
    assert_eq!(failed["data"].as_array().unwrap().len(), 1);
    let (_, chats) = get(&server, "tok-a", "/v1/calls?endpoint=chat_completions").await;
    assert_eq!(chats["data"].as_array().unwrap().len(), 2);
    let (status, refused) = get(&server, "tok-a", "/v1/calls?limit=0").await;
    assert_eq!(status, 400, "{refused}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_call_of_a_pack_run_is_traced_with_its_run() {
    let server = server().await;
    let (request, script) = truncating(3);
    let run = json!({"pack": "echo-attempts", "input": request, "script": script, "runId": "r-1"});
    let (status, _, answer) = post(&server, "tok-a", "/v1/runs", &run).await;
    assert_eq!(status, 200, "{answer}");
    let (_, page) = get(&server, "tok-a", "/v1/calls?endpoint=run&retried=true").await;
    let traces = page["data"].as_array().unwrap();
    assert_eq!(traces.len(), 1, "{page}");
    assert_eq!(traces[0]["runId"], "r-1");
    assert_eq!(traces[0]["attempts"]["count"], 3);
    assert_eq!(traces[0]["requests"].as_array().unwrap().len(), 3);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_sums_the_owners_calls_per_minute_and_tenants_lists_budgets() {
    let server = server().await;
    let (request, script) = truncating(2);
    let body = json!({"request": request, "script": script});
    assert_eq!(post(&server, "tok-a", "/v1/call", &body).await.0, 200);
    let (request, script) = truncating(1);
    let body = json!({"request": request, "script": script});
    assert_eq!(post(&server, "tok-b", "/v1/call", &body).await.0, 200);
    // A run's calls can be listed alone.
    let run = json!({"pack": "echo-attempts", "input": request, "script": script, "runId": "r-u"});
    assert_eq!(post(&server, "tok-a", "/v1/runs", &run).await.0, 200);
    let (_, runs) = get(&server, "tok-a", "/v1/calls?run=r-u").await;
    assert_eq!(runs["data"].as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(runs["data"][0]["runId"], "r-u");
    let (status, refused) = get(&server, "tok-a", "/v1/calls?since=yesterday").await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused.to_string().contains("since"), "{refused}");
    let (_, none) = get(&server, "tok-a", "/v1/calls?since=2999-01-01T00:00:00Z").await;
    assert_eq!(none["data"], json!([]), "{none}");

    let reasons = |usage: &Value| -> Vec<(String, u64)> {
        let mut seen: Vec<(String, u64)> = Vec::new();
        for r in usage["requests"].as_array().unwrap() {
            let reason = r["reason"].as_str().unwrap().to_owned();
            match seen.iter_mut().find(|(k, _)| *k == reason) {
                Some((_, n)) => *n += r["count"].as_u64().unwrap(),
                None => seen.push((reason, r["count"].as_u64().unwrap())),
            }
        }
        seen.sort();
        seen
    };
    // Tenant a: its call (first, truncation) and its run's call (first).
    let (status, usage) = get(&server, "tok-a", "/v1/usage?minutes=5").await;
    assert_eq!(status, 200, "{usage}");
    assert_eq!(usage["calls"], 2, "{usage}");
    assert_eq!(
        reasons(&usage),
        [("first".into(), 2), ("truncation".into(), 1)]
    );
    // The admin: everyone's, or one tenant's.
    let (_, all) = get(&server, "tok-admin", "/v1/usage").await;
    assert_eq!(all["calls"], 3, "{all}");
    assert_eq!(all["minutes"], 60);
    let (_, b) = get(&server, "tok-admin", "/v1/usage?tenant=b").await;
    assert_eq!(reasons(&b), [("first".into(), 1)]);
    // A tenant naming another is refused; a span out of range is named.
    assert_eq!(get(&server, "tok-a", "/v1/usage?tenant=b").await.0, 403);
    let (status, refused) = get(&server, "tok-a", "/v1/usage?minutes=0").await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused.to_string().contains("minutes"), "{refused}");

    let (_, tenants) = get(&server, "tok-admin", "/v1/tenants").await;
    let names: Vec<&str> = tenants["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tenant"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["admin", "a", "b"], "{tenants}");
    let (_, own) = get(&server, "tok-b", "/v1/tenants").await;
    assert_eq!(own["data"].as_array().unwrap().len(), 1, "{own}");
    assert_eq!(own["data"][0]["tenant"], "b");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_keep_text_a_trace_keeps_the_prompt_and_each_answer_under_the_same_hashes() {
    let (request, script) = truncating(2);
    let body = json!({"request": request, "script": script});
    let hashed = TestServer::start("").await;
    let kept = TestServer::start("[runlog]\nkeepText = true\n").await;
    let mut traces = Vec::new();
    for server in [&hashed, &kept] {
        let answer = server.exchange("/v1/call", &body, None).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        let id = answer.headers.get("x-callai-call-id").unwrap().to_owned();
        traces.push(server.get(&format!("/v1/calls/{id}")).await.body);
    }
    let (hashed, kept) = (&traces[0], &traces[1]);
    let prompt: Value = serde_json::from_str(kept["prompt"]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        prompt,
        json!({"messages": [{"role": "user", "content": "hi"}]})
    );
    assert_eq!(kept["prompt"]["sha256"], hashed["prompt"]["sha256"]);
    let answers: Vec<&str> = kept["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["answer"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        answers,
        [r#"{"content":"{\"x\": "}"#, r#"{"content":"{\"x\": 1}"}"#]
    );
    for n in 0..2 {
        assert_eq!(
            kept["requests"][n]["answer"]["sha256"],
            hashed["requests"][n]["answer"]["sha256"]
        );
    }
}
