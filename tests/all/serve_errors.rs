//! Every endpoint's error answers, byte for byte (issue 32): the status,
//! the headers a client reads (`content-type`, `retry-after`,
//! `x-should-retry`) and the body of each malformed or refused request, as
//! `tests/fixtures/errors/answers.json` pins them. The fixture was recorded
//! from the host before its request path was typed end to end, so any
//! change to what a client is told shows here.
//!
//! The fixture holds the requests too: a case is added by appending its
//! request (any `status`, `answer_headers` and `answer`), then
//! `CALLAI_RECORD_ERRORS=1 cargo test -p callai-cli --test all serve_errors`
//! answers every case again from this host and writes them (for a change
//! of the contract that is meant, with a CHANGELOG note; `git diff` shows
//! what changed).

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
const NARROW: &str = "tok-narrow";

/// One request and what it is answered (the tokens `ADMIN`, `NARROW` or
/// another, or none).
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
        "NARROW_TOKEN" => Some(NARROW.into()),
        _ => None,
    })
    .await;
    let pinned: Vec<Case> =
        serde_json::from_str(&std::fs::read_to_string(fixture()).unwrap()).unwrap();
    assert!(pinned.len() > 80, "the fixture lost its cases");
    let mut answered = Vec::new();
    for case in &pinned {
        answered.push(answer(&server, case).await);
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
