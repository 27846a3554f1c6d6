//! Where a run in flight spends its CPU and memory: `--runs N` (10000)
//! started at once, each waiting 20 ms on the mock provider, as `cargo
//! bench --bench host` runs them, in one of four modes that each add a
//! layer, so that their differences are the layers' costs:
//!
//! - `sleep`: a tokio task that sleeps 20 ms (the task and its timer);
//! - `engine`: one structured `Host::call` on a host of its own (the engine,
//!   the session, the event log, the schema check, the mock's timer);
//! - `session`: the same call through a `RunSession` (what a pack's call
//!   goes through, without wasm);
//! - `pack`: the conformance node `echo-attempts` on a fresh instance of
//!   the pooling allocator (the store, the instance, the canonical ABI).
//!
//! Prints one JSON object: the resident memory the runs added at their
//! peak, per run, the first time N are in flight, split by mapping; and in
//! a second pass, warm, CPU and minor page faults per run. The mappings: the malloc heap, each
//! large reservation (wasmtime's pooled linear memories, tables and fiber
//! stacks), the rest. Run it under `perf record -g` or `heaptrack` to see
//! inside a layer (docs/src/performance.md has the commands).

use callai_engine::wire::{CallRequest, RetryField, StructuredOutput};
use callai_engine::{
    CallInput, EventLog, Host, HostConfig, Journal, MockProvider, MockScript, RunSession,
};
use callai_host::{PackRuntime, RuntimeOptions};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const WAIT: Duration = Duration::from_millis(20);
const REQUEST: &str = r#"{"messages": [{"role": "user", "content": "hi"}], "maxTokens": 64,
    "responseSchema": {"type": "object", "required": ["a"]}}"#;

/// Resident KiB by kind of mapping, from `/proc/self/smaps`.
fn resident_by_mapping() -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let mut out = BTreeMap::new();
    let mut current = String::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or_default();
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) =
                (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16))
        {
            let perms = fields.next().unwrap_or_default();
            let path = fields.nth(3).unwrap_or_default();
            let size = end - start;
            current = match path {
                "" if size >= 1 << 30 => format!("reservation of {} GiB", size >> 30),
                "" => "anonymous (malloc arenas, thread stacks)".to_owned(),
                "[heap]" => "[heap] (malloc)".to_owned(),
                p if p.starts_with('[') => p.to_owned(),
                _ if perms.contains('x') => "code".to_owned(),
                _ => "files and data".to_owned(),
            };
        } else if first == "Rss:" {
            let kib: u64 = fields.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            *out.entry(current.clone()).or_default() += kib;
        }
    }
    out
}

fn total(map: &BTreeMap<String, u64>) -> u64 {
    map.values().sum()
}

fn main() {
    let args = callai_bench::args();
    let runs: usize = callai_bench::arg(&args, "runs", 10_000);
    let mode: String = callai_bench::arg(&args, "mode", "pack".to_owned());
    let workers: usize = callai_bench::arg(&args, "workers", 2);
    // `--cpu-only --passes K`: for a profiler, K CPU passes and no memory
    // pass (whose sampler would be most of the profile).
    let cpu_only = args.contains_key("cpu-only");
    let passes: u32 = callai_bench::arg(&args, "passes", 1);
    let runtime = PackRuntime::with_options(&RuntimeOptions {
        max_concurrent_runs: u32::try_from(runs).expect("runs fit u32"),
        ..RuntimeOptions::default()
    })
    .expect("wasmtime");
    let example = callai_examples::example("echo-attempts").expect("bundled");
    let pack = runtime.load(&example.component()).expect("the pack loads");
    let rt = callai_host::tokio_runtime(Some(workers)).expect("tokio");
    let base = Host::builder(HostConfig::default())
        .build()
        .expect("a host");
    let request = CallRequest::from_json(REQUEST, RetryField::Honoured).expect("request");

    let go = |n: usize| {
        let hosts: Vec<Host> = (0..n)
            .map(|_| {
                let script = MockScript::replies([(r#"{"a": 1}"#, 1)]);
                let mock = MockProvider::new(script, StructuredOutput::Native).with_latency(WAIT);
                base.with_provider("mock", Arc::new(mock))
            })
            .collect();
        let (cpu0, faults0) = (callai_bench::cpu_time("self"), callai_bench::minor_faults());
        rt.block_on(async {
            let tasks: Vec<_> = hosts
                .into_iter()
                .map(|host| {
                    let (pack, request, mode) = (pack.clone(), request.clone(), mode.clone());
                    tokio::spawn(async move {
                        match mode.as_str() {
                            "sleep" => {
                                tokio::time::sleep(WAIT).await;
                                true
                            }
                            "engine" => {
                                host.call("bench", &request, &EventLog::new()).await.is_ok()
                            }
                            "session" => {
                                let mut session = RunSession::new(host, "bench", Journal::live());
                                let input = CallInput::Json(REQUEST.to_owned());
                                matches!(session.call(input).await, Ok(Ok(_)))
                            }
                            _ => pack.run(&host, "bench", REQUEST).await.result.is_ok(),
                        }
                    })
                })
                .collect();
            for t in tasks {
                assert!(t.await.expect("a run's task"), "a run failed");
            }
        });
        (
            callai_bench::cpu_time("self") - cpu0,
            callai_bench::minor_faults() - faults0,
        )
    };
    go(runs.min(200)); // warm the pool's slots, the allocator, the timer wheel
    // Memory first, the first time N runs are in flight (what a host that
    // takes N runs must hold); then CPU, warm, with no sampler in the
    // process (its reading of smaps would count as the runs' CPU).
    let before = resident_by_mapping();
    let mut peak = before.clone();
    if !cpu_only {
        peak = peak_while(&before, || {
            go(runs);
        });
    }
    let mut cpu = Duration::ZERO;
    let mut faults = 0;
    for _ in 0..passes {
        let (c, f) = go(runs);
        cpu += c;
        faults += f;
    }
    let per_run = |kib: u64| kib as f64 / runs as f64;
    let growth: BTreeMap<&String, f64> = peak
        .iter()
        .map(|(k, v)| (k, per_run(v.saturating_sub(*before.get(k).unwrap_or(&0)))))
        .filter(|(_, v)| *v > 0.05)
        .collect();
    let per_pass = f64::from(passes) * runs as f64;
    let out = serde_json::json!({
        "mode": mode,
        "runs": runs,
        "workers": workers,
        "cpu_us_per_run": cpu.as_secs_f64() * 1e6 / per_pass,
        "minor_faults_per_run": faults as f64 / per_pass,
        "kib_per_run_at_peak": per_run(total(&peak).saturating_sub(total(&before))),
        "kib_per_run_by_mapping": growth,
    });
    println!("{out}");
}

/// The largest resident set (by mapping) seen while `work` runs, sampled
/// every 2 ms by a thread of its own; `before` if it never grew.
fn peak_while(before: &BTreeMap<String, u64>, work: impl FnOnce()) -> BTreeMap<String, u64> {
    let peak = Arc::new(Mutex::new(before.clone()));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                let now = resident_by_mapping();
                let mut peak = peak.lock().expect("the peak");
                if total(&now) > total(&peak) {
                    *peak = now;
                }
                drop(peak);
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    work();
    done.store(true, Ordering::Relaxed);
    sampler.join().expect("the sampler");
    peak.lock().expect("the peak").clone()
}
