//! Every connection of `callai serve` is bounded (issue 22, item 3): a
//! request head or body that trickles in is cut at its timeout, an idle
//! keep-alive connection is closed, at `maxConnections` the longest idle
//! connection makes room and past the busy ones new connections wait in
//! the backlog, and a shutdown ends even with a client that never
//! finishes its request. Each bound is checked with a wide margin.

use callai_tests::serve::TestServer;
use serde_json::Value;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, sleep, timeout};

async fn connect(server: &TestServer) -> TcpStream {
    TcpStream::connect(server.url.trim_start_matches("http://"))
        .await
        .unwrap()
}

/// Reads until the server closes the connection (or `within` passes: then
/// `None`); returns what it sent.
async fn read_to_close(stream: &mut TcpStream, within: Duration) -> Option<String> {
    let mut got = Vec::new();
    let read = timeout(within, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    read.ok()
        .map(|()| String::from_utf8_lossy(&got).into_owned())
}

/// One `GET /healthz` on `stream`, keeping it open; the answer's status line.
async fn healthz_on(stream: &mut TcpStream) -> String {
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = timeout(Duration::from_secs(10), stream.read(&mut buf))
        .await
        .expect("an answer")
        .unwrap();
    String::from_utf8_lossy(&buf[..n])
        .lines()
        .next()
        .unwrap_or("")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_sent_a_byte_at_a_time_is_cut_at_the_header_timeout() {
    let server = TestServer::start("[server]\nheaderTimeoutMs = 300\n").await;
    let mut slow = connect(&server).await;
    let started = Instant::now();
    // One byte every 100 ms: the head would take seconds to finish.
    let head =
        b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let mut cut = false;
    for byte in head {
        if slow.write_all(&[*byte]).await.is_err() {
            cut = true;
            break;
        }
        sleep(Duration::from_millis(100)).await;
        let mut probe = [0u8; 1];
        if let Ok(r) = timeout(Duration::from_millis(1), slow.read(&mut probe)).await {
            assert!(matches!(r, Ok(0) | Err(_)), "no answer to a partial head");
            cut = true;
            break;
        }
    }
    assert!(cut, "the whole trickled head was read");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "cut after {:?}, the timeout is 300 ms",
        started.elapsed()
    );
    // Others are served meanwhile and after.
    assert_eq!(server.get("/healthz").await.status, 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_sent_a_byte_at_a_time_is_refused_at_the_body_timeout() {
    let server = TestServer::start("[server]\nbodyTimeoutMs = 400\n").await;
    let (mut reader, mut writer) = connect(&server).await.into_split();
    writer
        .write_all(
            b"POST /v1/call HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 200\r\n\r\n{",
        )
        .await
        .unwrap();
    let started = Instant::now();
    let trickle = async {
        for _ in 0..100 {
            sleep(Duration::from_millis(100)).await;
            if writer.write_all(b" ").await.is_err() {
                break;
            }
        }
        panic!("the trickled body was never cut");
    };
    let answer = tokio::select! {
        () = trickle => unreachable!(),
        got = read_answer(&mut reader) => got,
    };
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["error"]["code"], "request_timeout");
    assert_eq!(body["error"]["details"]["limit"], "server.bodyTimeoutMs");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered after {:?}",
        started.elapsed()
    );
    server.shutdown().await;
}

/// One whole answer (head and a `content-length` body) from `reader`.
async fn read_answer(reader: &mut (impl AsyncReadExt + Unpin)) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_owned)
                })
                .map_or(0, |v| v.trim().parse::<usize>().unwrap());
            if body.len() >= length {
                return text;
            }
        }
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return text,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_closed_at_the_idle_timeout_not_the_header_one() {
    let toml = "[server]\nheaderTimeoutMs = 200\nidleTimeoutMs = 1500\n";
    let server = TestServer::start(toml).await;
    let mut kept = connect(&server).await;
    assert_eq!(healthz_on(&mut kept).await, "HTTP/1.1 200 OK");
    // Idle past the header timeout but within the idle one: still open.
    sleep(Duration::from_millis(600)).await;
    assert_eq!(healthz_on(&mut kept).await, "HTTP/1.1 200 OK");
    // Then idle past the idle timeout: closed by the server.
    let started = Instant::now();
    let rest = read_to_close(&mut kept, Duration::from_secs(10)).await;
    assert_eq!(rest.as_deref(), Some(""), "closed without a word");
    assert!(
        started.elapsed() >= Duration::from_millis(1000),
        "closed after {:?}, before the idle timeout",
        started.elapsed()
    );
    // A connection that never sends a byte is idle too.
    let mut silent = connect(&server).await;
    assert!(
        read_to_close(&mut silent, Duration::from_secs(10))
            .await
            .is_some()
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_wait_in_the_backlog() {
    let server = TestServer::start("[server]\nmaxConnections = 4\n").await;
    // Four connections in the middle of a request (a head begun, not
    // finished): none of them is closed to make room.
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut c = connect(&server).await;
        c.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
        held.push(c);
    }
    sleep(Duration::from_millis(100)).await;
    // The fifth connects (the kernel's backlog) but is not served...
    let mut fifth = connect(&server).await;
    fifth
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 64];
    assert!(
        timeout(Duration::from_millis(500), fifth.read(&mut buf))
            .await
            .is_err(),
        "a fifth connection was served past maxConnections = 4"
    );
    // ...until one of the four closes.
    drop(held.pop());
    let n = timeout(Duration::from_secs(10), fifth.read(&mut buf))
        .await
        .expect("served once a place is free")
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_at_the_cap_make_room_the_longest_idle_first() {
    // Issue 22, item 3: idle connections held every place, and a client
    // with a request waited for them to time out.
    let server = TestServer::start("[server]\nmaxConnections = 4\n").await;
    let mut silent = connect(&server).await; // has sent nothing
    sleep(Duration::from_millis(50)).await;
    let mut kept_alive = Vec::new();
    for _ in 0..2 {
        let mut c = connect(&server).await;
        assert_eq!(healthz_on(&mut c).await, "HTTP/1.1 200 OK");
        kept_alive.push(c);
    }
    let mut busy = connect(&server).await;
    busy.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
    sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let mut fifth = connect(&server).await;
    assert_eq!(healthz_on(&mut fifth).await, "HTTP/1.1 200 OK");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "served after {:?}",
        started.elapsed()
    );
    assert_eq!(
        read_to_close(&mut silent, Duration::from_secs(5)).await,
        Some(String::new()),
        "the longest idle connection was closed, without an answer"
    );
    // The kept-alive ones and the one mid-request still have their places.
    for c in &mut kept_alive {
        assert_eq!(healthz_on(c).await, "HTTP/1.1 200 OK");
    }
    busy.write_all(b"host: x\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 64];
    let n = timeout(Duration::from_secs(5), busy.read(&mut buf))
        .await
        .expect("the request in the middle was answered")
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_with_a_client_that_never_finishes_its_request() {
    let toml =
        "[server]\nshutdownGraceMs = 300\nheaderTimeoutMs = 600000\nidleTimeoutMs = 600000\n";
    let mut server = TestServer::start(toml).await;
    let mut one_byte = connect(&server).await;
    one_byte.write_all(b"G").await.unwrap();
    let mut idle = connect(&server).await;
    assert_eq!(healthz_on(&mut idle).await, "HTTP/1.1 200 OK");
    sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    server.begin_shutdown();
    timeout(Duration::from_secs(20), server.stopped())
        .await
        .expect("the server stopped");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "stopped after {:?}",
        started.elapsed()
    );
    assert!(
        read_to_close(&mut one_byte, Duration::from_secs(5))
            .await
            .is_some()
    );
    assert!(
        read_to_close(&mut idle, Duration::from_secs(5))
            .await
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_ends_at_its_wall_time_however_slow_the_provider() {
    // Issue 22, item 2: `/v1/call` answered after its provider, whatever
    // `wallMs` said.
    let toml = "[limits]\nwallMs = 300\n[mock]\nlatencyMs = 5000\n";
    let server = TestServer::start(toml).await;
    let started = Instant::now();
    let answer = server
        .post(
            "/v1/call",
            &serde_json::json!({"request": callai_tests::serve::hello()}),
        )
        .await;
    assert_eq!(answer.status, 413, "{}", answer.body);
    assert_eq!(answer.body["error"]["code"], "limit_exceeded");
    assert_eq!(answer.body["error"]["details"]["limit"], "limits.wallMs");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "answered after {:?}, past the provider's 5 s",
        started.elapsed()
    );
    server.shutdown().await;
}
