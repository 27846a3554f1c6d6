//! Stored responses through `callai serve` (issue 52): with a run log, a
//! response is kept for its tenant (`store` is the API's default), read
//! back by `GET /v1/responses/{id}`, its input listed, continued by
//! `previous_response_id` (the provider gets the earlier turns, then the
//! new input), still there after a restart, another tenant's id unknown,
//! and gone once deleted; `store: false` keeps nothing.

use callai_tests::fake_server::FakeServer;
use callai_tests::serve::TestServer;
use callai_tests::wire::Api;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

const A: &str = "tok-responses-a-0248";
const B: &str = "tok-responses-b-0248";

async fn start(fake: &FakeServer, log: &Path) -> TestServer {
    let toml = format!(
        "[providers.p]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"FAKE_KEY\"\nmodel = \"m-1\"\n\
         [defaults]\nprovider = \"p\"\n[server]\ntokenEnv = \"ADMIN_TOKEN\"\n\
         [tenants.a]\ntokenEnv = \"A_TOKEN\"\n[tenants.b]\ntokenEnv = \"B_TOKEN\"\n",
        fake.url()
    );
    TestServer::start_with(&toml, Some(log), |k| match k {
        "FAKE_KEY" => Some("sk-stored".into()),
        "ADMIN_TOKEN" => Some("tok-responses-admin-0248".into()),
        "A_TOKEN" => Some(A.into()),
        "B_TOKEN" => Some(B.into()),
        _ => None,
    })
    .await
}

async fn get(server: &TestServer, path: &str, token: &str) -> (u16, Value) {
    let answer = server.send_as("GET", path, None, Some(token)).await;
    (answer.status, answer.body)
}

/// The roles and texts of the messages a provider request carried.
fn turns(body: &Value) -> Vec<(String, String)> {
    let messages = body["messages"].as_array().unwrap();
    let text = |m: &Value| m["content"].as_str().unwrap_or_default().to_owned();
    messages
        .iter()
        .map(|m| (m["role"].as_str().unwrap().to_owned(), text(m)))
        .collect()
}

fn pair(role: &str, text: &str) -> (String, String) {
    (role.to_owned(), text.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_response_is_read_continued_and_deleted_by_its_tenant_only() {
    let api = Api::OpenAi;
    let fake = FakeServer::start(vec![
        api.reply("Oslo is in Norway.", None, "stop", Some(4)),
        api.reply("Yes, its capital.", None, "stop", Some(4)),
        api.reply("Still here.", None, "stop", Some(2)),
        api.reply("Not kept.", None, "stop", Some(2)),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.db");
    let server = start(&fake, &log).await;
    let first = json!({"model": "p", "input": "Where is Oslo?"});
    let answer = server.exchange("/v1/responses", &first, Some(A)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let id = answer.body["id"].as_str().unwrap().to_owned();
    assert_eq!(answer.body["store"], true, "the API's default");

    let (status, kept) = get(&server, &format!("/v1/responses/{id}"), A).await;
    assert_eq!(status, 200, "{kept}");
    assert_eq!(kept["id"], id.as_str());
    assert_eq!(
        kept["output"][0]["content"][0]["text"],
        "Oslo is in Norway."
    );
    let (status, items) = get(&server, &format!("/v1/responses/{id}/input_items"), A).await;
    assert_eq!(status, 200, "{items}");
    assert_eq!(items["object"], "list");
    assert_eq!(
        items["data"][0]["content"][0]["text"], "Where is Oslo?",
        "{items}"
    );

    // Another tenant neither reads it nor continues it.
    let (status, _) = get(&server, &format!("/v1/responses/{id}"), B).await;
    assert_eq!(status, 404);
    let next = json!({"model": "p", "input": "Is it a capital?", "previous_response_id": id});
    let answer = server.exchange("/v1/responses", &next, Some(B)).await;
    assert_eq!(answer.status, 404, "{}", answer.body);
    assert_eq!(fake.received().len(), 1, "nothing sent for it");

    // Its tenant goes on from it: the provider gets the earlier turns.
    let answer = server.exchange("/v1/responses", &next, Some(A)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["previous_response_id"], id.as_str());
    let second = answer.body["id"].as_str().unwrap().to_owned();
    let sent = fake.received();
    assert_eq!(
        turns(&sent[1].body),
        [
            pair("user", "Where is Oslo?"),
            pair("assistant", "Oslo is in Norway."),
            pair("user", "Is it a capital?"),
        ]
    );

    // After a restart, the log still has them.
    server.shutdown().await;
    let server = start(&fake, &log).await;
    let third = json!({"model": "p", "input": "And now?", "previous_response_id": second});
    let answer = server.exchange("/v1/responses", &third, Some(A)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(turns(&fake.received()[2].body).len(), 5);

    // Deleted, it is gone; `store: false` keeps nothing.
    let deleted = server
        .send_as("DELETE", &format!("/v1/responses/{id}"), None, Some(A))
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    assert_eq!(deleted.body["deleted"], true);
    let (status, _) = get(&server, &format!("/v1/responses/{id}"), A).await;
    assert_eq!(status, 404);
    let unkept = json!({"model": "p", "input": "x", "store": false});
    let answer = server.exchange("/v1/responses", &unkept, Some(A)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let unkept_id = answer.body["id"].as_str().unwrap();
    let (status, _) = get(&server, &format!("/v1/responses/{unkept_id}"), A).await;
    assert_eq!(status, 404);

    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_client_continues_retrieves_and_lists_a_stored_response() {
    let Some(clients) = callai_tests::clients::Clients::installed() else {
        return;
    };
    let api = Api::OpenAi;
    let fake = FakeServer::start(vec![
        api.reply("Oslo is in Norway.", None, "stop", Some(4)),
        api.reply("Yes, its capital.", None, "stop", Some(4)),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "[providers.p]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"FAKE_KEY\"\nmodel = \"m-1\"\n\
         [defaults]\nprovider = \"p\"\n",
        fake.url()
    );
    let log = dir.path().join("runs.db");
    let server = TestServer::start_with(&toml, Some(&log), |k| {
        (k == "FAKE_KEY").then(|| "sk-stored".into())
    })
    .await;
    let base = server.url.clone();
    let out = tokio::task::spawn_blocking(move || clients.responses("continue", &base))
        .await
        .unwrap();
    assert_eq!(
        out["second"]["previous_response_id"], out["first"]["id"],
        "{out}"
    );
    assert_eq!(
        out["second"]["output"][0]["content"][0]["text"],
        "Yes, its capital."
    );
    assert_eq!(out["kept"]["id"], out["first"]["id"]);
    assert_eq!(out["kept"]["output"], out["first"]["output"]);
    assert_eq!(
        out["items"][0]["content"][0]["text"], "Where is Oslo?",
        "{out}"
    );
    let sent = fake.received();
    assert_eq!(
        turns(&sent[1].body),
        [
            pair("user", "Where is Oslo?"),
            pair("assistant", "Oslo is in Norway."),
            pair("user", "Is it a capital?"),
        ]
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_response_is_kept_before_its_last_event() {
    let api = Api::OpenAi;
    let reply = api.stream_reply(&["Streamed ", "and kept."], "stop", Some(3), Duration::ZERO);
    let fake = FakeServer::start(vec![reply]).await;
    let dir = tempfile::tempdir().unwrap();
    let server = start(&fake, &dir.path().join("runs.db")).await;
    let body = json!({"model": "p", "input": "Stream it.", "stream": true});
    let events = server.events("/v1/responses", &body, Some(A)).await;
    let last = events.last().expect("events");
    assert_eq!(last["type"], "response.completed", "{events:?}");
    let streamed = last["response"]["id"].as_str().unwrap();
    let (status, kept) = get(&server, &format!("/v1/responses/{streamed}"), A).await;
    assert_eq!(status, 200, "{kept}");
    assert_eq!(
        kept["output"][0]["content"][0]["text"],
        "Streamed and kept."
    );
    server.shutdown().await;
}
