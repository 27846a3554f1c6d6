//! What uploads can make `callai serve` spend (issue 22, items 4 and 5): a
//! compile bomb is refused before it is compiled while other runs go on,
//! compilations take turns (`maxCompiles`), and a replaced or refused upload
//! leaves no compiled code behind.

use callai_tests::components::{component_with_function, with_custom_section};
use callai_tests::serve::{TestServer, metric_in};
use serde_json::json;
use std::time::Duration;

fn multi_call() -> Vec<u8> {
    std::fs::read(callai_test_programs_artifacts::path("multi_call").unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compile_bombs_are_refused_before_compiling_while_victims_run() {
    let toml = "[server]\nmaxPackFunctionBytes = 100000\n";
    let server = std::sync::Arc::new(TestServer::start(toml).await);
    let bombs = (0..3).map(|i| {
        let server = server.clone();
        tokio::spawn(async move {
            let bomb = component_with_function(3_600_000, &format!("bomb-{i}"));
            server
                .send("PUT", &format!("/v1/packs/bomb{i}"), Some(bomb))
                .await
        })
    });
    let victims = (0..20).map(|_| {
        let server = server.clone();
        tokio::spawn(async move {
            let body = json!({"pack": "echo-attempts", "input": {"messages": [{"role": "user", "content": "hi"}]}});
            server.post("/v1/runs", &body).await
        })
    });
    let bombs: Vec<_> = bombs.collect();
    let victims: Vec<_> = victims.collect();
    for bomb in bombs {
        let answer = bomb.await.unwrap();
        assert_eq!(answer.status, 413, "{}", answer.body);
        assert_eq!(
            answer.body["error"]["details"]["limit"],
            "server.maxPackFunctionBytes"
        );
        let message = answer.body["error"]["message"].as_str().unwrap();
        assert!(message.contains("3600000"), "{message}");
    }
    for victim in victims {
        let answer = victim.await.unwrap();
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(answer.body["status"], "ok", "{}", answer.body);
    }
    let metrics = server.metrics().await;
    assert_eq!(metric_in(&metrics, "callai_pack_compiles_running"), 0.0);
    let packs = server.get("/v1/packs").await.body;
    assert!(
        !packs.to_string().contains("bomb"),
        "a refused bomb is listed: {packs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compilations_take_turns() {
    let toml = "[server]\nmaxCompiles = 1\n";
    let server = std::sync::Arc::new(TestServer::start(toml).await);
    // Components that compile for a while and are no packs (400 after the
    // compile): three at once.
    let uploads: Vec<_> = (0..3)
        .map(|i| {
            let server = server.clone();
            tokio::spawn(async move {
                let bytes = component_with_function(900_000, &format!("slow-{i}"));
                server
                    .send("PUT", &format!("/v1/packs/slow{i}"), Some(bytes))
                    .await
            })
        })
        .collect();
    let (mut most_running, mut most_waiting) = (0.0f64, 0.0f64);
    while !uploads.iter().all(|u| u.is_finished()) {
        let metrics = server.metrics().await;
        most_running = most_running.max(metric_in(&metrics, "callai_pack_compiles_running"));
        most_waiting = most_waiting.max(metric_in(&metrics, "callai_pack_compiles_waiting"));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for upload in uploads {
        let answer = upload.await.unwrap();
        assert_eq!(answer.status, 400, "{}", answer.body);
        assert_eq!(answer.body["error"]["details"]["field"], "body");
    }
    assert_eq!(most_running, 1.0, "maxCompiles = 1");
    assert!(most_waiting >= 1.0, "the other two waited: {most_waiting}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_or_refused_upload_leaves_no_compiled_code() {
    let server = TestServer::start("").await;
    let compiled = || async { server.metric("callai_packs_compiled").await };
    let first = with_custom_section(multi_call(), "first");
    let first = server.send("PUT", "/v1/packs/mine", Some(first)).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let baseline = compiled().await;
    // Ten uploads of different bytes under one name: one compiled pack.
    for i in 0..10 {
        let bytes = with_custom_section(multi_call(), &format!("v{i}"));
        let answer = server.send("PUT", "/v1/packs/mine", Some(bytes)).await;
        assert_eq!(answer.status, 201, "{}", answer.body);
        let run = server
            .post("/v1/runs", &json!({"pack": "mine", "input": {"calls": 1}}))
            .await;
        assert_eq!(run.status, 200, "{}", run.body);
    }
    assert_eq!(compiled().await, baseline, "replaced uploads were kept");
    // Refused: no run export. Nothing kept under any name.
    let refused = server
        .send(
            "PUT",
            "/v1/packs/junk",
            Some(component_with_function(64, "junk")),
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(compiled().await, baseline, "a refused upload was kept");
    server.shutdown().await;
}
