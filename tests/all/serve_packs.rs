//! What uploads can make `callai serve` spend (issue 22, items 4 and 5;
//! issue 31, item 10): a compile bomb, or a component that cannot be a
//! pack, is refused before it is compiled (before it waits for the compile
//! slot) while other runs go on, compilations take turns (`maxCompiles`),
//! one tenant's uploads queue behind each other and not in front of
//! another's, and a replaced or refused upload leaves no compiled code
//! behind.

use callai_tests::components::{component_with_function, pack_with_function, with_custom_section};
use callai_tests::serve::{PackCache, TestServer, metric_in};
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
    // No compiled-component cache: these compile on every run.
    let server = TestServer::start_cached(toml, None, |_| None, PackCache::Off).await;
    let server = std::sync::Arc::new(server);
    // Packs that compile for a while: three at once.
    let uploads: Vec<_> = (0..3)
        .map(|i| {
            let server = server.clone();
            tokio::spawn(async move {
                let bytes = pack_with_function(900_000, &format!("slow-{i}"));
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
        assert_eq!(answer.status, 201, "{}", answer.body);
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

/// Issue 31 #10: one tenant's uploads wait for each other, so another
/// tenant's upload made after them compiles before the second of them;
/// and a component that cannot be a pack is refused at once, without
/// waiting for the compile slot that a slow compile holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_uploads_queue_behind_each_other_and_no_pack_waits_for_none() {
    let toml = "[server]\nmaxCompiles = 1\nmaxPackFunctionBytes = 4194304\n\
                tokenEnv = \"ADMIN_TOKEN\"\n[tenants.a]\ntokenEnv = \"A_TOKEN\"\n[tenants.b]\ntokenEnv = \"B_TOKEN\"\n";
    let env = |k: &str| match k {
        "ADMIN_TOKEN" => Some("tok-admin".to_owned()),
        "A_TOKEN" => Some("tok-a".to_owned()),
        "B_TOKEN" => Some("tok-b".to_owned()),
        _ => None,
    };
    let server = TestServer::start_cached(toml, None, env, PackCache::Off).await;
    let server = std::sync::Arc::new(server);
    let upload = |token: &'static str, name: String, bytes: Vec<u8>| {
        let server = server.clone();
        tokio::spawn(async move {
            let path = format!("/v1/packs/{name}");
            let answer = server.send_as("PUT", &path, Some(bytes), Some(token)).await;
            (answer, std::time::Instant::now())
        })
    };
    let a: Vec<_> = (0..3)
        .map(|i| {
            upload(
                "tok-a",
                format!("a{i}"),
                pack_with_function(3_600_000, &format!("a{i}")),
            )
        })
        .collect();
    // Once a's first compile runs, b uploads one pack and one component
    // that cannot be a pack.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let metrics = server.metrics().await;
        if metric_in(&metrics, "callai_pack_compiles_running") >= 1.0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no compile of a's was seen running within a minute"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let b = upload("tok-b", "b0".into(), pack_with_function(3_600_000, "b0"));
    let started = std::time::Instant::now();
    // A small component is refused in a few milliseconds, while each pack
    // here takes about half a second to compile (a function of 3.6 MB,
    // under the raised `maxPackFunctionBytes`): a margin of a hundred
    // times. With packs of 900 kB and a junk component as large, a compile
    // ended in 75 ms against a refusal's 25 ms, and a loaded run raced.
    let junk = component_with_function(64, "junk");
    let junk = server
        .send_as("PUT", "/v1/packs/junk", Some(junk), Some("tok-b"))
        .await;
    let refused_after = started.elapsed();
    assert_eq!(junk.status, 400, "{}", junk.body);
    assert!(
        junk.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exports no `run`"),
        "{}",
        junk.body
    );
    let mut done = Vec::new();
    for (name, task) in ["a0", "a1", "a2"].into_iter().zip(a).chain([("b0", b)]) {
        let (answer, at) = task.await.unwrap();
        assert_eq!(answer.status, 201, "{name}: {}", answer.body);
        done.push((at, name));
    }
    done.sort();
    let order: Vec<&str> = done.iter().map(|(_, n)| *n).collect();
    // a's first compiled while the rest of a's waited for a's turn: b's,
    // queued meanwhile, came next, not after all of a's.
    assert_eq!(order[1], "b0", "b's upload waited behind a's: {order:?}");
    // The refusal did not wait for any compile to end.
    let (first_done, _) = done[0];
    assert!(
        started + refused_after < first_done,
        "the component of no pack waited for the compile slot"
    );
}
