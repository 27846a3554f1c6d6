//! Issue 54: the upstream at scale, through `callai serve` against a TLS
//! HTTP/2 fake on loopback (certificates made by the test with rcgen):
//! connections added as the server's stream limit fills, `GOAWAY` and a
//! cut connection losing no call, `caFile` trusted for its provider only,
//! mutual TLS, and a CONNECT proxy.

use callai_tests::serve::TestServer;
use callai_tests::tls_fake::{ConnectProxy, Options, Pki, Seen, TlsFake};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A TLS fake with certificates of a new CA, and that CA written to a
/// folder of the test's.
struct Setup {
    pki: Pki,
    fake: TlsFake,
    /// Holds `ca` (and whatever else the test writes): bound to a name,
    /// never to `_` or left to `..`, or it is deleted at once.
    dir: tempfile::TempDir,
    ca: PathBuf,
}

/// A fake allowing `max_streams` streams a connection, answering after
/// `delay`, and requiring a client certificate of the CA when `mutual`.
async fn setup(max_streams: u32, delay: Duration, mutual: bool) -> Setup {
    let pki = Pki::new("callai test CA");
    let options = Options {
        max_streams,
        delay,
        client_ca: mutual.then(|| pki.ca_pem()),
    };
    let fake = TlsFake::start(&pki.server(), options).await;
    let dir = tempfile::tempdir().unwrap();
    let ca = pki.write_ca(dir.path(), "ca.pem");
    Setup { pki, fake, dir, ca }
}

/// A provider section for the fake, with `extra` keys.
fn provider(name: &str, fake: &TlsFake, extra: &str) -> String {
    format!(
        "[providers.{name}]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"\"\n\
         model = \"m\"\ntimeoutMs = 10000\n{extra}\n",
        fake.url()
    )
}

const RETRY: &str = "[retry]\nbackoffBaseMs = 1\nbackoffMaxMs = 2\ncircuitBreakerFailures = 0\n";

fn ca_key(path: &Path) -> String {
    format!("caFile = {:?}", path.display().to_string())
}

fn call(provider: &str) -> Value {
    let request = json!({"provider": provider, "maxTokens": 10,
                         "messages": [{"role": "user", "content": "hi"}]});
    json!({ "request": request })
}

/// Sends `n` calls to `provider` at once; their answers, in order.
async fn calls_at_once(server: &Arc<TestServer>, provider: &str, n: usize) -> Vec<(u16, Value)> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (server, body) = (server.clone(), call(provider));
            tokio::spawn(async move {
                let a = server.post("/v1/call", &body).await;
                (a.status, a.body)
            })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    answers
}

/// Waits until the fake has taken `n` requests.
async fn taken(fake: &TlsFake, n: usize) {
    let started = Instant::now();
    while fake.count(|s: &Seen| &s.requests) < n {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the fake took fewer than {n}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Issue 54 tests: 50 calls against a server allowing 10 streams a
/// connection, answering after 1 s: they go over at least 5 connections,
/// never more than 10 streams on one, and finish in under 2 s;
/// `/metrics` shows the connections and the streams in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_calls_open_connections_as_the_stream_limit_fills() {
    let Setup {
        fake,
        ca,
        dir: _dir,
        ..
    } = setup(10, Duration::from_secs(1), false).await;
    let toml = provider("tls", &fake, &ca_key(&ca)) + RETRY;
    let server = Arc::new(TestServer::start(&toml).await);
    let started = Instant::now();
    let calls = tokio::spawn({
        let server = server.clone();
        async move { calls_at_once(&server, "tls", 50).await }
    });
    taken(&fake, 50).await;
    let metrics = server.metrics().await;
    let line = "callai_upstream_connections{provider=\"tls\",protocol=\"http2\"}";
    let open = callai_tests::serve::metric_in(&metrics, line);
    let streams = callai_tests::serve::metric_in(
        &metrics,
        "callai_upstream_streams_in_flight{provider=\"tls\"}",
    );
    let answers = calls.await.unwrap();
    let took = started.elapsed();
    for (status, body) in &answers {
        assert_eq!(*status, 200, "{body}");
        assert_eq!(body["result"]["attempts"]["count"], 1, "{body}");
    }
    let connections = fake.count(|s| &s.connections);
    assert!(connections >= 5, "{connections} connections");
    assert!(
        connections <= 7,
        "a burst opens what it fills: {connections}"
    );
    assert!(fake.count(|s| &s.most_streams) <= 10);
    assert_eq!(fake.count(|s| &s.requests), 50);
    assert!(open >= 5.0, "{metrics}");
    assert_eq!(streams, 50.0, "{metrics}");
    assert!(took < Duration::from_secs(2), "50 calls took {took:?}");
}

/// Issue 54 tests: the server says `GOAWAY` on every connection with
/// calls in flight: the ones it took finish there, the ones it refused
/// unseen go on a new connection; every call answers, none twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goaway_mid_load_loses_no_call_and_sends_none_twice() {
    let Setup {
        fake,
        ca,
        dir: _dir,
        ..
    } = setup(10, Duration::from_millis(400), false).await;
    let toml = provider("tls", &fake, &ca_key(&ca)) + RETRY;
    let server = Arc::new(TestServer::start(&toml).await);
    let calls = tokio::spawn({
        let server = server.clone();
        async move { calls_at_once(&server, "tls", 40).await }
    });
    taken(&fake, 20).await;
    fake.go_away();
    let answers = calls.await.unwrap();
    let mut attempts = 0;
    for (status, body) in &answers {
        assert_eq!(*status, 200, "{body}");
        attempts += body["result"]["attempts"]["count"].as_u64().unwrap() as usize;
    }
    // Each call answered once; every request the server took is counted.
    // A stream hyper opened on a connection as it closed can fail without
    // the server reading it: it is counted too (the conservative side).
    assert_eq!(fake.count(|s| &s.answered), 40, "each call answered once");
    let took = fake.count(|s| &s.requests);
    assert!(
        (40..=attempts).contains(&took),
        "{took} taken, {attempts} attempts"
    );
    assert!(attempts <= 43, "{attempts} attempts");
}

/// Issue 54 tests: every connection is cut with calls in flight: those
/// calls fail as transient, are retried on new connections and counted;
/// every call answers, and every request the server took is among the
/// attempts the calls report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_connection_fails_its_calls_as_transient_and_they_are_retried() {
    let Setup {
        fake,
        ca,
        dir: _dir,
        ..
    } = setup(10, Duration::from_millis(400), false).await;
    let toml = provider("tls", &fake, &ca_key(&ca)) + RETRY;
    let server = Arc::new(TestServer::start(&toml).await);
    let calls = tokio::spawn({
        let server = server.clone();
        async move { calls_at_once(&server, "tls", 30).await }
    });
    taken(&fake, 30).await;
    fake.cut();
    let answers = calls.await.unwrap();
    let mut attempts = 0;
    for (status, body) in &answers {
        assert_eq!(*status, 200, "{body}");
        attempts += body["result"]["attempts"]["count"].as_u64().unwrap();
    }
    assert!(attempts >= 60, "each cut call was tried again: {attempts}");
    // Every request the server took is some call's attempt. A request
    // written on a connection the instant the server cut it is counted
    // too: the host cannot know it was never read.
    let took = fake.count(|s| &s.requests);
    assert!(
        (took..=took + 3).contains(&(attempts as usize)),
        "attempts {attempts}, requests taken {took}"
    );
    let failed = server
        .metric("callai_provider_errors_total{provider=\"tls\",status=\"transport\"}")
        .await;
    assert!(failed >= 30.0, "{failed}");
}

/// Issue 54 tests: `caFile` is trusted for its provider only: another
/// provider of the same server refuses its certificate, and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_file_is_trusted_for_its_provider_only() {
    let Setup {
        fake,
        ca,
        dir: _dir,
        ..
    } = setup(100, Duration::ZERO, false).await;
    let toml = provider("trusted", &fake, &ca_key(&ca)) + &provider("plain", &fake, "") + RETRY;
    let server = TestServer::start(&toml).await;
    let ok = server.post("/v1/call", &call("trusted")).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    let refused = server.post("/v1/call", &call("plain")).await;
    assert_ne!(refused.status, 200);
    let text = refused.body.to_string();
    assert!(
        text.contains("unknown issuer") && text.contains("caFile"),
        "{text}"
    );
}

/// Issue 54 tests: a server that requires a client certificate takes the
/// provider's `clientCert`, and refuses a provider without one, saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_sends_the_providers_client_certificate() {
    let Setup { pki, fake, dir, ca } = setup(100, Duration::ZERO, true).await;
    let client = pki.client();
    std::fs::write(dir.path().join("client.pem"), &client.cert).unwrap();
    std::fs::write(dir.path().join("client.key"), &client.key).unwrap();
    let mtls = format!(
        "{}\nclientCert = {:?}\nclientKey = {:?}",
        ca_key(&ca),
        dir.path().join("client.pem").display().to_string(),
        dir.path().join("client.key").display().to_string()
    );
    let toml = provider("mtls", &fake, &mtls) + &provider("anon", &fake, &ca_key(&ca)) + RETRY;
    let server = TestServer::start(&toml).await;
    let ok = server.post("/v1/call", &call("mtls")).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    let refused = server.post("/v1/call", &call("anon")).await;
    assert_ne!(refused.status, 200);
    let text = refused.body.to_string();
    assert!(text.contains("client certificate"), "{text}");
    assert_eq!(fake.count(|s| &s.requests), 1);
}

/// Issue 54 tests: a provider's `proxy` carries its requests through a
/// CONNECT tunnel, with the credentials `proxyAuthEnv` names; wrong ones
/// are refused by the proxy, and the error says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_proxy_carries_the_providers_requests() {
    use base64::Engine;
    let Setup {
        fake,
        ca,
        dir: _dir,
        ..
    } = setup(100, Duration::ZERO, false).await;
    let basic = base64::engine::general_purpose::STANDARD.encode("ops:s3cret");
    let proxy = ConnectProxy::start(Some(format!("Basic {basic}"))).await;
    let via = |env: &str| {
        format!(
            "{}\nproxy = \"http://127.0.0.1:{}\"\nproxyAuthEnv = \"{env}\"",
            ca_key(&ca),
            proxy.port
        )
    };
    let toml = provider("proxied", &fake, &via("PROXY_AUTH"))
        + &provider("wrong", &fake, &via("WRONG_AUTH"))
        + RETRY;
    let server = TestServer::start_with(&toml, None, |k| match k {
        "PROXY_AUTH" => Some("ops:s3cret".into()),
        "WRONG_AUTH" => Some("ops:guess".into()),
        _ => None,
    })
    .await;
    let ok = server.post("/v1/call", &call("proxied")).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(proxy.tunnels.load(std::sync::atomic::Ordering::SeqCst), 1);
    let refused = server.post("/v1/call", &call("wrong")).await;
    assert_ne!(refused.status, 200);
    let text = refused.body.to_string();
    assert!(text.contains("proxy"), "{text}");
    assert!(
        !text.contains("s3cret") && !text.contains("guess"),
        "{text}"
    );
    assert_eq!(fake.count(|s| &s.requests), 1);
}

/// Issue 54 tests: `maxConnections` caps the pool (calls past it queue on
/// the least loaded connection, and all answer), and connections unused
/// for `idleMs` are closed: `/metrics` shows none left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_stops_at_max_connections_and_closes_idle_ones() {
    let Setup {
        fake,
        ca,
        dir: _dir,
        ..
    } = setup(5, Duration::from_millis(200), false).await;
    let keys = format!("{}\nmaxConnections = 2\nidleMs = 500", ca_key(&ca));
    let server = Arc::new(TestServer::start(&(provider("tls", &fake, &keys) + RETRY)).await);
    for (status, body) in calls_at_once(&server, "tls", 20).await {
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(fake.count(|s| &s.connections), 2);
    assert!(fake.count(|s| &s.most_streams) <= 5);
    let line = "callai_upstream_connections{provider=\"tls\",protocol=\"http2\"}";
    let open = server.metric(line).await;
    assert!((1.0..=2.0).contains(&open), "{open}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(server.metric(line).await, 0.0, "idle connections closed");
}

/// Issue 54 tests: without a `proxy` key, `HTTPS_PROXY` carries the
/// provider's requests, and `NO_PROXY` naming its host sends them
/// directly (a `callai serve` process with those variables).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_proxy_and_no_proxy_from_the_environment_are_honoured() {
    let Setup { fake, dir, ca, .. } = setup(100, Duration::ZERO, false).await;
    let proxy = ConnectProxy::start(None).await;
    let config = dir.path().join("callai.toml");
    std::fs::write(&config, provider("tls", &fake, &ca_key(&ca)) + RETRY).unwrap();
    let proxy_url = format!("http://127.0.0.1:{}", proxy.port);
    let tunnels = || proxy.tunnels.load(std::sync::atomic::Ordering::SeqCst);
    for (no_proxy, expected) in [("", 1), ("127.0.0.1", 1)] {
        let (mut child, addr) = callai_tests::serve::spawn_serve(
            env!("CARGO_BIN_EXE_callai"),
            &[
                "--listen",
                "127.0.0.1:0",
                "--config",
                config.to_str().unwrap(),
            ],
            &[("HTTPS_PROXY", &proxy_url), ("NO_PROXY", no_proxy)],
        );
        let answer = callai_tests::serve::http_client()
            .post(format!("http://{addr}/v1/call"))
            .header("content-type", "application/json")
            .body(call("tls").to_string())
            .send()
            .await
            .unwrap();
        let status = answer.status().as_u16();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(status, 200, "{}", answer.text().await.unwrap());
        assert_eq!(tunnels(), expected, "NO_PROXY={no_proxy:?}");
    }
    assert_eq!(fake.count(|s| &s.requests), 2);
}

/// Issue 54 tests: an `https://` proxy is reached over TLS (its
/// certificate checked like the provider's, here through `caFile`), and
/// the provider's own TLS runs inside the tunnel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_proxy_is_reached_over_tls() {
    let Setup {
        pki,
        fake,
        ca,
        dir: _dir,
    } = setup(100, Duration::ZERO, false).await;
    let proxy = ConnectProxy::start_with(None, Some(&pki.server())).await;
    let keys = format!(
        "{}\nproxy = \"https://127.0.0.1:{}\"",
        ca_key(&ca),
        proxy.port
    );
    let server = TestServer::start(&(provider("tls", &fake, &keys) + RETRY)).await;
    let ok = server.post("/v1/call", &call("tls")).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(proxy.tunnels.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(fake.count(|s| &s.requests), 1);
}
