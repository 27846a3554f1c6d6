//! Concurrency is real: runs waiting on a slow provider overlap instead of
//! queueing. (Speed itself is measured in `host/benches`, never here.)

use callai_engine::{Host, HostConfig, MockProvider, MockScript};
use callai_tests::pack;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_runs_waiting_200_ms_each_overlap() {
    let echo = pack("echo-attempts");
    let request = r#"{"messages": [{"role": "user", "content": "hi"}]}"#;
    let start = Instant::now();
    let mut runs = Vec::new();
    for i in 0..100 {
        let mock = Arc::new(
            MockProvider::new(
                MockScript::replies([("ok", 1)]),
                callai_engine::wire::StructuredOutput::Native,
            )
            .with_latency(Duration::from_millis(200)),
        );
        let host = Host::builder(HostConfig::default())
            .build()
            .unwrap()
            .with_provider("mock", mock);
        let echo = echo.clone();
        runs.push(tokio::spawn(async move {
            echo.run(&host, &format!("n{i}"), request).await
        }));
    }
    for run in runs {
        assert!(run.await.unwrap().result.is_ok());
    }
    // Serialised, they would take 100 x 200 ms = 20 s.
    let elapsed = start.elapsed();
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
}
