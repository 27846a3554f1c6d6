//! The viewer's Keys page (issue 53, item 2), in a real browser: the admin
//! makes a key through its form and sees the secret once; the key works as
//! a bearer token; the list shows it with its limit and spend and no
//! secret; Revoke refuses it; a tenant's token is told keys are the
//! admin's.

use crate::ui_browser::{
    ACME, ADMIN, browser, calls_made, chromedriver, console_errors, open, use_token, wait_for_text,
    wait_until,
};
use fantoccini::Locator;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_makes_a_key_sees_its_secret_once_and_revokes_it() {
    let (server, _fake, _id, _dir) = calls_made().await;
    let driver = chromedriver().await;
    let client = browser(&driver).await;
    let url = &server.url;
    client.goto(&format!("{url}/ui/")).await.unwrap();
    wait_for_text(&client, "Give the admin's or a tenant's token").await;
    let _refused_fetch_logged = console_errors(&client).await;
    use_token(&client, ADMIN).await;
    open(&client, url, "keys", "No API key yet").await;

    let fill = |id: &'static str, text: &'static str| {
        let client = client.clone();
        async move {
            let input = client.find(Locator::Id(id)).await.unwrap();
            input.send_keys(text).await.unwrap();
        }
    };
    fill("key-name", "viewer").await;
    fill("key-tenant", "viewers").await;
    fill("key-limits", "requests=5/1m").await;
    let make = client
        .find(Locator::Css("form.make-key button[type=submit]"))
        .await
        .unwrap();
    make.click().await.unwrap();
    let page = wait_until(&client, "the new key's secret", |t| {
        t.contains("Copy its secret now")
    })
    .await;
    let secret = client
        .find(Locator::Css("code.secret"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(secret.starts_with("ck-") && secret.len() == 67, "{secret}");
    assert!(page.contains("requests 0 of 5 per 1m"), "{page}");

    // The key works, and its spend shows on the next look.
    let request = json!({"request": {"messages": [{"role": "user", "content": "hi"}], "maxTokens": 10,
                                     "provider": "mock"}});
    let call = server.exchange("/v1/call", &request, Some(&secret)).await;
    assert_eq!(call.status, 200, "{}", call.body);
    client
        .find(Locator::Css(".notice button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let page = wait_until(&client, "the secret gone, the spend shown", |t| {
        !t.contains("Copy its secret now") && t.contains("requests 1 of 5 per 1m")
    })
    .await;
    assert!(
        !page.contains(&secret[3..]),
        "the secret is shown once: {page}"
    );
    assert!(page.contains("active"), "{page}");

    client
        .find(Locator::Css("button.revoke"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let page = wait_until(&client, "the key revoked", |t| t.contains("revoked")).await;
    assert!(!page.contains("Revoke viewer"), "{page}");
    let call = server.exchange("/v1/call", &request, Some(&secret)).await;
    assert_eq!(call.status, 401, "{}", call.body);
    let errors = console_errors(&client).await;
    assert!(errors.is_empty(), "{errors:?}");

    // A tenant's token: keys are the admin's.
    use_token(&client, ACME).await;
    wait_until(&client, "the refusal", |t| {
        t.contains("the admin's to manage")
    })
    .await;
    client.close().await.unwrap();
    server.shutdown().await;
}
