//! Isolation of `callai serve`, measured: victim calls (`POST /v1/call`, a
//! structured call the mock answers after 20 ms) started at a steady pace
//! against a server in this process, alone and then beside each attacker of
//! issue 22: slowloris clients trickling request heads and bodies, compile
//! bombs uploaded in a loop (refused before compiling) beside large
//! components that do compile (one at a time, `maxCompiles`), and schemas
//! that double in every form of reference (refused before any request).
//! Reports the victims' p50 and p99 latency and their ratio to the run with
//! no attacker (aim: under 1.5x).
//!
//! `cargo bench -p callai-tests --bench serve_isolation`

use callai_tests::components::component_with_function;
use callai_tests::paced::{self, percentile};
use callai_tests::schemas::{FORMS, doubling_in_form};
use callai_tests::serve::TestServer;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const VICTIMS: usize = 200;
const PACE: Duration = Duration::from_millis(5);

/// An attack: started beside the victims, stopped when they are done.
#[derive(Clone, Copy)]
enum Attack {
    /// 200 connections sending a head a byte every 100 ms, 200 a body.
    Slowloris,
    /// Three uploads looping: two compile bombs, one large component.
    CompileBombs,
    /// Two clients looping through every doubling form at depth 30.
    SchemaForms,
}

impl Attack {
    fn name(self) -> &'static str {
        match self {
            Self::Slowloris => "slowloris: 400 trickling connections",
            Self::CompileBombs => "compile bombs (3.6 MB fn) + 900 kB fn uploads",
            Self::SchemaForms => "doubling schemas in 7 reference forms",
        }
    }
}

async fn slow_client(addr: String, body: bool, stop: Arc<AtomicBool>) {
    let Ok(mut stream) = TcpStream::connect(&addr).await else {
        return;
    };
    let head: &[u8] = if body {
        b"POST /v1/call HTTP/1.1\r\nhost: x\r\ncontent-length: 100000\r\n\r\n"
    } else {
        b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-a: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n"
    };
    if body && stream.write_all(head).await.is_err() {
        return;
    }
    let trickle: &[u8] = if body { b"{" } else { head };
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        if stream
            .write_all(&trickle[i % trickle.len()..][..1])
            .await
            .is_err()
        {
            // Cut by the server's timeout: come back, as an attacker would.
            match TcpStream::connect(&addr).await {
                Ok(s) => stream = s,
                Err(_) => return,
            }
        }
        i += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn start(
    attack: Attack,
    server: &Arc<TestServer>,
    stop: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let addr = server.url.trim_start_matches("http://").to_owned();
    match attack {
        Attack::Slowloris => (0..400)
            .map(|i| tokio::spawn(slow_client(addr.clone(), i % 2 == 1, stop.clone())))
            .collect(),
        Attack::CompileBombs => (0..3)
            .map(|i| {
                let (server, stop) = (server.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let size = if i == 0 { 900_000 } else { 3_600_000 };
                        let bytes = component_with_function(size, &format!("{i}-{n}"));
                        let _ = server.send("PUT", &format!("/v1/packs/bomb{i}"), Some(bytes)).await;
                        n += 1;
                    }
                })
            })
            .collect(),
        Attack::SchemaForms => (0..2)
            .map(|_| {
                let (server, stop) = (server.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let schema = doubling_in_form(FORMS[n % FORMS.len()], 30);
                        let request = json!({"messages": [{"role": "user", "content": "x"}], "responseSchema": schema});
                        let _ = server.post("/v1/call", &json!({"request": request, "script": [{"content": "{\"a\": 1, \"b\": 2}"}]})).await;
                        n += 1;
                    }
                })
            })
            .collect(),
    }
}

/// The victims' latencies, sorted, with `attack` going on beside them.
async fn victims(server: &Arc<TestServer>, attack: Option<Attack>) -> Vec<Duration> {
    let stop = Arc::new(AtomicBool::new(false));
    let attackers = attack.map(|a| start(a, server, &stop)).unwrap_or_default();
    if attack.is_some() {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let body = json!({
        "request": {"messages": [{"role": "user", "content": "hi"}], "maxTokens": 64,
                    "responseSchema": {"type": "object", "required": ["a"]}},
        "script": [{"content": "{\"a\": 1}", "outputTokens": 3}]
    });
    let victim = || {
        let (server, body) = (server.clone(), body.clone());
        async move {
            let answer = server.post("/v1/call", &body).await;
            assert_eq!(answer.status, 200, "{}", answer.body);
        }
    };
    paced::victims(VICTIMS, PACE, victim, &stop, attackers).await
}

fn main() {
    let rt = callai_host::tokio_runtime(Some(2)).unwrap();
    let toml = "[server]\nheaderTimeoutMs = 2000\nbodyTimeoutMs = 2000\n[mock]\nlatencyMs = 20\n";
    let server = Arc::new(rt.block_on(TestServer::start(toml)));
    let alone = rt.block_on(victims(&server, None));
    let (p50, p99) = (percentile(&alone, 0.5), percentile(&alone, 0.99));
    println!(
        "victims: {VICTIMS} structured /v1/call calls, one every {PACE:?}, the mock answering after 20 ms"
    );
    println!(
        "{:<48} {:>9} {:>9} {:>7} {:>7}",
        "attack", "p50", "p99", "p50 x", "p99 x"
    );
    println!(
        "{:<48} {:>9.1?} {:>9.1?} {:>7} {:>7}",
        "(none)", p50, p99, "1.00", "1.00"
    );
    for attack in [Attack::Slowloris, Attack::CompileBombs, Attack::SchemaForms] {
        let seen = rt.block_on(victims(&server, Some(attack)));
        let (a50, a99) = (percentile(&seen, 0.5), percentile(&seen, 0.99));
        println!(
            "{:<48} {:>9.1?} {:>9.1?} {:>7.2} {:>7.2}",
            attack.name(),
            a50,
            a99,
            a50.as_secs_f64() / p50.as_secs_f64(),
            a99.as_secs_f64() / p99.as_secs_f64()
        );
    }
}
