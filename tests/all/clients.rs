//! The official clients, unchanged but for their base URL, against `callai
//! serve` in front of a loopback fake provider that scripts truncation, a
//! schema violation, 503s and missing usage (issue 23). Each check is on
//! the client's own parsed objects: `usage` is the final attempt's, the
//! `callai` extension and the `x-callai-*` headers carry the summed
//! attempts, the fake saw exactly `attempts.count` requests, and errors
//! arrive as the SDK's own typed errors.

use callai_tests::clients::{Client, Clients};
use callai_tests::fake_server::{FakeServer, Received, Reply};
use callai_tests::serve::TestServer;
use callai_tests::wire::Api;
use serde_json::{Value, json};
use std::time::Duration;

/// Runs `plan` through `client` against a server whose provider `fake`
/// answers `replies`; what the client parsed and what the fake received.
async fn scenario(
    clients: &Clients,
    client: Client,
    replies: Vec<Reply>,
    plan: Value,
) -> (Vec<Value>, Vec<Received>) {
    scenario_on(clients, client, replies, plan, None).await
}

/// The tenant `capped` (token [`CAPPED_TOKEN`]) and its budget, in TOML.
const CAPPED: &str = "[tenants.capped]\ntokenEnv = \"CAPPED_TOKEN\"\n\
                      [tenants.capped.budget]\noutputTokens = 50\nwindow = \"1d\"\n";
const CAPPED_TOKEN: &str = "tok-capped-0248";

/// [`scenario`], on a server that also has `tenants` (TOML) and so a run
/// log for their budgets.
async fn scenario_on(
    clients: &Clients,
    client: Client,
    replies: Vec<Reply>,
    plan: Value,
    tenants: Option<&str>,
) -> (Vec<Value>, Vec<Received>) {
    let fake = FakeServer::start(replies).await;
    let toml = format!(
        "[providers.fake]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"FAKE_KEY\"\nmodel = \"m-1\"\n\
         [retry]\nbackoffBaseMs = 1\nbackoffMaxMs = 2\n[policy]\nallowedProviders = [\"fake\"]\n[defaults]\nprovider = \"fake\"\n{}",
        fake.url(),
        tenants.unwrap_or("")
    );
    let dir = tempfile::tempdir().unwrap();
    let log = tenants.map(|_| dir.path().join("runs.db"));
    let server = TestServer::start_with(&toml, log.as_deref(), |k| match k {
        "FAKE_KEY" => Some("sk-fake-client-tests-0248".into()),
        "CAPPED_TOKEN" => Some(CAPPED_TOKEN.into()),
        _ => None,
    })
    .await;
    let (clients, base) = (clients.clone(), server.url.clone());
    let out = tokio::task::spawn_blocking(move || clients.run(client, &base, &plan))
        .await
        .unwrap();
    server.shutdown().await;
    (out, fake.received())
}

fn scene_schema() -> Value {
    json!({"type": "object", "required": ["scene"], "properties": {"scene": {"type": "string"}},
           "additionalProperties": false})
}

/// Truncated, then a schema violation, then a good scene: three attempts,
/// 150 output tokens in all, 20 in the last.
fn three_attempts() -> Vec<Reply> {
    let api = Api::OpenAi;
    vec![
        api.reply("{\"scene\": \"cut", None, "length", Some(100)),
        api.reply("{\"place\": 1}", None, "stop", Some(30)),
        api.reply("{\"scene\": \"ok\"}", None, "stop", Some(20)),
    ]
}

fn busy() -> Reply {
    Reply::Json(503, json!({"error": {"message": "busy"}}), vec![])
}

fn openai_structured() -> Value {
    json!({"model": "fake/m-1", "max_tokens": 100,
           "messages": [{"role": "user", "content": "a scene"}],
           "response_format": {"type": "json_schema", "json_schema": {"name": "scene", "schema": scene_schema(), "strict": true}}})
}

fn assert_attempts(headers: &Value, extension: &Value, count: u64, tokens: u64, complete: bool) {
    assert_eq!(
        headers["x-callai-attempts-count"],
        count.to_string(),
        "{headers}"
    );
    assert_eq!(
        headers["x-callai-attempts-output-tokens"],
        tokens.to_string()
    );
    assert_eq!(headers["x-callai-usage-complete"], complete.to_string());
    assert_eq!(extension["count"], count, "{extension}");
    assert_eq!(extension["outputTokens"], tokens);
    assert_eq!(extension["usageComplete"], complete);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_clients_get_honest_attempts() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    for client in [Client::OpenAiPython, Client::OpenAiNode] {
        // Structured, three attempts.
        let plan = json!({"calls": [{"args": openai_structured()}]});
        let (out, seen) = scenario(&clients, client, three_attempts(), plan).await;
        let completion = &out[0]["completion"];
        let content = completion["choices"][0]["message"]["content"]
            .as_str()
            .unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(content).unwrap(),
            json!({"scene": "ok"}),
            "{client:?}"
        );
        assert_eq!(
            completion["usage"]["completion_tokens"], 20,
            "{client:?}: the final attempt's"
        );
        assert_attempts(
            &out[0]["headers"],
            &completion["callai"]["attempts"],
            3,
            150,
            true,
        );
        assert_eq!(seen.len(), 3, "{client:?}");
        // A 503, then a reply without usage: usage unknown, attempts a floor.
        let api = Api::OpenAi;
        let replies = vec![busy(), api.reply("{\"scene\": \"x\"}", None, "stop", None)];
        let plan = json!({"calls": [{"args": openai_structured()}]});
        let (out, seen) = scenario(&clients, client, replies, plan).await;
        let completion = &out[0]["completion"];
        assert!(completion["usage"].is_null(), "{client:?}: {completion}");
        let a = &completion["callai"]["attempts"];
        assert_eq!(
            (a["count"].as_u64(), a["usageComplete"].as_bool()),
            (Some(2), Some(false)),
            "{client:?}"
        );
        assert_eq!(out[0]["headers"]["x-callai-usage-complete"], "false");
        assert_eq!(seen.len(), 2);
        // Streaming a text call, from a provider that streams and from one
        // that answers whole: the text, then usage and attempts last.
        let args = json!({"model": "fake", "messages": [{"role": "user", "content": "hi"}],
                          "stream_options": {"include_usage": true}});
        let streamed = api.stream_reply(&["Hello ", "there"], "stop", Some(3), Duration::ZERO);
        for upstream in [streamed, api.reply("Hello there", None, "stop", Some(3))] {
            let replies = vec![busy(), upstream];
            let plan = json!({"calls": [{"args": args, "stream": true}]});
            let (out, seen) = scenario(&clients, client, replies, plan).await;
            let chunks = out[0]["chunks"].as_array().unwrap();
            let text: String = chunks
                .iter()
                .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
                .collect();
            assert_eq!(text, "Hello there", "{client:?}");
            let last = chunks.last().unwrap();
            assert_eq!(last["usage"]["completion_tokens"], 3, "{client:?}: {last}");
            assert_eq!(last["callai"]["attempts"]["count"], 2);
            assert_eq!(seen.len(), 2);
        }
        // The per-call policy through extra_body: one attempt, refused 422.
        let mut args = openai_structured();
        // Python's `extra_body`; the Node driver spreads it into the body, as
        // a Node user writes the extra field.
        args["extra_body"] = json!({"callai": {"retry": {"maxAttempts": 1}}});
        let plan = json!({"calls": [{"args": args}]});
        let (out, seen) = scenario(&clients, client, three_attempts(), plan).await;
        assert_eq!(out[0]["status"], 422, "{client:?}: {}", out[0]);
        assert_eq!(out[0]["error"], "UnprocessableEntityError");
        assert_eq!(
            seen.len(),
            1,
            "{client:?}: the policy narrowed the host's retries"
        );
        typed_errors(&clients, client).await;
    }
}

/// Typed errors: 400 naming the param, 403, and a 502 the client does not
/// send again (x-should-retry: false), even with its own retries on.
async fn typed_errors(clients: &Clients, client: Client) {
    let hi = json!([{"role": "user", "content": "hi"}]);
    let plan = json!({"max_retries": 2, "calls": [
        {"args": {"model": "fake", "messages": hi, "n": 2}},
        {"args": {"model": "mock", "messages": hi}},
        {"args": {"model": "fake", "messages": hi}},
    ]});
    let (out, seen) = scenario(clients, client, vec![busy(), busy(), busy(), busy()], plan).await;
    assert_eq!(
        (out[0]["error"].as_str(), out[0]["status"].as_u64()),
        (Some("BadRequestError"), Some(400)),
        "{client:?}"
    );
    assert_eq!(out[0]["body"]["param"], "n", "{client:?}: {}", out[0]);
    assert_eq!(
        (out[1]["error"].as_str(), out[1]["status"].as_u64()),
        (Some("PermissionDeniedError"), Some(403))
    );
    assert_eq!(
        (out[2]["error"].as_str(), out[2]["status"].as_u64()),
        (Some("InternalServerError"), Some(502))
    );
    assert_eq!(
        seen.len(),
        3,
        "{client:?}: the host's three attempts, no nested retry"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_anthropic_client_gets_honest_attempts() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    let client = Client::AnthropicPython;
    let args = json!({"model": "fake/m-1", "max_tokens": 100,
        "messages": [{"role": "user", "content": "a scene"}],
        "output_config": {"format": {"type": "json_schema", "schema": scene_schema()}}});
    let plan = json!({"calls": [{"args": args}, {"args": args, "stream": true}]});
    let mut replies = three_attempts();
    replies.extend(three_attempts());
    let (out, seen) = scenario(&clients, client, replies, plan).await;
    let message = &out[0]["message"];
    assert_eq!(
        serde_json::from_str::<Value>(message["content"][0]["text"].as_str().unwrap()).unwrap(),
        json!({"scene": "ok"})
    );
    assert_eq!(
        message["usage"]["output_tokens"], 20,
        "the final attempt's: {message}"
    );
    assert_attempts(
        &out[0]["headers"],
        &message["callai"]["attempts"],
        3,
        150,
        true,
    );
    let events = out[1]["events"].as_array().unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(events[4]["usage"]["output_tokens"], 20);
    assert_eq!(events[4]["callai"]["attempts"]["count"], 3);
    assert_eq!(seen.len(), 6);
    // Typed errors in the Messages API's shape.
    let hi = json!([{"role": "user", "content": "hi"}]);
    let plan = json!({"calls": [
        {"args": {"model": "fake", "max_tokens": 5, "messages": hi, "tools": []}},
        {"args": {"model": "mock", "max_tokens": 5, "messages": hi}},
        {"args": {"model": "fake", "max_tokens": 5, "messages": hi}},
    ]});
    let (out, seen) = scenario(&clients, client, vec![busy(), busy(), busy()], plan).await;
    assert_eq!(
        (out[0]["error"].as_str(), out[0]["status"].as_u64()),
        (Some("BadRequestError"), Some(400)),
        "{}",
        out[0]
    );
    assert_eq!(out[0]["body"]["error"]["type"], "invalid_request_error");
    assert_eq!(
        (out[1]["error"].as_str(), out[1]["status"].as_u64()),
        (Some("PermissionDeniedError"), Some(403))
    );
    assert_eq!(
        (out[2]["error"].as_str(), out[2]["status"].as_u64()),
        (Some("InternalServerError"), Some(502))
    );
    assert_eq!(seen.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_that_does_not_fit_is_each_clients_typed_429_and_no_request() {
    let Some(clients) = Clients::installed() else {
        return;
    };
    // The call's worst case (the host's three attempts of 100 output
    // tokens) is past the tenant's 50: refused before anything is sent, and
    // not sent again by the client's own retries (x-should-retry: false).
    // The same body reads alike in both APIs.
    let args = json!({"model": "fake", "max_tokens": 100,
                      "messages": [{"role": "user", "content": "a scene"}]});
    for client in [
        Client::OpenAiPython,
        Client::OpenAiNode,
        Client::AnthropicPython,
    ] {
        let plan = json!({"api_key": CAPPED_TOKEN, "max_retries": 2, "calls": [{"args": args}]});
        let (out, seen) = scenario_on(&clients, client, vec![], plan, Some(CAPPED)).await;
        assert_eq!(
            (out[0]["error"].as_str(), out[0]["status"].as_u64()),
            (Some("RateLimitError"), Some(429)),
            "{client:?}: {}",
            out[0]
        );
        let body = &out[0]["body"];
        let message = body
            .pointer("/message")
            .or_else(|| body.pointer("/error/message"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        assert!(
            message.contains("outputTokens"),
            "{client:?}: the budget key is named: {body}"
        );
        assert!(seen.is_empty(), "{client:?}: no request was sent");
    }
}

/// Issue 36 #6: the client versions the docs name are the ones these tests
/// pin (tests/clients/), so a reader installs what was tested.
#[test]
fn the_docs_name_the_client_versions_the_tests_pin() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let read = |path: &str| std::fs::read_to_string(root.join(path)).unwrap();
    let docs = read("docs/src/openai-endpoint.md");
    let package: Value = serde_json::from_str(&read("tests/clients/package.json")).unwrap();
    let npm = package["dependencies"]["openai"].as_str().unwrap();
    let requirements = read("tests/clients/requirements.txt");
    let pinned = |name: &str| {
        requirements
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}==")))
            .map(|v| v.trim_end_matches(" \\").trim().to_owned())
            .unwrap_or_else(|| panic!("{name} is not pinned"))
    };
    for named in [
        format!("`openai` Python package ({})", pinned("openai")),
        format!("`openai` npm package ({npm})"),
        format!("`anthropic` Python package ({})", pinned("anthropic")),
    ] {
        assert!(docs.contains(&named), "the docs do not say {named}");
    }
    let responses = read("docs/src/responses.md");
    let codex = package["dependencies"]["@openai/codex"].as_str().unwrap();
    for named in [
        format!("`openai`\nPython package ({}", pinned("openai")),
        format!("`openai-agents` package ({})", pinned("openai-agents")),
        format!("`langchain-openai` ({})", pinned("langchain-openai")),
        format!("(`@openai/codex` {codex})"),
    ] {
        let flat = responses.replace('\n', " ");
        let named = named.replace('\n', " ");
        assert!(
            flat.contains(&named),
            "the Responses page does not say {named}"
        );
    }
}
