//! The design's "numbers to reach", each as a ratio against its floor
//! measured in the same run:
//! - a callAI round trip (text; structured with schema validation) against
//!   an import of the same WIT signature that returns a canned result: the
//!   price of the canonical ABI alone (≤ 1.5×); and the engine's own share
//!   (the same call through `Host::call`, no wasm);
//! - a node run on a fresh instance (pre-instantiated, pooling allocator)
//!   against wasmtime's bare instantiate of the same component (≤ 1.5×);
//! - N runs at once, each waiting 20 ms on the provider, against the floor
//!   max(20 ms, the runs' host CPU / cores), with CPU and memory per run;
//! - a compiled component loaded from the cache against compiling it (≥ 20×).
//!
//! `cargo bench -p callai-tests --bench host` (`CALLAI_BENCH_RUNS` sets N,
//! default 10000).

mod floor;

use callai_engine::wire::CallRequest;
use callai_engine::{EventLog, Host, HostConfig, MockProvider, MockScript};
use callai_host::{Pack, PackRuntime, RuntimeOptions};
use criterion::Criterion;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Per-iteration times each benchmark measured, by name, for the ratios.
static SAMPLES: Mutex<BTreeMap<&'static str, Vec<Duration>>> = Mutex::new(BTreeMap::new());

fn record(name: &'static str, per_iteration: Duration) {
    SAMPLES
        .lock()
        .unwrap()
        .entry(name)
        .or_default()
        .push(per_iteration);
}

fn median(name: &str) -> Duration {
    let mut v = SAMPLES
        .lock()
        .unwrap()
        .get(name)
        .cloned()
        .unwrap_or_default();
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// Runs `iters` iterations, setting each up untimed, timing only `run`.
fn timed<S>(
    name: &'static str,
    iters: u64,
    mut setup: impl FnMut() -> S,
    mut run: impl FnMut(S),
) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let state = setup();
        let start = Instant::now();
        run(state);
        total += start.elapsed();
    }
    record(name, total / iters.max(1) as u32);
    total
}

fn host_with(script: MockScript, latency: Duration) -> Host {
    let mock = MockProvider::new(script, callai_engine::wire::StructuredOutput::Native)
        .with_latency(latency);
    Host::builder(HostConfig::default())
        .mock(mock)
        .build()
        .unwrap()
}

fn script(mode: &str, n: usize) -> MockScript {
    let content = if mode == "structured" {
        r#"{"a": 1}"#
    } else {
        "ok"
    };
    MockScript::replies(std::iter::repeat_n((content, 1), n))
}

const CALLS: usize = 200;

fn round_trips(c: &mut Criterion, rt: &tokio::runtime::Runtime, pack: &Pack, floor: &floor::Floor) {
    let mut g = c.benchmark_group("callai-round-trip");
    for (name, floor_name, mode, calls) in [
        ("run/empty", "floor/empty", "text", 0),
        ("run/text-x200", "floor/text-x200", "text", CALLS),
        (
            "run/structured-x200",
            "floor/structured-x200",
            "structured",
            CALLS,
        ),
    ] {
        let input = format!(r#"{{"calls": {calls}, "mode": "{mode}"}}"#);
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                timed(
                    name,
                    iters,
                    || host_with(script(mode, calls), Duration::ZERO),
                    |host| {
                        let out = rt.block_on(pack.run(&host, "bench", &input));
                        assert!(out.result.is_ok(), "{:?}", out.result);
                    },
                )
            })
        });
        g.bench_function(floor_name, |b| {
            b.iter_custom(|iters| {
                timed(
                    floor_name,
                    iters,
                    || (),
                    |()| rt.block_on(floor.run(&input)),
                )
            })
        });
    }
    // The engine alone: the same calls through Host::call, no wasm.
    for (name, mode) in [
        ("engine/text-x200", "text"),
        ("engine/structured-x200", "structured"),
    ] {
        let mut request =
            serde_json::json!({"messages": [{"role": "user", "content": "hi"}], "maxTokens": 16});
        if mode == "structured" {
            request["responseSchema"] = serde_json::json!({"type": "object", "required": ["a"]});
        }
        let request =
            CallRequest::from_value(&request, callai_engine::wire::RetryField::Honoured).unwrap();
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                timed(
                    name,
                    iters,
                    || host_with(script(mode, CALLS), Duration::ZERO),
                    |host| {
                        rt.block_on(async {
                            let events = EventLog::new();
                            for _ in 0..CALLS {
                                host.call("bench", &request, &events).await.unwrap();
                            }
                        })
                    },
                )
            })
        });
    }
    g.finish();
}

fn instantiation(
    c: &mut Criterion,
    rt: &tokio::runtime::Runtime,
    pack: &Pack,
    floor: &floor::Floor,
) {
    let host = host_with(MockScript::default(), Duration::ZERO);
    let mut g = c.benchmark_group("instantiate");
    g.bench_function("bare-instantiate", |b| {
        b.iter_custom(|iters| {
            timed(
                "bare-instantiate",
                iters,
                || (),
                |()| rt.block_on(floor.instantiate()),
            )
        })
    });
    g.bench_function("node-run-fresh-instance", |b| {
        b.iter_custom(|iters| {
            timed(
                "node-run-fresh-instance",
                iters,
                || (),
                |()| {
                    let out = rt.block_on(pack.run(&host, "bench", r#"{"calls": 0}"#));
                    assert!(out.result.is_ok());
                },
            )
        })
    });
    g.finish();
}

/// This process's CPU time (user + system) so far.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses): utime and
    // stime are fields 14 and 15 of the line, in clock ticks (100 Hz here).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // `rest` starts at field 3 (the state): utime is field 14, stime 15.
    let ticks = field(11) + field(12);
    Duration::from_millis(ticks * 10)
}

fn rss_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// N structured runs at once through the Book-AI-shaped echo node, each
/// waiting 20 ms on the provider: wall time, CPU and memory per run.
struct Concurrency {
    runs: usize,
    wall: Duration,
    cpu: Duration,
    peak_growth_kib: u64,
}

fn concurrency(rt: &tokio::runtime::Runtime, runtime: &PackRuntime, runs: usize) -> Concurrency {
    let echo = callai_tests::pack_in(runtime, "echo-attempts");
    let request = r#"{"messages": [{"role": "user", "content": "hi"}], "maxTokens": 64,
                      "responseSchema": {"type": "object", "required": ["a"]}}"#;
    let wait = Duration::from_millis(20);
    let base = host_with(MockScript::default(), wait);
    let go = |n: usize| {
        let hosts: Vec<Host> = (0..n)
            .map(|_| {
                let mock = MockProvider::new(
                    script("structured", 1),
                    callai_engine::wire::StructuredOutput::Native,
                )
                .with_latency(wait);
                base.with_provider("mock", Arc::new(mock))
            })
            .collect();
        let (cpu0, start) = (cpu_time(), Instant::now());
        rt.block_on(async {
            let tasks: Vec<_> = hosts
                .into_iter()
                .map(|host| {
                    let echo = echo.clone();
                    tokio::spawn(async move { echo.run(&host, "bench", request).await })
                })
                .collect();
            for t in tasks {
                let out = t.await.unwrap();
                assert!(out.result.is_ok(), "{:?}", out.result);
            }
        });
        (start.elapsed(), cpu_time() - cpu0)
    };
    go(runs.min(200)); // warm the pool's slots and the allocator
    let before = rss_kib("VmHWM:").max(rss_kib("VmRSS:"));
    let (wall, cpu) = go(runs);
    Concurrency {
        runs,
        wall,
        cpu,
        peak_growth_kib: rss_kib("VmHWM:").saturating_sub(before),
    }
}

fn compile_cache(c: &mut Criterion, bytes: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let small = RuntimeOptions {
        max_concurrent_runs: 4,
        ..RuntimeOptions::default()
    };
    let uncached = PackRuntime::with_options(&small).unwrap();
    let cached = PackRuntime::with_options(&small.clone().cache_dir(dir.path())).unwrap();
    cached.load(bytes).unwrap(); // warm the cache
    let mut g = c.benchmark_group("compile");
    g.sample_size(10);
    g.bench_function("compile", |b| {
        b.iter_custom(|iters| {
            timed(
                "compile",
                iters,
                || (),
                |()| drop(uncached.load(bytes).unwrap()),
            )
        })
    });
    g.bench_function("load-from-cache", |b| {
        b.iter_custom(|iters| {
            timed(
                "load-from-cache",
                iters,
                || (),
                |()| drop(cached.load(bytes).unwrap()),
            )
        })
    });
    g.finish();
}

fn main() {
    let mut c = Criterion::default()
        .configure_from_args()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let runs: usize = std::env::var("CALLAI_BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let runtime = PackRuntime::with_options(&RuntimeOptions {
        max_concurrent_runs: runs as u32,
        ..RuntimeOptions::default()
    })
    .unwrap();
    let bench_bytes = std::fs::read(callai_test_programs_artifacts::BENCH_CALLS).unwrap();
    let bench_pack = runtime.load(&bench_bytes).unwrap();
    let floor = floor::Floor::new(&bench_bytes);

    round_trips(&mut c, &rt, &bench_pack, &floor);
    instantiation(&mut c, &rt, &bench_pack, &floor);
    let many = concurrency(&rt, &runtime, runs);
    compile_cache(
        &mut c,
        &callai_examples::example("echo-attempts")
            .unwrap()
            .component(),
    );
    c.final_summary();

    let per_call = |name: &str, empty: &str| {
        median(name).saturating_sub(median(empty)).as_secs_f64() / CALLS as f64
    };
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    let us = |s: f64| s * 1e6;
    println!("\nratios (medians of this run):");
    for mode in ["text", "structured"] {
        let host = per_call(&format!("run/{mode}-x200"), "run/empty");
        let canned = per_call(&format!("floor/{mode}-x200"), "floor/empty");
        let engine = median(&format!("engine/{mode}-x200")).as_secs_f64() / CALLS as f64;
        println!(
            "  ctx.callAI {mode:<10} round trip {:>7.2} us / canned import {:>6.2} us = {:>5.2}x (target <= 1.5); engine alone {:.2} us",
            us(host),
            us(canned),
            ratio(host, canned),
            us(engine)
        );
    }
    let node = median("node-run-fresh-instance").as_secs_f64();
    let bare = median("bare-instantiate").as_secs_f64();
    println!(
        "  node run on a fresh instance {:>7.1} us / bare instantiate {:>6.1} us = {:>5.2}x (target <= 1.5)",
        us(node),
        us(bare),
        ratio(node, bare)
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let floor_wall = (many.cpu.as_secs_f64() / cores).max(0.020);
    println!(
        "  {} structured runs at once, 20 ms provider: wall {:.1} ms / floor {:.1} ms = {:.2}x (target <= 1.2); host CPU {:.1} us per run (target <= 30); peak memory +{} KiB = {:.1} KiB per run (target <= 10)",
        many.runs,
        many.wall.as_secs_f64() * 1e3,
        floor_wall * 1e3,
        ratio(many.wall.as_secs_f64(), floor_wall),
        us(many.cpu.as_secs_f64() / many.runs as f64),
        many.peak_growth_kib,
        many.peak_growth_kib as f64 / many.runs as f64
    );
    let compile = median("compile").as_secs_f64();
    let load = median("load-from-cache").as_secs_f64();
    println!(
        "  compile {:.1} ms / load from cache {:.2} ms = {:.0}x (target >= 20)",
        compile * 1e3,
        load * 1e3,
        ratio(compile, load)
    );
}
