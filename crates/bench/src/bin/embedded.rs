//! The host embedded in a small program: `--calls N` structured calls to
//! the OpenAI-compatible server at `--url`, `--concurrency C` at a time,
//! either through a sandboxed pack (`--mode pack`: the conformance node
//! `echo-attempts`, a fresh instance per call) or through the engine alone
//! (`--mode engine`). Prints wall time, CPU per call and peak memory.

use callai_engine::wire::CallRequest;
use callai_engine::{EventLog, Host};
use callai_host::{PackRuntime, RuntimeOptions};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Semaphore;

fn main() {
    let args = callai_bench::args();
    let url: String = callai_bench::arg(&args, "url", String::new());
    let calls: usize = callai_bench::arg(&args, "calls", 1000);
    let concurrency: usize = callai_bench::arg(&args, "concurrency", 200);
    let mode: String = callai_bench::arg(&args, "mode", "pack".to_owned());
    let toml = format!(
        "[defaults]\nprovider = \"openai\"\n[providers.openai]\nbaseUrl = \"{url}\"\napiKeyEnv = \"\"\nmodel = \"fake-model\"\n[limits]\nmaxConcurrentRuns = {concurrency}\n"
    );
    let config = callai_config::Config::from_toml(&toml).expect("config");
    let runtime = PackRuntime::with_options(&RuntimeOptions::from_limits(&config.host.limits))
        .expect("wasmtime");
    let example = callai_examples::example("echo-attempts").expect("bundled");
    let pack = runtime.load(&example.component()).expect("the pack loads");
    // `--tokio default`: tokio's own intervals, not the host's tuned ones.
    let rt = match args.get("tokio").map(String::as_str) {
        Some("default") => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("tokio"),
        _ => callai_host::tokio_runtime(None).expect("tokio"),
    };
    let host = rt
        .block_on(async { config.host_builder(&|_| None).and_then(|b| b.build()) })
        .expect("host");
    let request_json = callai_bench::structured_request().to_string();
    let request = CallRequest::from_json(&request_json, callai_engine::wire::RetryField::Honoured)
        .expect("request");

    let engine = mode == "engine";
    let one = move |host: Host, pack: callai_host::Pack, req: CallRequest, text: Arc<str>| async move {
        match engine {
            true => host
                .call("bench.node", &req, &EventLog::new())
                .await
                .map(|r| r.attempts.map_or(0, |a| a.count))
                .is_ok(),
            false => pack
                .run(&host, "bench.node", &text)
                .await
                .result
                .is_ok_and(|o| !o.contains("\"error\"")),
        }
    };
    let text: Arc<str> = request_json.into();
    // Warm up: connections, caches.
    rt.block_on(async {
        for _ in 0..10 {
            assert!(
                one(host.clone(), pack.clone(), request.clone(), text.clone()).await,
                "a warm-up call failed"
            );
        }
    });
    let cpu0 = callai_bench::cpu_time("self");
    let started = Instant::now();
    let failures = rt.block_on(async {
        let gate = Arc::new(Semaphore::new(concurrency));
        let mut tasks = Vec::with_capacity(calls);
        for _ in 0..calls {
            let permit = gate.clone().acquire_owned().await.expect("gate");
            let f = one(host.clone(), pack.clone(), request.clone(), text.clone());
            tasks.push(tokio::spawn(async move {
                let ok = f.await;
                drop(permit);
                ok
            }));
        }
        let mut failures = 0;
        for t in tasks {
            failures += usize::from(!t.await.expect("task"));
        }
        failures
    });
    let wall = started.elapsed();
    let cpu = callai_bench::cpu_time("self") - cpu0;
    let out = serde_json::json!({
        "mode": mode,
        "calls": calls,
        "concurrency": concurrency,
        "failures": failures,
        "wall_s": wall.as_secs_f64(),
        "cpu_s": cpu.as_secs_f64(),
        "cpu_ms_per_call": cpu.as_secs_f64() * 1000.0 / calls as f64,
        "peak_rss_mib": callai_bench::status_kib("self", "VmHWM") as f64 / 1024.0,
    });
    println!("{out}");
}
