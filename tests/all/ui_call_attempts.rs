//! A call's timeline in the viewer, in Chromium: what each attempt's line
//! says of its tokens beyond input and output (issue 55, item 4: the
//! provider's prompt-cache reads and writes).

use super::serve_prompt_cache::cached_reply;
use super::ui_browser::{browser, chromedriver, console_errors, open};
use callai_tests::fake_server::FakeServer;
use callai_tests::serve::TestServer;
use fantoccini::Locator;
use serde_json::json;

/// Issue 55, item 4: an attempt's prompt-cache reads and writes, as an
/// Anthropic-kind provider reported them, are shown on its line of the
/// timeline, priced at their own rates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_attempt_shows_its_cache_reads_and_writes() {
    let fake = FakeServer::start(vec![cached_reply(0, 900), cached_reply(900, 0)]).await;
    let toml = format!(
        "[providers.p]\nkind = \"anthropic\"\nbaseUrl = \"{}\"\napiKeyEnv = \"\"\n\
         model = \"m-1\"\nprices = {{ input = 1.0, cachedInput = 0.1, cacheWrite = 1.25, \
         output = 5.0, currency = \"USD\" }}\n[defaults]\nprovider = \"p\"\n",
        fake.url()
    );
    let server = TestServer::start(&toml).await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let request = json!({"request": {"messages": [{"role": "user", "content": "Oslo?"}],
                                         "maxTokens": 50}});
        let call = server.exchange("/v1/call", &request, None).await;
        assert_eq!(call.status, 200, "{}", call.body);
        ids.push(call.headers.get("x-callai-call-id").unwrap().to_owned());
    }
    let driver = chromedriver().await;
    let client = browser(&driver).await;
    let url = &server.url;
    // 12 input at 1, 900 written at 1.25, 4 output at 5 per million; then
    // 12 input, 900 read at 0.1 and 4 output.
    for (id, shows, cost) in [
        (&ids[0], "cache read 0 cache write 900", "0.001157 USD"),
        (&ids[1], "cache read 900 cache write 0", "0.000122 USD"),
    ] {
        open(&client, url, &format!("calls/{id}"), "Attempts").await;
        let attempt = client.find(Locator::Css("li.attempt")).await.unwrap();
        let text = attempt.text().await.unwrap().replace('\n', " ");
        assert!(text.contains("input 912") && text.contains(shows), "{text}");
        assert!(text.contains(cost), "{text}");
    }
    assert_eq!(console_errors(&client).await, Vec::<String>::new());
    client.close().await.unwrap();
    server.shutdown().await;
}
