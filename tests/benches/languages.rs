//! The Book AI pack in each language, measured side by side: component
//! size (as built, and as the binary stores it), first compile, load from
//! the cache, a fresh instance plus a clean run, memory per instance in
//! flight, and the smallest `limits.memoryBytes` it runs in.
//!
//! `cargo bench -p callai-tests --bench languages`

use callai_engine::{Host, HostConfig, MockProvider, MockScript};
use callai_host::{PackRuntime, RuntimeOptions};
use std::time::{Duration, Instant};

const PACKS: [&str; 3] = ["bookai-scene", "bookai-scene-ts", "bookai-scene-py"];
const CLEAN: &str = include_str!("../../examples/bookai-scene/scripts/clean.json");
const INPUT: &str = r#"{"premise": "A lighthouse keeper finds an old letter."}"#;

fn host(memory: u64, latency: Duration) -> Host {
    let mut config = HostConfig::default();
    config.limits.memory_bytes = memory;
    let mock = MockProvider::new(
        MockScript::from_json(CLEAN).unwrap(),
        callai_engine::wire::StructuredOutput::Native,
    )
    .with_latency(latency);
    Host::builder(config).mock(mock).build().unwrap()
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let rt = callai_host::tokio_runtime(Some(2)).unwrap();
    println!(
        "{:<16} {:>10} {:>10} {:>12} {:>12} {:>12} {:>14} {:>12}",
        "pack",
        "size",
        "stored",
        "compile",
        "cache load",
        "run (fresh)",
        "memory/run",
        "min memory"
    );
    for name in PACKS {
        let Some(example) = callai_examples::example(name) else {
            println!("{name:<16} not bundled (its toolchain was missing at build time)");
            continue;
        };
        let bytes = example.component();
        let stored = match example.component {
            callai_examples::Component::Raw(b)
            | callai_examples::Component::Zstd { bytes: b, .. } => b.len(),
        };
        let options = RuntimeOptions {
            max_concurrent_runs: 64,
            max_memory_bytes: 256 << 20,
            ..RuntimeOptions::default()
        };
        let start = Instant::now();
        let pack = PackRuntime::with_options(&options)
            .unwrap()
            .load(&bytes)
            .unwrap();
        let compile = start.elapsed();
        let dir = tempfile::tempdir().unwrap();
        let cached = PackRuntime::with_options(&options.clone().cache_dir(dir.path())).unwrap();
        cached.load(&bytes).unwrap();
        let loads: Vec<Duration> = (0..5)
            .map(|_| {
                let start = Instant::now();
                cached.load(&bytes).unwrap();
                start.elapsed()
            })
            .collect();
        let runs: Vec<Duration> = (0..20)
            .map(|_| {
                let h = host(256 << 20, Duration::ZERO);
                let start = Instant::now();
                let out = rt.block_on(pack.run(&h, "bench", INPUT));
                assert!(out.result.is_ok(), "{name}: {:?}", out.result);
                start.elapsed()
            })
            .collect();
        // Memory per run in flight: 32 runs held open on a slow provider.
        let before = rss_kib();
        let in_flight = 32;
        let grown = rt.block_on(async {
            let tasks: Vec<_> = (0..in_flight)
                .map(|_| {
                    let (pack, h) = (pack.clone(), host(256 << 20, Duration::from_millis(400)));
                    tokio::spawn(async move { pack.run(&h, "bench", INPUT).await })
                })
                .collect();
            tokio::time::sleep(Duration::from_millis(300)).await;
            let grown = rss_kib().saturating_sub(before);
            for t in tasks {
                assert!(t.await.unwrap().result.is_ok());
            }
            grown
        });
        // The smallest memory limit, in MiB steps of 8, the clean run fits in.
        let min_memory = (1..=32)
            .map(|n| n * (8 << 20))
            .find(|&limit| {
                rt.block_on(pack.run(&host(limit, Duration::ZERO), "bench", INPUT))
                    .result
                    .is_ok()
            })
            .map_or("> 256 MiB".into(), |m| format!("{} MiB", m >> 20));
        println!(
            "{:<16} {:>7.1} MB {:>7.1} MB {:>9.0} ms {:>9.2} ms {:>9.2} ms {:>10.1} MiB {:>12}",
            name,
            bytes.len() as f64 / 1e6,
            stored as f64 / 1e6,
            compile.as_secs_f64() * 1e3,
            median(loads).as_secs_f64() * 1e3,
            median(runs).as_secs_f64() * 1e3,
            grown as f64 / 1024.0 / in_flight as f64,
            min_memory
        );
    }
}
