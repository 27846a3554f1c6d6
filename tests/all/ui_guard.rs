//! A server without tokens (the laptop setup) in front of a real browser
//! (issue 56, item 1): a page of another site cannot make it call a
//! provider (JSON sent as `text/plain`, a typeless `Blob`, a form), and a
//! page whose name resolves to it (DNS rebinding) cannot read its answers;
//! its own viewer, on its own address, works as before, and so does a
//! client that is no browser. Headless Chromium from the distribution,
//! driven through chromedriver as `ui_browser.rs` does.

use crate::ui_browser::{browser_with, chromedriver};
use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::serve::TestServer;
use fantoccini::{Client, Locator};
use serde_json::json;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The attacker's page: it posts to `target` every way a page of another
/// origin can without asking first (no preflight), then titles itself
/// `done`.
fn page(target: &str) -> String {
    let call = json!({"request": {"messages": [{"role": "user", "content": "from a page"}]}});
    let run =
        json!({"pack": "echo-attempts", "input": {"messages": [{"role": "user", "content": "x"}]}});
    let chat = json!({"model": "p/m", "messages": [{"role": "user", "content": "x"}]});
    format!(
        r#"<!doctype html><html><body>
<form id="f" method="POST" action="{target}/v1/call" enctype="text/plain" target="sink">
<input name='{{"request": {{"messages": [{{"role": "user", "content": "x"}}]}}, "x": "' value='"}}'>
</form><iframe name="sink"></iframe>
<script>
const base = "{target}";
const posts = [["/v1/call", {call}], ["/v1/runs", {run}], ["/v1/chat/completions", {chat}]];
(async () => {{
  for (const [path, body] of posts) {{
    try {{ await fetch(base + path, {{method: "POST", mode: "no-cors",
                                     headers: {{"Content-Type": "text/plain"}}, body: JSON.stringify(body)}}); }} catch (e) {{}}
    try {{ await fetch(base + path, {{method: "POST", mode: "no-cors",
                                     body: new Blob([JSON.stringify(body)])}}); }} catch (e) {{}}
  }}
  document.getElementById("f").submit();
  await new Promise(r => setTimeout(r, 500));
  document.title = "done";
}})();
</script></body></html>"#
    )
}

/// Serves `html` to every request on a loopback port of its own: another
/// site, as far as the browser can tell. Its URL.
async fn serve_page(html: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let html = html.clone();
            tokio::spawn(async move {
                let mut head = vec![0u8; 8192];
                let _ = stream.read(&mut head).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n{html}",
                    html.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    url
}

/// Waits until the page's title is `title` (15 s at most).
async fn wait_for_title(client: &Client, title: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while client.title().await.unwrap() != title {
        assert!(
            Instant::now() < deadline,
            "the page never titled itself {title:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_sites_page_neither_drives_nor_reads_a_server_without_tokens() {
    let replies = Reply::openai_script(r#"[{"content": "hello", "outputTokens": 2}]"#);
    let fake = FakeServer::start(replies.into_iter().cycle().take(20).collect()).await;
    let toml = format!(
        "[providers.p]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"\"\nmodel = \"m\"\n\
         [defaults]\nprovider = \"p\"\n",
        fake.url()
    );
    let server = TestServer::start(&toml).await;
    let port = server.url.rsplit(':').next().unwrap().to_owned();
    let driver = chromedriver().await;
    let client = browser_with(
        &driver,
        &["--host-resolver-rules=MAP evil.example 127.0.0.1"],
    )
    .await;

    // A page of another origin posts every way it may without a preflight.
    let attacker = serve_page(page(&server.url)).await;
    client.goto(&attacker).await.unwrap();
    wait_for_title(&client, "done").await;
    assert_eq!(
        fake.count(),
        0,
        "the provider received a request from another site's page"
    );
    let calls = server.get("/v1/calls").await;
    assert_eq!(
        calls.body["data"],
        json!([]),
        "a call was made: {}",
        calls.body
    );

    // A page whose name resolves to the server reads none of its answers.
    client
        .goto(&format!("http://evil.example:{port}/v1/calls"))
        .await
        .unwrap();
    let shown = client.source().await.unwrap();
    assert!(
        shown.contains("forbidden")
            && shown.contains("evil.example")
            && !shown.contains("\"data\""),
        "{shown}"
    );

    // The server's own viewer, on its own address, works as before.
    client
        .goto(&format!("{}/ui/#/calls", server.url))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = client
            .find(Locator::Css("main"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if text.contains("No calls") || text.contains("no calls") {
            break;
        }
        assert!(Instant::now() < deadline, "the viewer shows:\n{text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client.close().await.unwrap();

    // A client that is no browser posts JSON as JSON and is answered.
    let answered = server
        .post(
            "/v1/call",
            &json!({"request": {"messages": [{"role": "user", "content": "x"}]}}),
        )
        .await;
    assert_eq!(answered.status, 200, "{}", answered.body);
    assert_eq!(fake.count(), 1);
}
