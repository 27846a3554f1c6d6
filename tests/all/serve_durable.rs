//! A durable run that is no longer this host's (issue 22, item 16): once
//! another recorder has taken it over, the host that started it answers
//! for it from the run log, not from what it saw before it was fenced out.

use callai_engine::RunLog;
use callai_engine::runlog::{Lease, RunStatus};
use callai_runlog_sqlite::SqliteRunLog;
use callai_tests::serve::TestServer;
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_fenced_out_of_a_run_answers_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    // The one call waits 3 s on the mock: the run is in flight meanwhile.
    let toml = "[runlog]\nleaseMs = 300\n[mock]\nlatencyMs = 3000\n";
    let server = TestServer::start_with(toml, Some(&path), |_| None).await;
    let body = json!({
        "pack": "echo-attempts", "runId": "r1", "durable": true, "wait": false,
        "input": {"messages": [{"role": "user", "content": "hi"}]}
    });
    let started = server.post("/v1/runs", &body).await;
    assert_eq!(started.status, 202, "{}", started.body);
    // Another recorder takes the run over and finishes it.
    let log = SqliteRunLog::open(&path).unwrap();
    let lease = Lease {
        owner: "elsewhere",
        duration: Duration::from_secs(60),
    };
    let (fence, _) = log.resume("r1".into(), Some(lease)).await.unwrap();
    let output = json!({"finishedBy": "elsewhere"}).to_string();
    log.finish("r1".into(), fence, &[], RunStatus::Ok, &output)
        .await
        .unwrap();
    // The first host's next renewal is refused: its run stops, and from then
    // on it says what the log says.
    let mut answer = server.get("/v1/runs/r1").await;
    for _ in 0..100 {
        if answer.body["status"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        answer = server.get("/v1/runs/r1").await;
    }
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["status"], "ok", "{}", answer.body);
    assert_eq!(answer.body["output"], json!({"finishedBy": "elsewhere"}));
    let events = server.get("/v1/runs/r1/events").await;
    assert_eq!(events.body["isComplete"], true, "{}", events.body);
    server.shutdown().await;
}
