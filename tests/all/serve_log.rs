//! One line per request on `callai serve`'s stderr (issue 35, item 2):
//! `[log] format = "json"` or `"text"`, with the call's id, tenant,
//! attempts, tokens and cost; never a token or a key.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// `callai serve` with `config`; its address, and its stderr lines after
/// the one that says where it listens.
fn serve(config: &str) -> (Child, String, mpsc::Receiver<String>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.toml");
    std::fs::write(&path, config).unwrap();
    let mut child = crate::callai_command()
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&path)
        .env("ADMIN_TOKEN", "tok-admin")
        .env("A_TOKEN", "tok-a")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("serve prints where it listens")
            .unwrap();
        if let Some(addr) = line.strip_prefix("listening on http://") {
            break addr.to_owned();
        }
    };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (child, addr, rx, dir)
}

/// One exchange as `token`: the status and the call id header.
fn post(addr: &str, token: &str, path: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let status = text.split(' ').nth(1).unwrap().parse().unwrap();
    let id = text
        .lines()
        .find_map(|l| l.strip_prefix("x-callai-call-id: "))
        .unwrap_or_default()
        .to_owned();
    (status, id)
}

/// The next request line, past the start-up block that follows the
/// `listening on` line (a request's line starts with its time, or `{`).
fn next_line(lines: &mpsc::Receiver<String>) -> String {
    loop {
        let line = lines.recv_timeout(Duration::from_secs(10)).expect("a line");
        if line.starts_with('{') || line.starts_with("20") {
            return line;
        }
    }
}

const CALL: &str = r#"{"request": {"messages": [{"role": "user", "content": "hi"}]},
                      "script": [{"content": "hello", "outputTokens": 4}]}"#;

fn config(format: &str) -> String {
    format!(
        "[log]\nformat = \"{format}\"\n[server]\ntokenEnv = \"ADMIN_TOKEN\"\n\
         [tenants.a]\ntokenEnv = \"A_TOKEN\"\n"
    )
}

#[test]
fn each_request_writes_one_json_line_naming_its_call_and_never_a_token() {
    let (mut child, addr, lines, _dir) = serve(&config("json"));
    let (status, id) = post(&addr, "tok-a", "/v1/call", CALL);
    assert_eq!(status, 200);
    let (status, _) = post(&addr, "tok-wrong", "/v1/call", CALL);
    assert_eq!(status, 401);
    let first: Value = serde_json::from_str(&next_line(&lines)).unwrap();
    let second: Value = serde_json::from_str(&next_line(&lines)).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(first["method"], "POST");
    assert_eq!(first["path"], "/v1/call");
    assert_eq!(first["status"], 200);
    assert_eq!(first["tenant"], "a");
    assert_eq!(first["callId"], id.as_str());
    assert_eq!(first["attempts"], "1");
    assert_eq!(first["outputTokens"], "4");
    assert!(first["durationMs"].is_number());
    assert_eq!(second["status"], 401);
    assert_eq!(second.get("tenant"), None, "nobody's token is nobody's");
    for line in [&first, &second] {
        let text = line.to_string();
        assert!(!text.contains("tok-"), "a token in the log: {text}");
    }
}

#[test]
fn the_text_line_says_the_same_in_words() {
    let (mut child, addr, lines, _dir) = serve(&config("text"));
    let (_, id) = post(&addr, "tok-a", "/v1/call", CALL);
    let line = next_line(&lines);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(line.contains(" POST /v1/call 200 "), "{line}");
    assert!(
        line.contains(" tenant=a") && line.contains(&format!(" callId={id}")),
        "{line}"
    );
    assert!(
        line.contains(" attempts=1") && !line.contains("tok-"),
        "{line}"
    );
}

/// `GET path` as `token`: the body.
fn get(addr: &str, token: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let body = text.split_once("\r\n\r\n").unwrap().1;
    // A chunked body: the JSON between its size lines.
    match body.find(['{', '#']) {
        Some(start) => body[start..body.rfind(['}', '\n']).unwrap() + 1].to_owned(),
        None => body.to_owned(),
    }
}

#[test]
fn a_budget_refusal_is_budget_exceeded_in_the_trace_the_metrics_and_the_line_with_its_error() {
    // One request a lifetime: a call of three attempts does not fit.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.db");
    let config = format!(
        "{}[tenants.a.budget]\nrequests = 1\nwindow = \"none\"\n[runlog]\nurl = \"{}\"\n",
        config("json"),
        log.display()
    );
    let (mut child, addr, lines, _dir) = serve(&config);
    let (status, _) = post(&addr, "tok-a", "/v1/call", CALL);
    assert_eq!(status, 429);
    let line: Value = serde_json::from_str(&next_line(&lines)).unwrap();
    assert_eq!(line["error"], "budget_exceeded", "{line}");
    let calls: Value = serde_json::from_str(&get(
        &addr,
        "tok-admin",
        "/v1/calls?outcome=budget_exceeded",
    ))
    .unwrap();
    let metrics = get(&addr, "tok-admin", "/metrics");
    child.kill().unwrap();
    child.wait().unwrap();
    let trace = &calls["data"][0];
    assert_eq!(trace["outcome"], "budget_exceeded", "{calls}");
    assert_eq!(trace["error"]["code"], "budget_exceeded");
    let message = trace["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("budget requests: the call needs up to 3"),
        "{message}"
    );
    assert!(
        metrics.contains("callai_calls_total{outcome=\"budget_exceeded\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("callai_calls_total{outcome=\"policy_denied\"} 0\n"),
        "one word for it: {metrics}"
    );
}
