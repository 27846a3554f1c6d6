//! Run-log throughput: `--writers W` recorders in this process, each
//! recording runs of `--calls C` calls into the run log at `--url` (an
//! SQLite file or a `postgres://` URL) for `--seconds S`, one transaction
//! per call as a host does. Prints calls committed and commits per second.

use callai_engine::events::Event;
use callai_engine::runlog::{
    BeginRun, Entry, ExistingRun, Outcome, RecordedCall, RunSeed, RunStatus,
};
use callai_engine::wire::{Attempts, CallResult};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn call(index: u32) -> RecordedCall {
    RecordedCall {
        node_id: "bench.node".into(),
        index,
        entry: Entry::Json,
        request: serde_json::json!({"messages": [{"role": "user", "content": format!("call {index}")}]}),
        outcome: Outcome::Result(CallResult {
            content: Some("A reply of a realistic size, a sentence or two long.".into()),
            attempts: Some(Attempts {
                count: 1,
                output_tokens: Some(14),
                usage_complete: true,
                structured_output: None,
            }),
            ..CallResult::default()
        }),
        events: vec![Event::ProviderUsage {
            provider: "openai".into(),
            model: "fake".into(),
            input_tokens: Some(20),
            output_tokens: Some(14),
            node_id: Some("bench.node".into()),
            attempt: 1,
            reason: "first".into(),
        }],
    }
}

fn main() {
    let args = callai_bench::args();
    let url: String = callai_bench::arg(&args, "url", String::new());
    let writers: usize = callai_bench::arg(&args, "writers", 8);
    let seconds: f64 = callai_bench::arg(&args, "seconds", 5.0);
    let calls: u32 = callai_bench::arg(&args, "calls", 20);
    let tag: String = callai_bench::arg(&args, "tag", std::process::id().to_string());
    let rt = callai_host::tokio_runtime(Some(2)).expect("tokio");
    let committed = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    rt.block_on(async {
        let log = callai_config::open_runlog(
            &url,
            callai_config::OpenLog::CreateIfMissing,
            &callai_config::RunLogConfig::default(),
        )
        .await
        .expect("the run log opens");
        let until = started + Duration::from_secs_f64(seconds);
        let mut tasks = Vec::new();
        for w in 0..writers {
            let (log, committed, tag) = (log.clone(), committed.clone(), tag.clone());
            tasks.push(tokio::spawn(async move {
                let mut n = 0;
                while Instant::now() < until {
                    let run_id = format!("bench-{tag}-{w}-{n}");
                    n += 1;
                    let begin = BeginRun {
                        run: (&run_id).into(),
                        node_id: "bench.node",
                        seed: RunSeed::fresh(),
                        existing: ExistingRun::Refuse,
                        spec: None,
                        lease: None,
                    };
                    let fence = log.begin(&begin).await.expect("begin");
                    for i in 0..calls {
                        let c = call(i);
                        log.commit_call((&run_id).into(), fence, &c, &c.events)
                            .await
                            .expect("commit");
                        committed.fetch_add(1, Ordering::Relaxed);
                    }
                    log.finish((&run_id).into(), fence, &[], RunStatus::Ok, "{}")
                        .await
                        .expect("finish");
                }
            }));
        }
        for t in tasks {
            t.await.expect("a writer");
        }
    });
    let wall = started.elapsed().as_secs_f64();
    let n = committed.load(Ordering::Relaxed);
    println!(
        "{}",
        serde_json::json!({"writers": writers, "calls_committed": n, "wall_s": wall, "per_s": n as f64 / wall})
    );
}
