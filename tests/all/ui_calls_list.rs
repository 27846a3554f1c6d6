//! The viewer's list of calls for an operator (issue 51, item 10), in
//! Chromium: every column at 1280 px, the model that answered, a CSV export
//! of the page, a search by call id, and a list that refreshes by itself.

use super::ui_browser::{
    ADMIN, browser, calls_made, chromedriver, console_errors, open, use_token, wait_for_text,
};
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
