//! `callai serve` as an operator runs it: the line it prints once it
//! listens, a run in flight when SIGTERM arrives, the refusal to listen
//! beyond loopback without a token; and `callai run` exporting traces.

use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command};
use std::time::Duration;

/// Starts `callai serve` with `args`; returns the child and its address
/// from the `listening on http://ADDR` line.
fn serve(args: &[&str]) -> (Child, String) {
    callai_tests::serve::spawn_serve(env!("CARGO_BIN_EXE_callai"), args, &[])
}

/// One HTTP/1.1 exchange; the status and the body as JSON.
fn http(addr: &str, method: &str, path: &str, body: &str) -> (u16, Value) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a response");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (
        status,
        serde_json::from_str(body).unwrap_or(Value::String(body.into())),
    )
}

#[test]
fn sigterm_lets_the_run_in_flight_finish_then_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.toml");
    std::fs::write(&config, "[mock]\nlatencyMs = 1500\n").unwrap();
    let (mut child, addr) = serve(&[
        "--listen",
        "127.0.0.1:0",
        "--config",
        config.to_str().unwrap(),
    ]);
    assert_eq!(http(&addr, "GET", "/healthz", "").0, 200);
    let body = json!({"pack": "echo-attempts", "runId": "in-flight",
                      "input": {"messages": [{"role": "user", "content": "hi"}]},
                      "script": [{"content": "done", "outputTokens": 2}]})
    .to_string();
    let client_addr = addr.clone();
    let in_flight = std::thread::spawn(move || http(&client_addr, "POST", "/v1/runs", &body));
    // Once the run is going (the server holds it), ask the server to stop.
    let mut seen = false;
    for _ in 0..500 {
        if http(&addr, "GET", "/v1/runs/in-flight", "").0 == 200 {
            seen = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(seen, "the run never started");
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let (status, answer) = in_flight.join().unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "ok", "{answer}");
    assert_eq!(answer["output"]["content"], "done");
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
}

#[test]
fn without_a_token_serve_refuses_to_listen_beyond_loopback() {
    let out = crate::callai_command()
        .args(["serve", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let error: Value = serde_json::from_slice(&out.stderr).expect("a JSON error");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("server.tokenEnv"), "{message}");
    let out = crate::callai_command()
        .args(["serve", "--listen", "localhost"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--listen"));
}

#[test]
fn callai_run_exports_traces_when_the_variable_is_set() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let receiver = rt.block_on(callai_tests::otlp::Receiver::start());
    // The mock's model priced by a LiteLLM-format list, as `serve` would.
    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("prices.json");
    let list = json!({"mock-1": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}});
    std::fs::write(&prices, list.to_string()).unwrap();
    let config = dir.path().join("host.toml");
    std::fs::write(
        &config,
        format!("[pricing]\nfile = {:?}\n", prices.display().to_string()),
    )
    .unwrap();
    let out = crate::callai_command()
        .args(["run", "echo-attempts", "--run-id", "cli-run", "--config"])
        .arg(&config)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The process flushed its spans before it exited.
    let spans = receiver.spans();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert!(
        names.contains(&"run conformance.callai.echo-attempts"),
        "{names:?}"
    );
    assert!(names.contains(&"attempt 1"), "{names:?}");
    let chat = spans.iter().find(|s| s.name.starts_with("chat ")).unwrap();
    assert_eq!(chat.attr("callai.attempts.count"), &json!(1));
    let run = spans.iter().find(|s| s.name.starts_with("run ")).unwrap();
    assert_eq!(run.attr("callai.run.id"), "cli-run");
    assert_eq!(chat.parent_span_id, run.span_id);
    // Each attempt priced at the list's price, the call at their sum.
    let attempt = spans.iter().find(|s| s.name == "attempt 1").unwrap();
    let tokens = |s: &callai_tests::otlp::Span, key: &str| s.attr(key).as_f64().unwrap();
    let expected = tokens(attempt, "gen_ai.usage.input_tokens") * 1e-6
        + tokens(attempt, "gen_ai.usage.output_tokens") * 2e-6;
    let amount = attempt.attr("callai.cost.amount").as_f64().unwrap();
    assert!(
        expected > 0.0 && (amount - expected).abs() < 1e-15,
        "{amount} vs {expected}"
    );
    assert_eq!(attempt.attr("callai.cost.currency"), "USD");
    assert_eq!(chat.attr("callai.cost.amount").as_f64(), Some(amount));
    assert_eq!(chat.attr("callai.cost.complete"), &json!(true));
}

#[test]
fn a_durable_run_is_taken_over_when_its_host_dies() {
    use callai_tests::fake_server::{FakeServer, Reply};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut logs = vec![dir.path().join("runs.db").to_str().unwrap().to_owned()];
    let cluster = callai_tests::pg::PgCluster::shared();
    if let Some(c) = &cluster {
        logs.push(c.database());
    }
    let input: Value =
        serde_json::from_str(include_str!("../../examples/bookai-scene/input.json")).unwrap();
    for (i, log) in logs.iter().enumerate() {
        let expected = uninterrupted(&rt, &dir.path().join(format!("plain{i}.toml")));

        // Host A holds the second call until it is killed.
        let mut replies = callai_tests::fake_server::bookai_replies();
        let held = Reply::Delay(Duration::from_secs(120), Box::new(replies[1].clone()));
        replies.insert(1, held);
        let fake = rt.block_on(FakeServer::start(replies));
        let config = dir.path().join(format!("durable{i}.toml"));
        std::fs::write(
            &config,
            format!(
                "{}[runlog]\nurl = \"{log}\"\nleaseMs = 1000\n",
                local_provider(fake.url())
            ),
        )
        .unwrap();
        let config = config.to_str().unwrap();
        let (mut a, a_addr) = serve(&["--listen", "127.0.0.1:0", "--config", config]);
        let (mut b, b_addr) = serve(&["--listen", "127.0.0.1:0", "--config", config]);
        let body = json!({"pack": "bookai-scene", "input": input, "durable": true,
                          "runId": "durable-1", "wait": false});
        let (status, answer) = http(&a_addr, "POST", "/v1/runs", &body.to_string());
        assert_eq!(status, 202, "{answer}");
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while fake.received().len() < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "A never sent its second request"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        a.kill().unwrap(); // SIGKILL, the second call in flight
        a.wait().unwrap();

        // B takes the run over once A's lease lapses, and finishes it.
        let done = loop {
            let (status, run) = http(&b_addr, "GET", "/v1/runs/durable-1", "");
            assert_eq!(status, 200, "{log}: {run}");
            if run["status"] != "running" {
                break run;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{log}: B never finished the run"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(done["status"], "ok", "{log}: {done}");
        assert_eq!(
            done["output"], expected,
            "{log}: the output an uninterrupted run gives"
        );
        assert_eq!(done["calls"], 3);
        // Each needed request once, and the one in flight when A died again.
        let received = fake.received();
        assert_eq!(received.len(), 4, "{log}");
        assert_eq!(received[1].body, received[2].body);

        // A third host, which never ran it, reads the same from the log.
        let (mut c, c_addr) = serve(&["--listen", "127.0.0.1:0", "--config", config]);
        let (status, seen) = http(&c_addr, "GET", "/v1/runs/durable-1", "");
        assert_eq!(status, 200);
        assert_eq!(
            (&seen["status"], &seen["output"], &seen["calls"]),
            (&done["status"], &done["output"], &done["calls"])
        );
        assert_eq!(seen["attempts"], done["attempts"], "{log}");
        let (_, events) = http(&c_addr, "GET", "/v1/runs/durable-1/events", "");
        assert_eq!(events["isComplete"], true);
        for host in [&mut b, &mut c] {
            let _ = Command::new("kill")
                .args(["-TERM", &host.id().to_string()])
                .status();
            assert!(host.wait().unwrap().success());
        }
    }
}

/// A config whose default provider is an OpenAI-compatible one at `url`.
fn local_provider(url: &str) -> String {
    format!(
        "[defaults]\nprovider = \"local\"\n[providers.local]\nkind = \"openai\"\nbaseUrl = \"{url}\"\napiKeyEnv = \"\"\nmodel = \"fake\"\n"
    )
}

/// What bookai-scene gives when nothing dies (`callai run`, its config at
/// `config`).
fn uninterrupted(rt: &tokio::runtime::Runtime, config: &std::path::Path) -> Value {
    use callai_tests::fake_server::FakeServer;
    let whole = rt.block_on(FakeServer::start(
        callai_tests::fake_server::bookai_replies(),
    ));
    std::fs::write(config, local_provider(whole.url())).unwrap();
    let out = crate::callai_command()
        .args(["run", "bookai-scene", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Posts a run of echo-attempts under `id`; its status.
fn post_run(addr: &str, id: &str) -> u16 {
    let body = json!({"pack": "echo-attempts", "runId": id,
                      "input": {"messages": [{"role": "user", "content": "hi"}]}});
    http(addr, "POST", "/v1/runs", &body.to_string()).0
}

/// Issue 22 #1: another SQLite client opening the log once must not cost
/// the runs acknowledged after it. The server used to close a descriptor of
/// the database file after SQLite had locked it, which drops every POSIX
/// lock the process held on it; the other client then saw no reader, and
/// the runs committed after went to a WAL it had deleted. On a log the
/// server created, and on one it reopened.
#[test]
fn acknowledged_runs_survive_another_sqlite_client_and_a_kill() {
    for reopened in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        let db_arg = db.to_str().unwrap();
        let args = ["--listen", "127.0.0.1:0", "--runlog", db_arg];
        if reopened {
            // Started, stopped (SIGTERM, a clean stop), started again.
            let (mut first, addr) = serve(&args);
            assert_eq!(post_run(&addr, "before"), 200);
            let term = Command::new("kill")
                .args(["-TERM", &first.id().to_string()])
                .status()
                .unwrap();
            assert!(term.success());
            assert!(first.wait().unwrap().success());
        }
        let (mut child, addr) = serve(&args);
        assert_eq!(post_run(&addr, "first"), 200);
        // Another SQLite client (Python's, the system's libsqlite3) opens
        // the log once and reads it.
        let read = Command::new("python3")
            .args([
                "-c",
                "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); \
                          print(c.execute('SELECT count(*) FROM runs').fetchone()[0]); c.close()",
            ])
            .arg(&db)
            .output()
            .expect("python3 runs");
        assert!(
            read.status.success(),
            "{}",
            String::from_utf8_lossy(&read.stderr)
        );
        assert_eq!(post_run(&addr, "second"), 200);
        assert_eq!(post_run(&addr, "third"), 200);
        // kill -9: nothing is flushed on the way out.
        child.kill().unwrap();
        child.wait().unwrap();
        let (mut again, addr) = serve(&args);
        for id in ["first", "second", "third"] {
            let (status, run) = http(&addr, "GET", &format!("/v1/runs/{id}"), "");
            assert_eq!(
                status, 200,
                "run {id} was lost (reopened: {reopened}): {run}"
            );
            assert_eq!(run["status"], "ok", "{run}");
        }
        again.kill().unwrap();
        again.wait().unwrap();
    }
}

/// Issue 22 #3: with the file limit at 256, 300 idle connections locked
/// authorised clients out (every descriptor held, then every place). The
/// server holds its connections under the limit, and at the cap closes the
/// connection idle the longest to make room.
#[test]
fn idle_connections_under_a_low_file_limit_do_not_lock_a_client_out() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.toml");
    std::fs::write(
        &config,
        "[server]\ntokenEnv = \"CALLAI_FILE_LIMIT_TOKEN\"\n",
    )
    .unwrap();
    // `ulimit -n` in sh sets the soft and the hard limit, so the server
    // cannot raise it.
    let mut command = Command::new("sh");
    command
        .args(["-c", "ulimit -n 256 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_callai"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .env("CALLAI_FILE_LIMIT_TOKEN", "t-file-limit-0248")
        .env("CALLAI_CACHE_DIR", callai_tests::cache_dir());
    let (mut child, addr, _) = callai_tests::serve::spawn_serve_command(command);
    let idle: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(&addr).expect("a connection"))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let started = std::time::Instant::now();
    let mut client = TcpStream::connect(&addr).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        client,
        "GET /v1/facet HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer t-file-limit-0248\r\n\
         Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    client.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "an authorised client beside 300 idle connections: {answer:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "answered after {:?}, not at once",
        started.elapsed()
    );
    drop(idle);
    child.kill().unwrap();
    child.wait().unwrap();
}
