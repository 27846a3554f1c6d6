//! `kind = "bedrock"` (issue 55, item 2) through `callai serve`, against
//! a loopback fake of the Converse API (`tests/clients/bedrock_fake.py`)
//! that recomputes each request's SigV4 signature with botocore's own
//! signer and refuses a wrong one, and answers ConverseStream in AWS's
//! binary event-stream framing, each frame checked by botocore's decoder.

use callai_tests::clients::Clients;
use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::serve::TestServer;
use callai_tests::wire::Api;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const MODEL: &str = "anthropic.claude-3-5-haiku-20241022-v1:0";
const PATH: &str = "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0";
const SECRET: &str = "bedrock-test-secret-0248";

/// The fake, killed when dropped.
struct Fake {
    child: Child,
    port: u16,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Fake {
    /// Starts the fake with `replies`, taking a bearer key when `bearer`
    /// names one, else SigV4 by the test's credentials.
    fn start(clients: &Clients, replies: Value, bearer: Option<&str>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("seen.jsonl");
        let script = json!({"region": "us-west-2", "accessKey": "AKIDTEST0248",
                            "secretKey": SECRET, "sessionToken": "session-0248",
                            "bearer": bearer, "replies": replies});
        let fake = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/clients/bedrock_fake.py");
        let mut child = Command::new(clients.python())
            .arg(fake)
            .arg(script.to_string())
            .arg(&log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the fake starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the fake prints its port");
        Self {
            child,
            port,
            log,
            _dir: dir,
        }
    }

    /// The requests it saw, in order.
    fn seen(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

async fn server(fake: &Fake, secret: &'static str, extra: &str) -> TestServer {
    let toml = format!(
        "[providers.bedrock]\nregion = \"us-west-2\"\nbaseUrl = \"http://127.0.0.1:{}\"\n\
         model = \"{MODEL}\"\n{extra}\n[defaults]\nprovider = \"bedrock\"\n\
         [retry]\nbackoffBaseMs = 1\nbackoffMaxMs = 2\n",
        fake.port
    );
    TestServer::start_with(&toml, None, move |k| match k {
        "AWS_ACCESS_KEY_ID" => Some("AKIDTEST0248".into()),
        "AWS_SECRET_ACCESS_KEY" => Some(secret.into()),
        "AWS_SESSION_TOKEN" => Some("session-0248".into()),
        "BEDROCK_KEY" => Some("bedrock-api-key-0248".into()),
        _ => None,
    })
    .await
}

fn answer(content: Value, stop: &str, usage: Value) -> Value {
    json!({"json": {"output": {"message": {"role": "assistant", "content": content}},
                    "stopReason": stop, "usage": usage,
                    "metrics": {"latencyMs": 12}}})
}

/// Issue 55 tests: structured output through the forced `respond` tool;
/// a `max_tokens` stop is a truncation, asked again with twice the budget;
/// both attempts signed (botocore agrees), counted, and priced with their
/// cache reads and writes at their own rates from a price file's
/// `bedrock/…` entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_structured_call_is_retried_on_truncation_and_priced_with_its_cache() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let cut = answer(
        json!([{"toolUse": {"toolUseId": "t1", "name": "respond", "input": {}}}]),
        "max_tokens",
        json!({"inputTokens": 10, "outputTokens": 50, "totalTokens": 60}),
    );
    let whole = answer(
        json!([{"toolUse": {"toolUseId": "t2", "name": "respond",
                            "input": {"scene": "A lighthouse."}}}]),
        "tool_use",
        json!({"inputTokens": 10, "outputTokens": 5, "cacheReadInputTokens": 100,
               "cacheWriteInputTokens": 50, "totalTokens": 165}),
    );
    let fake = Fake::start(&clients, json!([cut, whole]), None);
    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("prices.json");
    let entry = json!({"input_cost_per_token": 0.000001, "output_cost_per_token": 0.000004,
                       "cache_read_input_token_cost": 0.0000001,
                       "cache_creation_input_token_cost": 0.00000125,
                       "litellm_provider": "bedrock", "mode": "chat"});
    std::fs::write(
        &prices,
        json!({ format!("bedrock/{MODEL}"): entry }).to_string(),
    )
    .unwrap();
    let pricing = format!("[pricing]\nfile = {:?}\n", prices.display().to_string());
    let server = server(&fake, SECRET, &pricing).await;
    let call = json!({"request": {"messages": [{"role": "system", "content": "Be brief."},
                                               {"role": "user", "content": "A scene."}],
                                  "maxTokens": 50,
                                  "responseSchema": {"type": "object", "required": ["scene"],
                                                     "properties": {"scene": {"type": "string"}}}}});
    let r = server.exchange("/v1/call", &call, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["result"]["data"]["scene"], "A lighthouse.");
    let attempts = &r.body["result"]["attempts"];
    assert_eq!(
        (&attempts["count"], &attempts["outputTokens"]),
        (&json!(2), &json!(55))
    );
    assert_eq!(attempts["structuredOutput"], "native");
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    for s in &seen {
        assert_eq!(s["signed"], true, "{s}");
        assert_eq!(s["path"], format!("{PATH}/converse"));
        assert_eq!(s["headers"]["x-amz-security-token"], "session-0248");
        let body = &s["body"];
        assert_eq!(body["system"], json!([{"text": "Be brief."}]));
        assert_eq!(body["messages"][0]["content"][0]["text"], "A scene.");
        assert_eq!(
            body["toolConfig"]["toolChoice"],
            json!({"tool": {"name": "respond"}})
        );
        let spec = &body["toolConfig"]["tools"][0]["toolSpec"];
        assert_eq!(spec["inputSchema"]["json"]["required"], json!(["scene"]));
    }
    assert_eq!(seen[0]["body"]["inferenceConfig"]["maxTokens"], 50);
    assert_eq!(seen[1]["body"]["inferenceConfig"]["maxTokens"], 100);
    let id = r.headers.get("x-callai-call-id").unwrap().to_owned();
    let trace = server.get(&format!("/v1/calls/{id}")).await.body;
    let second = &trace["requests"][1];
    assert_eq!(second["cachedInputTokens"], 100, "{trace}");
    // 10 input at 1e-6, 100 read at 1e-7, 50 written at 1.25e-6, 5 output
    // at 4e-6.
    let cost = second["cost"]["amount"].as_f64().unwrap();
    assert!((cost - 0.0001025).abs() < 1e-12, "{trace}");
    assert!(!trace.to_string().contains(SECRET));
}

/// Issue 55 tests: a request signed with the wrong secret is refused by
/// the fake's botocore check; the call fails 403 naming the signature,
/// and is not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_is_refused_by_the_signature_check() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let fake = Fake::start(&clients, json!([]), None);
    let server = server(&fake, "not-the-secret", "").await;
    let call = json!({"request": {"messages": [{"role": "user", "content": "x"}], "maxTokens": 9}});
    let r = server.exchange("/v1/call", &call, None).await;
    assert_ne!(r.status, 200);
    let text = r.body.to_string();
    assert!(text.contains("signature"), "{text}");
    assert!(!text.contains("not-the-secret"), "{text}");
    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0]["why"], "signature mismatch");
}

fn delta(text: &str) -> Value {
    json!(["contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": text}}])
}

/// Issue 55 tests: a streamed call goes to `converse-stream`, whose binary
/// frames (split across chunks) come to the client as they are read; a
/// stream that ends in a throttling exception before any text is a
/// transient failure, retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converse_stream_frames_reach_the_client_and_an_exception_is_retried() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let throttled = json!({"events": [["messageStart", {"role": "assistant"}]],
                           "exception": ["throttlingException", "Too many requests"]});
    let events = json!({"events": [
        ["messageStart", {"role": "assistant"}],
        delta("Tide "), delta("at "), delta("six."),
        ["contentBlockStop", {"contentBlockIndex": 0}],
        ["messageStop", {"stopReason": "end_turn"}],
        ["metadata", {"usage": {"inputTokens": 7, "outputTokens": 3, "totalTokens": 10},
                      "metrics": {"latencyMs": 20}}]]});
    let fake = Fake::start(&clients, json!([throttled, events]), None);
    let server = server(&fake, SECRET, "").await;
    let body = json!({"model": "bedrock", "stream": true,
                      "messages": [{"role": "user", "content": "When?"}]});
    let chunks = server.events("/v1/chat/completions", &body, None).await;
    let text: String = chunks
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Tide at six.");
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    assert!(
        seen.iter()
            .all(|s| s["signed"] == true && s["path"] == format!("{PATH}/converse-stream"))
    );
}

/// Issue 55 tests: with `apiKeyEnv` naming a Bedrock API key, requests
/// carry it as a bearer token instead of a signature.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bedrock_api_key_is_sent_as_a_bearer_token() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let reply = answer(
        json!([{"text": "Hello."}]),
        "end_turn",
        json!({"inputTokens": 3, "outputTokens": 2, "totalTokens": 5}),
    );
    let fake = Fake::start(&clients, json!([reply]), Some("bedrock-api-key-0248"));
    let server = server(&fake, SECRET, "apiKeyEnv = \"BEDROCK_KEY\"").await;
    let call = json!({"request": {"messages": [{"role": "user", "content": "x"}], "maxTokens": 9}});
    let r = server.exchange("/v1/call", &call, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["result"]["content"], "Hello.");
    let seen = fake.seen();
    assert_eq!(
        seen[0]["headers"]["authorization"],
        "Bearer bedrock-api-key-0248"
    );
    assert!(seen[0]["headers"].get("x-amz-date").is_none());
}

/// Issue 55 tests: a Messages API client's prompt-caching breakpoints and
/// extended thinking reach a Bedrock-kind provider (`cachePoint` blocks
/// after what each ends, `thinking` in `additionalModelRequestFields`);
/// the model's reasoning comes back as a signed thinking block ahead of the
/// text (streamed to the client after the call is judged whole, so asked
/// of Converse whole), the earlier turn's block went back as reasoning,
/// and the cache's reads are counted on the trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breakpoints_and_thinking_reach_bedrock_and_reasoning_comes_back_signed() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let reply = answer(
        json!([{"reasoningContent": {"reasoningText": {"text": "Oslo is north.",
                                                       "signature": "sig-bedrock"}}},
               {"text": "Cold."}]),
        "end_turn",
        json!({"inputTokens": 12, "outputTokens": 30, "cacheReadInputTokens": 900,
               "cacheWriteInputTokens": 0, "totalTokens": 942}),
    );
    let fake = Fake::start(&clients, json!([reply]), None);
    let server = server(&fake, SECRET, "").await;
    let body = json!({
        "model": "bedrock", "max_tokens": 4000, "stream": true,
        "thinking": {"type": "enabled", "budget_tokens": 2000},
        "system": [{"type": "text", "text": "A long style guide.",
                    "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "A long document.",
                                          "cache_control": {"type": "ephemeral"}}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Read it.", "signature": "sig-0"},
                {"type": "text", "text": "Ready."}]},
            {"role": "user", "content": "How is Oslo?"}]});
    let events = server.events("/v1/messages", &body, None).await;
    let deltas: Vec<&Value> = events.iter().map(|e| &e["delta"]).collect();
    assert!(
        deltas.contains(&&json!({"type": "thinking_delta", "thinking": "Oslo is north."})),
        "{events:?}"
    );
    assert!(deltas.contains(&&json!({"type": "signature_delta", "signature": "sig-bedrock"})));
    let text: String = deltas.iter().filter_map(|d| d["text"].as_str()).collect();
    assert_eq!(text, "Cold.");
    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0]["signed"], true);
    assert_eq!(seen[0]["path"], format!("{PATH}/converse"));
    let sent = &seen[0]["body"];
    assert_eq!(
        sent["system"],
        json!([{"text": "A long style guide."}, {"cachePoint": {"type": "default", "ttl": "1h"}}])
    );
    assert_eq!(
        sent["messages"][0]["content"],
        json!([{"text": "A long document."}, {"cachePoint": {"type": "default"}}])
    );
    assert_eq!(
        sent["messages"][1]["content"][0],
        json!({"reasoningContent": {"reasoningText": {"text": "Read it.", "signature": "sig-0"}}})
    );
    assert_eq!(
        sent["additionalModelRequestFields"]["thinking"],
        json!({"type": "enabled", "budget_tokens": 2000})
    );
    let trace = &server.get("/v1/calls").await.body["data"][0];
    assert_eq!(trace["requests"][0]["cachedInputTokens"], 900, "{trace}");
    assert_eq!(trace["requests"][0]["inputTokens"], 912, "{trace}");
}

/// Issue 55 tests: Bedrock in fallback chains beside an OpenAI-kind
/// provider, either way round: a Bedrock 503 hands the call to the next
/// target, and a down OpenAI-kind target hands it to Bedrock, each request
/// counted under its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bedrock_falls_over_to_openai_and_openai_to_bedrock() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let unavailable = json!({"status": 503, "json": {"message": "Bedrock is busy."}});
    let fine = answer(
        json!([{"text": "From Bedrock."}]),
        "end_turn",
        json!({"inputTokens": 3, "outputTokens": 2, "totalTokens": 5}),
    );
    let fake = Fake::start(&clients, json!([unavailable, fine]), None);
    let up = FakeServer::repeating(Api::OpenAi.reply("From OpenAI.", None, "stop", Some(3))).await;
    let down = FakeServer::repeating(Reply::Json(
        503,
        json!({"error": {"message": "overloaded"}}),
        vec![],
    ))
    .await;
    let more = format!(
        "[providers.up]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"BEDROCK_KEY\"\n\
         model = \"u\"\n[providers.down]\nkind = \"openai\"\nbaseUrl = \"{}\"\n\
         apiKeyEnv = \"BEDROCK_KEY\"\nmodel = \"d\"\n\
         [models.aws-first]\ntargets = [\"bedrock\", \"up\"]\n\
         [models.aws-last]\ntargets = [\"down\", \"bedrock\"]\n",
        up.url(),
        down.url()
    );
    let server = server(&fake, SECRET, &more).await;
    for (model, text, hops) in [
        ("aws-first", "From OpenAI.", [("bedrock", 503), ("up", 200)]),
        (
            "aws-last",
            "From Bedrock.",
            [("down", 503), ("bedrock", 200)],
        ),
    ] {
        let call = json!({"request": {"model": model,
                                      "messages": [{"role": "user", "content": "hi"}]}});
        let r = server.exchange("/v1/call", &call, None).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.body["result"]["content"], text);
        assert_eq!(r.body["result"]["attempts"]["count"], 2);
        let id = r.headers.get("x-callai-call-id").unwrap().to_owned();
        let trace = server.get(&format!("/v1/calls/{id}")).await.body;
        let seen: Vec<(&str, &str, u64)> = trace["requests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| {
                let status = q["status"].as_u64().unwrap_or_default();
                (
                    q["provider"].as_str().unwrap(),
                    q["reason"].as_str().unwrap(),
                    status,
                )
            })
            .collect();
        let want = [
            (hops[0].0, "first", hops[0].1),
            (hops[1].0, "provider_fallback", hops[1].1),
        ];
        assert_eq!(seen, want, "{trace}");
    }
    assert!(fake.seen().iter().all(|s| s["signed"] == true));
}

/// Issue 55 tests: `profile` names a profile of the shared AWS config
/// whose `credential_process` gives the credentials (no AWS variable is
/// set): both calls are signed with them (botocore agrees, session token
/// included), and the process ran once, its credentials held while fresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_s_credential_process_signs_the_requests() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let hello = answer(
        json!([{"text": "Hello."}]),
        "end_turn",
        json!({"inputTokens": 3, "outputTokens": 2, "totalTokens": 5}),
    );
    let fake = Fake::start(&clients, json!([hello.clone(), hello]), None);
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let script = dir.path().join("creds.sh");
    std::fs::write(
        &script,
        format!(
            "echo run >> '{}'\nexp=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)\n\
             printf '{{\"Version\": 1, \"AccessKeyId\": \"AKIDTEST0248\", \
             \"SecretAccessKey\": \"{SECRET}\", \"SessionToken\": \"session-0248\", \
             \"Expiration\": \"%s\"}}' \"$exp\"\n",
            runs.display()
        ),
    )
    .unwrap();
    let config = dir.path().join("config");
    let profile = format!(
        "[profile ci]\ncredential_process = sh {}\n",
        script.display()
    );
    std::fs::write(&config, profile).unwrap();
    let toml = format!(
        "[providers.bedrock]\nregion = \"us-west-2\"\nbaseUrl = \"http://127.0.0.1:{}\"\n\
         model = \"{MODEL}\"\nprofile = \"ci\"\n[defaults]\nprovider = \"bedrock\"\n",
        fake.port
    );
    let config_file = config.display().to_string();
    let server = TestServer::start_with(&toml, None, move |k| {
        (k == "AWS_CONFIG_FILE").then(|| config_file.clone())
    })
    .await;
    let call = json!({"request": {"messages": [{"role": "user", "content": "x"}], "maxTokens": 9}});
    for _ in 0..2 {
        let r = server.exchange("/v1/call", &call, None).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.body["result"]["content"], "Hello.");
    }
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|s| s["signed"] == true), "{seen:?}");
    let ran = std::fs::read_to_string(&runs).unwrap();
    assert_eq!(ran.lines().count(), 1, "the credentials were held");
}
