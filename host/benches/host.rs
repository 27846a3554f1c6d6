//! The design's "numbers to reach", each as a ratio against its floor
//! measured in the same run:
//! - a callAI round trip (text; structured with schema validation) against a
//!   bare imported no-op call made the same way (≤ 3×; ≤ 6×);
//! - a node run on a fresh instance (pre-instantiated, pooling allocator)
//!   against wasmtime's bare instantiate of the same component (≤ 1.5×);
//! - 1,000 runs at once, each waiting 20 ms on the provider, against one
//!   such run (≤ 2×), with the process's peak memory;
//! - a compiled component loaded from the cache against compiling it (≥ 20×).
//!
//! `cargo bench -p callai-host --bench host`

use callai_host::bundled::{self, test_programs};
use callai_host::wasm::{CallAiCtx, CallAiView, add_to_linker};
use callai_host::{
    Engine, EventLog, HostConfig, MockProvider, MockScript, Pack, PackRuntime, Providers,
    RuntimeOptions,
};
use criterion::Criterion;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

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

fn engine_with(script: MockScript, latency: Duration) -> Engine {
    let mock = MockProvider::new(script, true).with_latency(latency);
    Engine::new(
        Arc::new(HostConfig::default()),
        Providers::new().with(Arc::new(mock)),
    )
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

fn round_trips(c: &mut Criterion, rt: &tokio::runtime::Runtime, pack: &Pack) {
    let mut g = c.benchmark_group("callai-round-trip");
    for (name, mode, calls) in [
        ("run/empty", "noop", 0),
        ("run/noop-x200", "noop", CALLS),
        ("run/text-x200", "text", CALLS),
        ("run/structured-x200", "structured", CALLS),
    ] {
        let input = format!(r#"{{"calls": {calls}, "mode": "{mode}"}}"#);
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                timed(
                    name,
                    iters,
                    || engine_with(script(mode, calls), Duration::ZERO),
                    |engine| {
                        let out = rt.block_on(pack.run(&engine, "bench", &input));
                        assert!(out.result.is_ok(), "{:?}", out.result);
                    },
                )
            })
        });
    }
    g.finish();
}

/// The bare floor: a plain engine, linker and store, `instantiate_async`.
struct Bare {
    wasi: WasiCtx,
    table: ResourceTable,
    callai: CallAiCtx,
}

impl WasiView for Bare {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

fn instantiation(c: &mut Criterion, rt: &tokio::runtime::Runtime, pack: &Pack, bytes: &[u8]) {
    let bare_engine = wasmtime::Engine::new(&Config::new()).unwrap();
    let component = Component::new(&bare_engine, bytes).unwrap();
    let mut linker: Linker<Bare> = Linker::new(&bare_engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
    add_to_linker(&mut linker, |s: &mut Bare| CallAiView {
        ctx: &mut s.callai,
    })
    .unwrap();
    let engine = engine_with(MockScript::default(), Duration::ZERO);
    let mut g = c.benchmark_group("instantiate");
    g.bench_function("bare-instantiate", |b| {
        b.iter_custom(|iters| {
            timed(
                "bare-instantiate",
                iters,
                || (),
                |()| {
                    let state = Bare {
                        wasi: WasiCtx::builder().build(),
                        table: ResourceTable::new(),
                        callai: CallAiCtx::new(engine.clone(), "bench", EventLog::new()),
                    };
                    let mut store = Store::new(&bare_engine, state);
                    rt.block_on(linker.instantiate_async(&mut store, &component))
                        .unwrap();
                },
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
                    let out = rt.block_on(pack.run(&engine, "bench", r#"{"calls": 0}"#));
                    assert!(out.result.is_ok());
                },
            )
        })
    });
    g.finish();
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

fn concurrency(c: &mut Criterion, rt: &tokio::runtime::Runtime, echo: &Pack) -> u64 {
    let request = r#"{"messages": [{"role": "user", "content": "hi"}]}"#;
    let wait = Duration::from_millis(20);
    let runs = |n: usize| {
        let engines: Vec<Engine> = (0..n)
            .map(|_| engine_with(MockScript::replies([("ok", 1)]), wait))
            .collect();
        engines
    };
    let go = |engines: Vec<Engine>| {
        rt.block_on(async {
            let tasks: Vec<_> = engines
                .into_iter()
                .map(|engine| {
                    let echo = echo.clone();
                    tokio::spawn(async move { echo.run(&engine, "bench", request).await })
                })
                .collect();
            for t in tasks {
                assert!(t.await.unwrap().result.is_ok());
            }
        })
    };
    let before = rss_kib("VmRSS:");
    let mut g = c.benchmark_group("concurrent-20ms-provider");
    g.sample_size(10);
    g.bench_function("one-run", |b| {
        b.iter_custom(|iters| timed("one-run", iters, || runs(1), go))
    });
    g.bench_function("1000-runs-at-once", |b| {
        b.iter_custom(|iters| timed("1000-runs-at-once", iters, || runs(1000), go))
    });
    g.finish();
    rss_kib("VmHWM:").saturating_sub(before)
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
    let runtime = PackRuntime::new().unwrap();
    let bench_bytes = std::fs::read(test_programs::BENCH_CALLS).unwrap();
    let bench_pack = runtime.load(&bench_bytes).unwrap();
    let echo_bytes = bundled::example("echo-attempts").unwrap().component;
    let echo = runtime.load(echo_bytes).unwrap();

    round_trips(&mut c, &rt, &bench_pack);
    instantiation(&mut c, &rt, &bench_pack, &bench_bytes);
    let peak_kib = concurrency(&mut c, &rt, &echo);
    compile_cache(&mut c, echo_bytes);
    c.final_summary();

    let per_call = |name: &str| {
        (median(name).saturating_sub(median("run/empty"))).as_secs_f64() / CALLS as f64
    };
    let noop = per_call("run/noop-x200");
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    let rows = [
        (
            "callAI text round trip / no-op import",
            ratio(per_call("run/text-x200"), noop),
            "<= 3",
            per_call("run/text-x200"),
        ),
        (
            "callAI structured round trip / no-op import",
            ratio(per_call("run/structured-x200"), noop),
            "<= 6",
            per_call("run/structured-x200"),
        ),
        (
            "node run, fresh instance / bare instantiate",
            ratio(
                median("node-run-fresh-instance").as_secs_f64(),
                median("bare-instantiate").as_secs_f64(),
            ),
            "<= 1.5",
            median("node-run-fresh-instance").as_secs_f64(),
        ),
        (
            "1000 runs at once / one run (20 ms provider)",
            ratio(
                median("1000-runs-at-once").as_secs_f64(),
                median("one-run").as_secs_f64(),
            ),
            "<= 2",
            median("1000-runs-at-once").as_secs_f64(),
        ),
        (
            "compile / load from cache",
            ratio(
                median("compile").as_secs_f64(),
                median("load-from-cache").as_secs_f64(),
            ),
            ">= 20",
            median("load-from-cache").as_secs_f64(),
        ),
    ];
    println!("\nratios (medians of this run):");
    println!("  no-op import call: {:.2} us", noop * 1e6);
    for (what, r, target, abs) in rows {
        println!(
            "  {what:<48} {r:>8.2}x  (target {target}; measured side {:.3} ms)",
            abs * 1e3
        );
    }
    println!(
        "  peak memory growth over 1000 concurrent runs: {} MiB",
        peak_kib / 1024
    );
}
