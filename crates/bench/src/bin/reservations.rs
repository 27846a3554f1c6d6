//! The budget ledger's own throughput, below `serve`'s allotments:
//! `--writers W` tasks in this process, each reserving a call's worst case
//! in tenant `--tenant`'s budget in the run log at `--url` and charging it
//! at once, for `--seconds S`. Each reservation is one atomic operation in
//! the database, as a call that takes the last of a budget makes it. Prints
//! reservations (each with its charge) and their rate.

use callai_engine::budget::{Limits, ReserveRequest, Reserved, Spend, Window};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn main() {
    let args = callai_bench::args();
    let url: String = callai_bench::arg(&args, "url", String::new());
    let writers: usize = callai_bench::arg(&args, "writers", 8);
    let seconds: f64 = callai_bench::arg(&args, "seconds", 5.0);
    let tenant: String = callai_bench::arg(&args, "tenant", "bench".to_owned());
    let rt = callai_host::tokio_runtime(Some(2)).expect("tokio");
    let done = Arc::new(AtomicU64::new(0));
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
        for _ in 0..writers {
            let (log, done, tenant) = (log.clone(), done.clone(), tenant.clone());
            tasks.push(tokio::spawn(async move {
                let ledger = log.ledger().expect("the run log keeps budgets");
                let need = Spend {
                    requests: 2,
                    output_tokens: 200,
                    input_tokens: 300,
                    cost: 5_000,
                };
                let request = ReserveRequest {
                    tenant: &tenant,
                    window: Window::Day,
                    limits: Limits {
                        requests: Some(u64::MAX >> 2),
                        output_tokens: Some(u64::MAX >> 2),
                        input_tokens: None,
                        cost: Some(u64::MAX >> 2),
                    },
                    need,
                    calls: 1,
                    owner: "bench",
                    ttl: Duration::from_secs(60),
                };
                while Instant::now() < until {
                    let Reserved::Admitted { reservation, .. } =
                        ledger.reserve(&request).await.expect("reserve")
                    else {
                        panic!("a budget this large always fits");
                    };
                    let spent = Spend {
                        requests: 1,
                        output_tokens: 40,
                        input_tokens: 10,
                        cost: 1_000,
                    };
                    ledger
                        .settle(&tenant, reservation, spent)
                        .await
                        .expect("settle");
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        for t in tasks {
            t.await.expect("a writer");
        }
    });
    let wall = started.elapsed().as_secs_f64();
    let n = done.load(Ordering::Relaxed);
    println!(
        "{}",
        serde_json::json!({"writers": writers, "reservations": n, "wall_s": wall, "per_s": n as f64 / wall})
    );
}
