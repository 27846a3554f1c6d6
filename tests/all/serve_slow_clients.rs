//! Streams and slow clients (issue 31, items 8 and 9), against a real
//! `callai serve` process: a streamed answer of long text without
//! whitespace arrives whole and in pieces, with a key inside it redacted;
//! a client that stops reading an answer, streamed or not, is cut after
//! `[server] writeTimeoutMs` without progress, its call cancelled (its
//! provider's stream stops long before its end) and settled. What an
//! unread stream holds in the host is measured by `bench/unread.py` (a
//! test cannot see it: loopback's socket buffers take megabytes).

use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::process::Serve;
use callai_tests::wire::Api;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const KEY: &str = "sk-slow-clients-test-key-0248";

fn start(fake: &FakeServer, dir: &std::path::Path) -> Serve {
    let path = dir.join("host.toml");
    let toml = format!(
        "[server]\nwriteTimeoutMs = 1000\n\
         [limits]\nmaxResponseBytes = 33554432\nmaxProviderBodyBytes = 67108864\n\
         [providers.fake]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"FAKE_KEY\"\nmodel = \"m-1\"\n",
        fake.url()
    );
    std::fs::write(&path, toml).unwrap();
    Serve::start(env!("CARGO_BIN_EXE_callai"), &path, &[("FAKE_KEY", KEY)])
}

/// `pieces` of text streamed by an OpenAI-compatible provider, one each
/// `pause`.
fn streaming(pieces: &[&str], pause: Duration) -> Reply {
    Api::OpenAi.stream_reply(pieces, "stop", Some(9), pause)
}

fn chat(stream: bool) -> Value {
    json!({"model": "fake", "stream": stream, "max_tokens": 100000,
           "messages": [{"role": "user", "content": "write"}]})
}

async fn cancelled(serve: &Serve) -> f64 {
    let m = serve.send("GET", "/metrics", None, None).await;
    callai_tests::serve::metric_in(
        m.body.as_str().unwrap(),
        "callai_calls_total{outcome=\"cancelled\"}",
    )
}

/// Item 8: 400 kB of text without whitespace, in 100-byte pieces, with the
/// provider's key in the middle, arrives as the whole text (the key
/// redacted), in many pieces rather than at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_text_without_whitespace_streams_whole_in_pieces_with_the_key_redacted() {
    let filler = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAxMjM0NTY3";
    let mut text = filler.repeat(2500);
    text.insert_str(text.len() / 2, KEY);
    let pieces: Vec<&str> = text
        .as_bytes()
        .chunks(100)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    let fake = FakeServer::start(vec![streaming(&pieces, Duration::ZERO)]).await;
    let dir = tempfile::tempdir().unwrap();
    let serve = start(&fake, dir.path());
    let mut r = callai_tests::serve::http_client()
        .post(format!("{}/v1/chat/completions", serve.url))
        .header("content-type", "application/json")
        .body(chat(true).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut seen = String::new();
    let mut chunks = 0;
    while let Some(chunk) = r.chunk().await.unwrap() {
        chunks += 1;
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let relayed: String = seen
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|p| {
            p.pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(relayed, text.replace(KEY, "[redacted]"));
    assert!(chunks > 100, "relayed in {chunks} pieces");
}

/// A client over a socket with a small receive window that reads the head
/// of its answer and then nothing.
async fn stalled_client(url: &str, body: &Value) -> tokio::net::TcpStream {
    let addr: std::net::SocketAddr = url.trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let body = body.to_string();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            stream.read(&mut byte).await.unwrap(),
            1,
            "the answer's head"
        );
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    stream
}

/// Reads what is left until the server closes the connection; how much.
async fn drain(stream: &mut tokio::net::TcpStream) -> usize {
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return total,
            Ok(Ok(n)) => total += n,
            Err(_) => panic!("the connection was not closed"),
        }
    }
}

/// Item 9: a client that stops reading a streamed answer is cut after the
/// write timeout; its call is cancelled and counted, and its provider's
/// stream (of 20 s) stops long before its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_a_stream_is_cut_and_its_call_cancelled() {
    let piece = "word ".repeat(20);
    let pieces = vec![piece.as_str(); 20_000];
    let whole = 20_000 * piece.len() as u64;
    let fake = FakeServer::start(vec![streaming(&pieces, Duration::from_millis(1))]).await;
    let dir = tempfile::tempdir().unwrap();
    let serve = start(&fake, dir.path());
    let mut stream = stalled_client(&serve.url, &chat(true)).await;
    let stopped = Instant::now();
    let deadline = stopped + Duration::from_secs(15);
    while cancelled(&serve).await < 1.0 {
        assert!(Instant::now() < deadline, "the call was never cancelled");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        stopped.elapsed() >= Duration::from_millis(900),
        "cut before the write timeout"
    );
    // The connection was closed: what the socket held, then its end.
    let rest = drain(&mut stream).await;
    assert!((rest as u64) < whole, "{rest}");
    // The upstream request was cancelled: its stream wrote no more.
    let wrote = fake.body_bytes_sent();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        fake.body_bytes_sent(),
        wrote,
        "the provider's stream went on"
    );
    assert!(
        wrote < whole / 2,
        "the provider wrote {wrote} of {whole} bytes"
    );
    // The host goes on serving.
    assert_eq!(serve.send("GET", "/healthz", None, None).await.status, 200);
}

/// Item 9: an answer that is not streamed (20 MB: more than loopback's
/// socket buffers take), whose client reads none of it, is cut the same
/// way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_no_whole_answer_is_cut_after_the_write_timeout() {
    let big = "x".repeat(20 << 20);
    let fake = FakeServer::start(vec![Api::OpenAi.reply(&big, None, "stop", Some(9))]).await;
    let dir = tempfile::tempdir().unwrap();
    let serve = start(&fake, dir.path());
    let mut stream = stalled_client(&serve.url, &chat(false)).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let read = drain(&mut stream).await;
    assert!(
        read < 20 << 20,
        "the whole answer was written: {read} bytes"
    );
    assert_eq!(serve.send("GET", "/healthz", None, None).await.status, 200);
}
