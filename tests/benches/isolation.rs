//! Isolation, measured: victim runs (a structured call through the
//! echo-attempts pack, the provider answering after 20 ms) started at a
//! steady pace, alone and then beside each attack of issue 13 running in a
//! loop. Reports the victims' p50 and p99 latency and their ratio to the
//! run with no attacker (aim: under 1.5x).
//!
//! `cargo bench -p callai-tests --bench isolation`

use callai_engine::{Host, HostConfig, MockProvider, MockScript};
use callai_host::{Pack, PackRuntime, RuntimeOptions};
use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::paced::{self, percentile};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const VICTIMS: usize = 200;
const PACE: Duration = Duration::from_millis(5);
const WAIT: Duration = Duration::from_millis(20);

fn config(edit: impl FnOnce(&mut HostConfig)) -> HostConfig {
    let mut c = HostConfig::default();
    edit(&mut c);
    c
}

fn mock_host(config: HostConfig, script: Value, latency: Duration) -> Host {
    let mock = MockProvider::new(
        MockScript::from_json(&script.to_string()).unwrap(),
        callai_engine::wire::StructuredOutput::Native,
    )
    .with_latency(latency);
    Host::builder(config).mock(mock).build().unwrap()
}

/// One attack: a pack, its host, its input, run again and again.
struct Attack {
    name: &'static str,
    pack: Pack,
    host: Box<dyn Fn() -> Host + Send + Sync>,
    input: String,
}

/// The victims' latencies, sorted, with `attack` looping beside them.
async fn victims(rt: &PackRuntime, attack: Option<&Attack>, concurrency: usize) -> Vec<Duration> {
    let echo = callai_tests::pack_in(rt, "echo-attempts");
    let request = r#"{"messages": [{"role": "user", "content": "hi"}], "maxTokens": 64,
                      "responseSchema": {"type": "object", "required": ["a"]}}"#;
    let stop = Arc::new(AtomicBool::new(false));
    let mut attackers = Vec::new();
    if let Some(a) = attack {
        for _ in 0..concurrency {
            let (pack, input, stop) = (a.pack.clone(), a.input.clone(), stop.clone());
            let hosts: Vec<Host> = (0..64).map(|_| (a.host)()).collect();
            attackers.push(tokio::spawn(async move {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let _ = pack.run(&hosts[i % hosts.len()], "attacker", &input).await;
                    i += 1;
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let victim = || {
        let host = mock_host(
            HostConfig::default(),
            json!([{"content": "{\"a\": 1}", "outputTokens": 3}]),
            WAIT,
        );
        let echo = echo.clone();
        async move {
            let out = echo.run(&host, "victim", request).await;
            assert!(out.result.is_ok(), "{:?}", out.result);
        }
    };
    paced::victims(VICTIMS, PACE, victim, &stop, attackers).await
}

/// Every attack, each a pack of `runtime` (or the `echo` pack) against a
/// host of its own; `huge_url` is a provider streaming a 1 GiB body.
fn attacks(runtime: &PackRuntime, echo: &Pack, huge_url: String) -> Vec<Attack> {
    let program = |name: &str| {
        runtime
            .load_file(std::path::Path::new(
                callai_test_programs_artifacts::path(name).unwrap(),
            ))
            .unwrap()
    };
    let doubling = callai_tests::schemas::doubling_in_form("pointer", 31);
    let braces = "{".repeat(400_000);
    vec![
        Attack {
            name: "log flood (40 x 8 MiB lines)",
            pack: program("log_flood"),
            host: Box::new(|| mock_host(config(|c| c.limits.memory_bytes = 32 << 20), json!([]), Duration::ZERO)),
            input: json!({"lines": 40, "bytes": 8 << 20}).to_string(),
        },
        Attack {
            name: "typed request of 200,000 empty messages",
            pack: program("many_messages"),
            host: Box::new(|| mock_host(HostConfig::default(), json!([{"content": "x"}]), Duration::ZERO)),
            input: json!({"count": 200_000}).to_string(),
        },
        Attack {
            name: "schema doubling 31 levels deep",
            pack: echo.clone(),
            host: Box::new(|| mock_host(HostConfig::default(), json!([{"content": "{}"}]), Duration::ZERO)),
            input: json!({"messages": [{"role": "user", "content": "x"}], "responseSchema": doubling}).to_string(),
        },
        Attack {
            name: "reply of 400,000 braces",
            pack: echo.clone(),
            host: {
                let braces = braces.clone();
                Box::new(move || mock_host(HostConfig::default(), json!([{"content": braces}, {"content": braces}, {"content": braces}]), Duration::ZERO))
            },
            input: json!({"messages": [{"role": "user", "content": "x"}], "responseSchema": {"type": "object"}}).to_string(),
        },
        Attack {
            name: "provider streaming a 1 GiB body",
            pack: echo.clone(),
            host: Box::new(move || {
                let config = callai_config::Config::from_toml(&format!(
                    "[defaults]\nprovider = \"evil\"\n[providers.evil]\nkind = \"openai\"\nbaseUrl = \"{huge_url}\"\napiKeyEnv = \"\"\n"
                ))
                .unwrap();
                config.host_builder(&|_| None).unwrap().build().unwrap()
            }),
            input: json!({"messages": [{"role": "user", "content": "x"}]}).to_string(),
        },
        Attack {
            name: "pack computing forever (wallMs 300)",
            pack: program("loop_forever"),
            host: Box::new(|| mock_host(config(|c| c.limits.wall_ms = 300), json!([]), Duration::ZERO)),
            input: "{}".into(),
        },
        Attack {
            name: "pack allocating forever (32 MiB)",
            pack: program("alloc_forever"),
            host: Box::new(|| mock_host(config(|c| c.limits.memory_bytes = 32 << 20), json!([]), Duration::ZERO)),
            input: "{}".into(),
        },
    ]
}

fn main() {
    let rt = callai_host::tokio_runtime(Some(2)).unwrap();
    let runtime = PackRuntime::with_options(&RuntimeOptions {
        max_concurrent_runs: 400,
        max_memory_bytes: 512 << 20,
        ..RuntimeOptions::default()
    })
    .unwrap();
    let echo = runtime
        .load(
            &callai_examples::example("echo-attempts")
                .unwrap()
                .component(),
        )
        .unwrap();
    let huge_body = rt.block_on(FakeServer::start(
        (0..100_000).map(|_| Reply::Huge(1 << 30)).collect(),
    ));
    let attacks = attacks(&runtime, &echo, huge_body.url().to_owned());
    let concurrency = 2;
    let alone = rt.block_on(victims(&runtime, None, 0));
    let (p50, p99) = (percentile(&alone, 0.5), percentile(&alone, 0.99));
    println!(
        "victims: {VICTIMS} structured runs, one every {PACE:?}, provider answering after {WAIT:?}; {concurrency} attackers looping"
    );
    println!(
        "{:<42} {:>9} {:>9} {:>7} {:>7}",
        "attack", "p50", "p99", "p50 x", "p99 x"
    );
    println!(
        "{:<42} {:>9.1?} {:>9.1?} {:>7} {:>7}",
        "(none)", p50, p99, "1.00", "1.00"
    );
    for attack in &attacks {
        let seen = rt.block_on(victims(&runtime, Some(attack), concurrency));
        let (a50, a99) = (percentile(&seen, 0.5), percentile(&seen, 0.99));
        println!(
            "{:<42} {:>9.1?} {:>9.1?} {:>7.2} {:>7.2}",
            attack.name,
            a50,
            a99,
            a50.as_secs_f64() / p50.as_secs_f64(),
            a99.as_secs_f64() / p99.as_secs_f64()
        );
    }
}
