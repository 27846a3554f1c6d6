//! Call traces in the run log (issue 35): with `[runlog] url`, every trace
//! is written there too, so `GET /v1/calls` lists every call the log kept
//! (not only the newest `keepCalls` in memory), a restarted server still
//! answers them, owner-scoped as before, and a trace that does not read
//! back is an error naming its call.

use callai_tests::serve::{TestServer, truncating};
use serde_json::{Value, json};
use std::path::Path;

/// One trace in memory, the rest in the log.
const CONFIG: &str = "[server]\ntokenEnv = \"ADMIN\"\nkeepCalls = 1\n\
                      [tenants.a]\ntokenEnv = \"A\"\n[tenants.b]\ntokenEnv = \"B\"\n";

async fn server(runlog: &Path) -> TestServer {
    TestServer::start_with(CONFIG, Some(runlog), |k| match k {
        "ADMIN" => Some("tok-admin".into()),
        "A" => Some("tok-a".into()),
        "B" => Some("tok-b".into()),
        _ => None,
    })
    .await
}

/// A call of two attempts as `token`: its id.
async fn call(server: &TestServer, token: &str) -> String {
    let (request, script) = truncating(2);
    let body = json!({"request": request, "script": script});
    let answer = server.exchange("/v1/call", &body, Some(token)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.headers.get("x-callai-call-id").unwrap().to_owned()
}

async fn get(server: &TestServer, token: &str, path: &str) -> (u16, Value) {
    let answer = server.send_as("GET", path, None, Some(token)).await;
    (answer.status, answer.body)
}

/// The ids of a page, and its `next`.
fn ids(page: &Value) -> (Vec<&str>, Option<&str>) {
    let data = page["data"].as_array().expect("a page");
    let ids = data.iter().map(|t| t["id"].as_str().unwrap()).collect();
    (ids, page["next"].as_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_outlive_memory_and_the_server_in_the_run_log() {
    let dir = tempfile::tempdir().unwrap();
    let runlog = dir.path().join("runs.db");
    let first = server(&runlog).await;
    let mut a = Vec::new();
    for _ in 0..3 {
        a.push(call(&first, "tok-a").await);
    }
    let b = call(&first, "tok-b").await;
    // Read at once: every trace that ended is in the log.
    let (status, page) = get(&first, "tok-admin", "/v1/calls").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(ids(&page), (vec![&*b, &*a[2], &*a[1], &*a[0]], None));
    let (_, from_memory) = get(&first, "tok-a", &format!("/v1/calls/{}", a[2])).await;
    // A call nobody read before the server stopped is kept too (that
    // `callai serve` writes it before it exits: the SIGTERM test below).
    let last = call(&first, "tok-b").await;
    first.shutdown().await;

    let second = server(&runlog).await;
    let (status, oldest) = get(&second, "tok-a", &format!("/v1/calls/{}", a[2])).await;
    assert_eq!(status, 200, "{oldest}");
    assert_eq!(oldest, from_memory, "the log gives the trace memory gave");
    assert_eq!(oldest["attempts"]["count"], 2);
    assert_eq!(oldest["requests"].as_array().unwrap().len(), 2);
    let (status, _) = get(&second, "tok-b", &format!("/v1/calls/{}", a[0])).await;
    assert_eq!(status, 404, "another tenant's call");
    // Paged, owner-scoped, filtered, as from memory.
    let (_, page) = get(&second, "tok-a", "/v1/calls?limit=2").await;
    assert_eq!(ids(&page), (vec![&*a[2], &*a[1]], Some(&*a[1])));
    let (_, page) = get(
        &second,
        "tok-a",
        &format!("/v1/calls?limit=2&before={}", a[1]),
    )
    .await;
    assert_eq!(ids(&page), (vec![&*a[0]], None));
    let (_, page) = get(
        &second,
        "tok-admin",
        "/v1/calls?tenant=b&provider=mock&retried=true",
    )
    .await;
    assert_eq!(ids(&page), (vec![&*last, &*b], None));
    let (_, page) = get(&second, "tok-admin", "/v1/calls?provider=openai").await;
    assert_eq!(ids(&page), (vec![], None));
    let (_, page) = get(&second, "tok-admin", "/v1/calls?outcome=ok&endpoint=call").await;
    assert_eq!(ids(&page).0.len(), 5);
    // The per-minute sums come from the log too: the first server's calls,
    // none of which this one made or keeps in memory.
    let (status, usage) = get(&second, "tok-a", "/v1/usage?minutes=10").await;
    assert_eq!(status, 200, "{usage}");
    assert_eq!(usage["calls"], 3, "{usage}");
    let counted = |usage: &Value, reason: &str| -> u64 {
        let requests = usage["requests"].as_array().unwrap();
        requests
            .iter()
            .filter(|r| r["reason"] == reason && r["provider"] == "mock")
            .map(|r| r["count"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(
        (counted(&usage, "first"), counted(&usage, "truncation")),
        (3, 3)
    );
    let (_, all) = get(&second, "tok-admin", "/v1/usage").await;
    assert_eq!(all["calls"], 5, "{all}");
    assert_eq!(counted(&all, "truncation"), 5, "{all}");

    // A trace damaged in the log is an error that names its call.
    let conn = rusqlite::Connection::open(&runlog).unwrap();
    conn.execute(
        "UPDATE call_traces SET trace = 'not json' WHERE id = ?1",
        [&a[0]],
    )
    .unwrap();
    let (status, error) = get(&second, "tok-a", &format!("/v1/calls/{}", a[0])).await;
    assert_eq!(status, 500, "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&a[0]) && message.contains("does not read back"),
        "{message}"
    );
    let (status, _) = get(&second, "tok-a", &format!("/v1/calls/{}", a[1])).await;
    assert_eq!(status, 200, "the others read on");
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_the_log_refuses_are_kept_and_written_once_it_takes_them() {
    let dir = tempfile::tempdir().unwrap();
    let runlog = dir.path().join("runs.db");
    let server = server(&runlog).await;
    let first = call(&server, "tok-a").await;
    let (status, _) = get(&server, "tok-a", "/v1/calls").await;
    assert_eq!(status, 200, "the first is written");
    // The log stops taking traces: their tags' table is gone.
    let conn = rusqlite::Connection::open(&runlog).unwrap();
    conn.execute_batch("ALTER TABLE call_trace_tags RENAME TO away")
        .unwrap();
    let second = call(&server, "tok-a").await;
    // The call answered, and its trace is kept: by id from memory.
    let (status, trace) = get(&server, "tok-a", &format!("/v1/calls/{second}")).await;
    assert_eq!(status, 200, "{trace}");
    // A listing would miss it: it says so rather than answer without it.
    let (status, error) = get(&server, "tok-a", "/v1/calls").await;
    assert_eq!(status, 500, "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("1 call traces are not written yet: no such table"),
        "{message}"
    );
    // The log takes traces again: the one it refused is written, in order.
    conn.execute_batch("ALTER TABLE away RENAME TO call_trace_tags")
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let page = loop {
        let (status, page) = get(&server, "tok-a", "/v1/calls").await;
        if status == 200 {
            break page;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still refused: {page}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(ids(&page), (vec![&*second, &*first], None));
    server.shutdown().await;
}

/// `callai serve` itself: a call's trace reaches the run log before the
/// process exits on SIGTERM, though nobody read it and its batch was still
/// gathering.
#[test]
fn sigterm_writes_the_traces_that_wait_before_serve_exits() {
    let dir = tempfile::tempdir().unwrap();
    let runlog = dir.path().join("runs.db");
    let (mut child, addr) = callai_tests::serve::spawn_serve(
        env!("CARGO_BIN_EXE_callai"),
        &[
            "--listen",
            "127.0.0.1:0",
            "--runlog",
            runlog.to_str().unwrap(),
        ],
        &[],
    );
    let (request, script) = truncating(1);
    let body = json!({"request": request, "script": script}).to_string();
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    std::io::Write::write_all(
        &mut stream,
        format!(
            "POST /v1/call HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut stream, &mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let id = answer
        .lines()
        .find_map(|l| l.strip_prefix("x-callai-call-id: "))
        .expect("a call id")
        .to_owned();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(child.wait().unwrap().success());
    let conn = rusqlite::Connection::open(&runlog).unwrap();
    let kept: i64 = conn
        .query_row(
            "SELECT count(*) FROM call_traces WHERE id = ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(kept, 1, "the trace of {id} is in the log");
}
