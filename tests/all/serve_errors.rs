//! Every endpoint's error answers, byte for byte (issue 32): the status,
//! the headers a client reads (`content-type`, `retry-after`,
//! `x-should-retry`) and the body of each malformed or refused request, as
//! `tests/fixtures/errors/answers.json` pins them. The fixture was recorded
//! from the host before its request path was typed end to end, so any
//! change to what a client is told shows here.
//!
//! `CALLAI_RECORD_ERRORS=1 cargo test -p callai-cli --test all serve_errors`
//! writes the fixture again from this host (for a change of the contract
//! that is meant, with a CHANGELOG note).

use callai_tests::serve::TestServer;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

const CONFIG: &str = r#"
[server]
tokenEnv = "ADMIN_TOKEN"
maxBodyBytes = 2048
[tenants.narrow]
tokenEnv = "NARROW_TOKEN"
allowedProviders = []
"#;

const ADMIN: &str = "tok-admin";

/// One request and what it is answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Case {
    name: String,
    method: String,
    path: String,
    /// The bearer token sent (`null`: none).
    token: Option<String>,
    /// Other request headers.
    headers: Vec<(String, String)>,
    body: String,
    status: u16,
    /// The answer's headers a client reads, those present.
    answer_headers: Vec<(String, String)>,
    answer: String,
}

const READ: [&str; 3] = ["content-type", "retry-after", "x-should-retry"];

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/errors/answers.json")
}

fn case(name: &str, method: &str, path: &str, body: &str) -> Case {
    Case {
        name: name.into(),
        method: method.into(),
        path: path.into(),
        token: Some(ADMIN.into()),
        headers: vec![],
        body: body.into(),
        status: 0,
        answer_headers: vec![],
        answer: String::new(),
    }
}

/// `/v1/call` with `request` as its request.
fn call(name: &str, request: &str) -> Case {
    case(
        name,
        "POST",
        "/v1/call",
        &format!(r#"{{"request": {request}}}"#),
    )
}

const HI: &str = r#"[{"role": "user", "content": "hi"}]"#;

fn cases() -> Vec<Case> {
    let mut all = vec![
        case("call: not JSON", "POST", "/v1/call", "nope"),
        case("call: an array", "POST", "/v1/call", "[1]"),
        case(
            "call: trailing text",
            "POST",
            "/v1/call",
            r#"{"request": {}} x"#,
        ),
        case("call: no request", "POST", "/v1/call", "{}"),
        case(
            "call: request not an object",
            "POST",
            "/v1/call",
            r#"{"request": "hi"}"#,
        ),
        case(
            "call: unknown field",
            "POST",
            "/v1/call",
            &format!(r#"{{"request": {{"messages": {HI}}}, "colour": 1}}"#),
        ),
        case(
            "call: empty node id",
            "POST",
            "/v1/call",
            &format!(r#"{{"request": {{"messages": {HI}}}, "nodeId": ""}}"#),
        ),
        case(
            "call: bad script",
            "POST",
            "/v1/call",
            &format!(r#"{{"request": {{"messages": {HI}}}, "script": [{{"x": 1}}]}}"#),
        ),
        case(
            "call: events not a boolean",
            "POST",
            "/v1/call",
            &format!(r#"{{"request": {{"messages": {HI}}}, "events": "yes"}}"#),
        ),
        call("call: no messages", "{}"),
        call("call: messages not an array", r#"{"messages": "hi"}"#),
        call("call: empty messages", r#"{"messages": []}"#),
        call("call: a message not an object", r#"{"messages": [1]}"#),
        call(
            "call: a bad role",
            r#"{"messages": [{"role": "bot", "content": "hi"}]}"#,
        ),
        call(
            "call: a role not a string",
            r#"{"messages": [{"role": 1, "content": "hi"}]}"#,
        ),
        call("call: no content", r#"{"messages": [{"role": "user"}]}"#),
        call(
            "call: content a number",
            r#"{"messages": [{"role": "user", "content": 5}]}"#,
        ),
        call(
            "call: provider a number",
            &format!(r#"{{"messages": {HI}, "provider": 5}}"#),
        ),
        call(
            "call: an unknown provider",
            &format!(r#"{{"messages": {HI}, "provider": "nope"}}"#),
        ),
        call(
            "call: model null",
            &format!(r#"{{"messages": {HI}, "model": null}}"#),
        ),
        call(
            "call: systemPrompt an array",
            &format!(r#"{{"messages": {HI}, "systemPrompt": []}}"#),
        ),
        call(
            "call: temperature a string",
            &format!(r#"{{"messages": {HI}, "temperature": "hot"}}"#),
        ),
        call(
            "call: temperature out of range",
            &format!(r#"{{"messages": {HI}, "temperature": 3}}"#),
        ),
        call(
            "call: maxTokens 0",
            &format!(r#"{{"messages": {HI}, "maxTokens": 0}}"#),
        ),
        call(
            "call: maxTokens fractional",
            &format!(r#"{{"messages": {HI}, "maxTokens": 2.5}}"#),
        ),
        call(
            "call: maxTokens negative",
            &format!(r#"{{"messages": {HI}, "maxTokens": -1}}"#),
        ),
        call(
            "call: maxTokens 1e400",
            &format!(r#"{{"messages": {HI}, "maxTokens": 1e400}}"#),
        ),
        call(
            "call: stopSequences not strings",
            &format!(r#"{{"messages": {HI}, "stopSequences": [1]}}"#),
        ),
        call(
            "call: stopSequences a string",
            &format!(r#"{{"messages": {HI}, "stopSequences": "x"}}"#),
        ),
        call(
            "call: responseSchema a string",
            &format!(r#"{{"messages": {HI}, "responseSchema": "x"}}"#),
        ),
        call(
            "call: retry null",
            &format!(r#"{{"messages": {HI}, "retry": null}}"#),
        ),
        call(
            "call: retry a number",
            &format!(r#"{{"messages": {HI}, "retry": 3}}"#),
        ),
        call(
            "call: retry with an unknown key",
            &format!(r#"{{"messages": {HI}, "retry": {{"maxAttempts": 1, "grow": true}}}}"#),
        ),
        call(
            "call: maxAttempts 0",
            &format!(r#"{{"messages": {HI}, "retry": {{"maxAttempts": 0}}}}"#),
        ),
        call(
            "call: maxAttempts 17",
            &format!(r#"{{"messages": {HI}, "retry": {{"maxAttempts": 17}}}}"#),
        ),
        call(
            "call: maxAttempts 2.5",
            &format!(r#"{{"messages": {HI}, "retry": {{"maxAttempts": 2.5}}}}"#),
        ),
        call(
            "call: maxAttempts a string",
            &format!(r#"{{"messages": {HI}, "retry": {{"maxAttempts": "3"}}}}"#),
        ),
        call(
            "call: maxAttempts null",
            &format!(r#"{{"messages": {HI}, "retry": {{"maxAttempts": null}}}}"#),
        ),
        call(
            "call: growMaxTokens a string",
            &format!(r#"{{"messages": {HI}, "retry": {{"growMaxTokens": "no"}}}}"#),
        ),
        call(
            "call: a long string named",
            &format!(
                r#"{{"messages": {HI}, "model": {{"x": "{}"}}}}"#,
                "y".repeat(60)
            ),
        ),
        case("call: GET", "GET", "/v1/call", ""),
        case("runs: not JSON", "POST", "/v1/runs", "nope"),
        case("runs: no pack", "POST", "/v1/runs", r#"{"input": 1}"#),
        case("runs: no input", "POST", "/v1/runs", r#"{"pack": "p"}"#),
        case(
            "runs: pack a number",
            "POST",
            "/v1/runs",
            r#"{"pack": 3, "input": 1}"#,
        ),
        case(
            "runs: wait a string",
            "POST",
            "/v1/runs",
            r#"{"pack": "p", "input": 1, "wait": "yes"}"#,
        ),
        case(
            "runs: a bad run id",
            "POST",
            "/v1/runs",
            r#"{"pack": "p", "input": 1, "runId": "a/b"}"#,
        ),
        case(
            "runs: a bad script",
            "POST",
            "/v1/runs",
            r#"{"pack": "p", "input": 1, "script": [{"x": 1}]}"#,
        ),
        case(
            "runs: unknown field",
            "POST",
            "/v1/runs",
            r#"{"pack": "p", "input": 1, "colour": "red"}"#,
        ),
        case(
            "runs: unknown pack",
            "POST",
            "/v1/runs",
            r#"{"pack": "nope", "input": 1}"#,
        ),
        case("runs: unknown run", "GET", "/v1/runs/nope", ""),
        case(
            "runs: unknown run's events",
            "GET",
            "/v1/runs/nope/events",
            "",
        ),
        case("packs: empty upload", "PUT", "/v1/packs/x", ""),
        case("packs: not a component", "PUT", "/v1/packs/x", "not wasm"),
        case("packs: a bad name", "PUT", "/v1/packs/.hidden", "not wasm"),
        case(
            "packs: a bad node id",
            "PUT",
            "/v1/packs/x?nodeId=",
            "not wasm",
        ),
        case(
            "packs: a bundled name",
            "PUT",
            "/v1/packs/echo-attempts",
            "\0asm\x0d\0\x01\0",
        ),
        case("unknown route", "GET", "/v1/nothing", ""),
        case(
            "too large",
            "POST",
            "/v1/call",
            &format!(
                r#"{{"request": {{"messages": [{{"role": "user", "content": "{}"}}]}}}}"#,
                "x".repeat(4000)
            ),
        ),
        case("chat: not JSON", "POST", "/v1/chat/completions", "nope"),
        case(
            "chat: no model",
            "POST",
            "/v1/chat/completions",
            &format!(r#"{{"messages": {HI}}}"#),
        ),
        case(
            "chat: no messages",
            "POST",
            "/v1/chat/completions",
            r#"{"model": "mock"}"#,
        ),
        case(
            "chat: tools",
            "POST",
            "/v1/chat/completions",
            &format!(r#"{{"model": "mock", "messages": {HI}, "tools": []}}"#),
        ),
        case(
            "chat: two choices",
            "POST",
            "/v1/chat/completions",
            &format!(r#"{{"model": "mock", "messages": {HI}, "n": 2}}"#),
        ),
        case(
            "chat: logprobs",
            "POST",
            "/v1/chat/completions",
            &format!(r#"{{"model": "mock", "messages": {HI}, "logprobs": true}}"#),
        ),
        case(
            "chat: a bad role",
            "POST",
            "/v1/chat/completions",
            r#"{"model": "mock", "messages": [{"role": "bot", "content": "hi"}]}"#,
        ),
        case(
            "chat: an image part",
            "POST",
            "/v1/chat/completions",
            r#"{"model": "mock", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x"}}]}]}"#,
        ),
        case(
            "chat: a tool message",
            "POST",
            "/v1/chat/completions",
            r#"{"model": "mock", "messages": [{"role": "tool", "content": "x", "tool_call_id": "1"}]}"#,
        ),
        case(
            "chat: a bad response format",
            "POST",
            "/v1/chat/completions",
            &format!(
                r#"{{"model": "mock", "messages": {HI}, "response_format": {{"type": "xml"}}}}"#
            ),
        ),
        case(
            "chat: max_tokens a string",
            "POST",
            "/v1/chat/completions",
            &format!(r#"{{"model": "mock", "messages": {HI}, "max_tokens": "x"}}"#),
        ),
        case(
            "chat: an unknown field",
            "POST",
            "/v1/chat/completions",
            &format!(r#"{{"model": "mock", "messages": {HI}, "colour": 1}}"#),
        ),
        case(
            "chat: an unknown callai field",
            "POST",
            "/v1/chat/completions",
            &format!(r#"{{"model": "mock", "messages": {HI}, "callai": {{"retyr": {{}}}}}}"#),
        ),
        case(
            "chat: maxAttempts 2.5",
            "POST",
            "/v1/chat/completions",
            &format!(
                r#"{{"model": "mock", "messages": {HI}, "callai": {{"retry": {{"maxAttempts": 2.5}}}}}}"#
            ),
        ),
        case(
            "chat: an unknown provider",
            "POST",
            "/v1/chat/completions",
            &format!(r#"{{"model": "nope/x", "messages": {HI}}}"#),
        ),
        case(
            "chat: a bad stream option",
            "POST",
            "/v1/chat/completions",
            &format!(
                r#"{{"model": "mock", "messages": {HI}, "stream": true, "stream_options": {{"x": 1}}}}"#
            ),
        ),
        case("messages: not JSON", "POST", "/v1/messages", "nope"),
        case(
            "messages: no max_tokens",
            "POST",
            "/v1/messages",
            &format!(r#"{{"model": "mock", "messages": {HI}}}"#),
        ),
        case(
            "messages: tools",
            "POST",
            "/v1/messages",
            &format!(r#"{{"model": "mock", "max_tokens": 10, "messages": {HI}, "tools": []}}"#),
        ),
        case(
            "messages: a bad role",
            "POST",
            "/v1/messages",
            r#"{"model": "mock", "max_tokens": 10, "messages": [{"role": "system", "content": "hi"}]}"#,
        ),
        case(
            "messages: an image block",
            "POST",
            "/v1/messages",
            r#"{"model": "mock", "max_tokens": 10, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}"#,
        ),
        case(
            "messages: system a number",
            "POST",
            "/v1/messages",
            &format!(r#"{{"model": "mock", "max_tokens": 10, "messages": {HI}, "system": 5}}"#),
        ),
        case(
            "messages: maxAttempts 0",
            "POST",
            "/v1/messages",
            &format!(
                r#"{{"model": "mock", "max_tokens": 10, "messages": {HI}, "callai": {{"retry": {{"maxAttempts": 0}}}}}}"#
            ),
        ),
        case(
            "messages: an unknown provider",
            "POST",
            "/v1/messages",
            &format!(r#"{{"model": "nope", "max_tokens": 10, "messages": {HI}}}"#),
        ),
    ];
    // The tokens, in each API's shape.
    for (name, path) in [
        ("call", "/v1/call"),
        ("chat", "/v1/chat/completions"),
        ("messages", "/v1/messages"),
        ("models", "/v1/models"),
    ] {
        let mut none = case(&format!("{name}: no token"), "POST", path, "{}");
        none.token = None;
        let mut wrong = case(&format!("{name}: a wrong token"), "POST", path, "{}");
        wrong.token = Some("tok-nobody".into());
        all.extend([none, wrong]);
    }
    let mut key = case("messages: a wrong x-api-key", "POST", "/v1/messages", "{}");
    key.token = None;
    key.headers.push(("x-api-key".into(), "tok-nobody".into()));
    // A tenant that may reach no provider.
    let mut narrow = call(
        "call: a provider the tenant may not reach",
        &format!(r#"{{"messages": {HI}}}"#),
    );
    narrow.token = Some("tok-narrow".into());
    let mut narrow_chat = case(
        "chat: a provider the tenant may not reach",
        "POST",
        "/v1/chat/completions",
        &format!(r#"{{"model": "mock", "messages": {HI}}}"#),
    );
    narrow_chat.token = Some("tok-narrow".into());
    all.extend([key, narrow, narrow_chat]);
    all
}

async fn answer(server: &TestServer, case: &Case) -> Case {
    let client = callai_tests::serve::http_client();
    let method = reqwest::Method::from_bytes(case.method.as_bytes()).unwrap();
    let mut request = client
        .request(method, format!("{}{}", server.url, case.path))
        .body(case.body.clone());
    if let Some(token) = &case.token {
        request = request.bearer_auth(token);
    }
    for (name, value) in &case.headers {
        request = request.header(name, value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let answer_headers = READ
        .iter()
        .filter_map(|h| {
            let value = response.headers().get(*h)?.to_str().ok()?;
            Some(((*h).to_owned(), value.to_owned()))
        })
        .collect();
    let answer = response.text().await.unwrap();
    Case {
        status,
        answer_headers,
        answer,
        ..case.clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoints_error_answers_are_what_they_were_byte_for_byte() {
    let server = TestServer::start_with(CONFIG, None, |k| match k {
        "ADMIN_TOKEN" => Some(ADMIN.into()),
        "NARROW_TOKEN" => Some("tok-narrow".into()),
        _ => None,
    })
    .await;
    let mut answered = Vec::new();
    for case in cases() {
        answered.push(answer(&server, &case).await);
    }
    if std::env::var_os("CALLAI_RECORD_ERRORS").is_some() {
        let text = serde_json::to_string_pretty(&answered).unwrap();
        std::fs::create_dir_all(fixture().parent().unwrap()).unwrap();
        std::fs::write(fixture(), text + "\n").unwrap();
        return;
    }
    let pinned: Vec<Case> =
        serde_json::from_str(&std::fs::read_to_string(fixture()).unwrap()).unwrap();
    assert_eq!(pinned.len(), answered.len(), "the fixture has other cases");
    let mut differ = Vec::new();
    for (want, got) in pinned.iter().zip(&answered) {
        assert_eq!(
            want.name, got.name,
            "the fixture's cases are in another order"
        );
        if want != got {
            differ.push(format!(
                "{}:\n  was {} {:?} {}\n  now {} {:?} {}",
                want.name,
                want.status,
                want.answer_headers,
                want.answer,
                got.status,
                got.answer_headers,
                got.answer
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "{} answers changed:\n{}",
        differ.len(),
        differ.join("\n")
    );
    // Every case is an error answer.
    assert!(
        answered.iter().all(|c| c.status >= 400),
        "a case was answered"
    );
}
