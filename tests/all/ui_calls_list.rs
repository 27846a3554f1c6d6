//! The viewer's list of calls for an operator (issue 51, item 10), in
//! Chromium: every column at 1280 px, the model that answered, a CSV export
//! of the page, a search by call id, and a list that refreshes by itself.

use super::ui_browser::{
    ADMIN, browser, calls_made, chromedriver, console_errors, open, use_token, wait_for_text,
};
use callai_tests::serve::TestServer;
use fantoccini::Locator;
use serde_json::{Value, json};

/// `text` with its `%XX` escapes decoded (as `encodeURIComponent` wrote
/// them).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = text.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).expect("UTF-8 text")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_calls_list_fits_exports_searches_and_refreshes() {
    let (server, _fake, id, _dir) = calls_made().await;
    let driver = chromedriver().await;
    let client = browser(&driver).await;
    let url = &server.url;
    client.goto(&format!("{url}/ui/")).await.unwrap();
    wait_for_text(&client, "Give the admin's or a tenant's token").await;
    let _refused_fetch_logged = console_errors(&client).await;
    use_token(&client, ADMIN).await;
    let calls = open(&client, url, "calls", &id).await;

    // At 1280 px every column of the list shows, with no sideways scroll.
    client.set_window_size(1280, 900).await.unwrap();
    let overflow: Value = client
        .execute(
            "const s = document.querySelector('main .scroll'); return [s.scrollWidth, s.clientWidth];",
            vec![],
        )
        .await
        .unwrap();
    assert!(
        overflow[0].as_u64() <= overflow[1].as_u64(),
        "the calls table is wider than the page at 1280 px: {overflow}"
    );
    // The model that answered, by provider; the list as a CSV file.
    assert!(calls.contains("p/m-1"), "{calls}");
    let csv = client.find(Locator::Css("a.csv")).await.unwrap();
    assert_eq!(
        csv.attr("download").await.unwrap().as_deref(),
        Some("calls.csv")
    );
    let href = csv.attr("href").await.unwrap().unwrap_or_default();
    let encoded = href
        .strip_prefix("data:text/csv;charset=utf-8,")
        .unwrap_or_default();
    let fetched = percent_decoded(encoded);
    let mut lines = fetched.lines();
    assert!(
        lines
            .next()
            .unwrap_or_default()
            .starts_with("id,createdAt,tenant"),
        "{fetched}"
    );
    assert!(
        lines.any(|l| l.starts_with(&format!("{id},"))
            && l.contains(",acme,")
            && l.contains(",p,m-1,")),
        "{fetched}"
    );
    // A call id typed in the form opens that call.
    let field = client.find(Locator::Css("input[name=id]")).await.unwrap();
    field.send_keys(&id).await.unwrap();
    client
        .find(Locator::Css("form.filters button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_text(&client, "Attempts").await;
    assert!(
        client
            .current_url()
            .await
            .unwrap()
            .as_str()
            .ends_with(&format!("#/calls/{id}"))
    );

    // The open list shows a call made after it was opened, by itself.
    open(&client, url, "calls", &id).await;
    let request = json!({"request": {"provider": "mock",
        "messages": [{"role": "user", "content": "again"}]}});
    let later = server.exchange("/v1/call", &request, Some(ADMIN)).await;
    assert_eq!(later.status, 200, "{}", later.body);
    let later_id = later.headers.get("x-callai-call-id").unwrap().to_owned();
    wait_for_text(&client, &later_id).await;

    client.close().await.unwrap();
    server.shutdown().await;
}

/// A run's tool steps (calls answered with tool calls) and cost, on the
/// runs list and the run's page: the research agent through the mock, on a
/// server with no token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_tool_steps_and_cost_show_on_the_runs_pages() {
    let server = TestServer::start("").await;
    let driver = chromedriver().await;
    let client = browser(&driver).await;
    let url = &server.url;
    let research = callai_tests_example("bookai-research");
    let run = json!({"pack": "bookai-research", "input": research.0, "script": research.1,
                     "runId": "r-tools"});
    let started = server.exchange("/v1/runs", &run, None).await;
    assert_eq!(started.status, 200, "{}", started.body);
    let traced = server
        .send_as("GET", "/v1/calls?run=r-tools", None, None)
        .await
        .body;
    let calls = traced["data"].as_array().unwrap();
    let steps = calls
        .iter()
        .filter(|c| c["requests"].as_array().unwrap().last().unwrap()["outcome"] == "tool-call")
        .count();
    assert!(steps > 0, "the research agent ran tools: {traced}");
    let runs = open(&client, url, "runs", "r-tools").await;
    assert!(runs.contains("r-tools"), "{runs}");
    // The row's cells under the headers "Tool steps" and "Cost".
    let script = "const [header] = arguments; \
        const i = [...document.querySelectorAll('main th')].findIndex((th) => th.textContent === header); \
        const row = [...document.querySelectorAll('main tbody tr')].find((tr) => tr.textContent.startsWith('r-tools')); \
        return row.children[i].textContent;";
    let steps_cell = client
        .execute(script, vec![json!("Tool steps")])
        .await
        .unwrap();
    assert_eq!(steps_cell, json!(steps.to_string()), "{runs}");
    let cost_cell = client.execute(script, vec![json!("Cost")]).await.unwrap();
    assert_eq!(cost_cell, json!("—"), "the mock has no price: {runs}");
    let one = open(&client, url, "runs/r-tools", "Tool steps").await;
    assert!(one.contains(&format!("Tool steps\n{steps}")), "{one}");
    assert!(one.contains("Cost\n—"), "the mock has no price: {one}");

    client.close().await.unwrap();
    server.shutdown().await;
}

/// A failed call's page shows its error and what it names; the providers
/// page says a failing provider is failing, with its targets' health.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_call_and_a_failing_provider_say_so() {
    let dead = super::serve_audit::closed_port();
    let server = TestServer::start(&format!(
        "[providers.p]\nkind = \"openai\"\nbaseUrl = \"{dead}\"\napiKeyEnv = \"\"\nmodel = \"m-1\"\n\
         [retry]\nbackoffBaseMs = 1\nbackoffMaxMs = 2\n"
    ))
    .await;
    let request = json!({"request": {"provider": "p",
        "messages": [{"role": "user", "content": "hi"}]}});
    let failed = server.post("/v1/call", &request).await;
    assert_eq!(
        failed.body["error"]["code"], "provider_unavailable",
        "{}",
        failed.body
    );
    let listed = server.get("/v1/calls").await.body;
    let id = listed["data"][0]["id"].as_str().unwrap().to_owned();
    let driver = chromedriver().await;
    let client = browser(&driver).await;
    let url = &server.url;
    let one = open(&client, url, &format!("calls/{id}"), "Error").await;
    assert!(
        one.contains("provider_unavailable") && one.contains("could not connect"),
        "{one}"
    );
    let providers = open(&client, url, "providers", "Health").await;
    assert!(
        providers.contains("Failing: p: 3 of 3 requests unavailable"),
        "{providers}"
    );
    assert!(providers.contains("p/m-1"), "{providers}");
    client.close().await.unwrap();
    server.shutdown().await;
}

/// A bundled example's default input and mock script, as JSON.
fn callai_tests_example(name: &str) -> (Value, Value) {
    let e = callai_examples::example(name).unwrap();
    let read = |path: &str| serde_json::from_str(path).unwrap();
    (read(e.default_input), read(e.default_script))
}
