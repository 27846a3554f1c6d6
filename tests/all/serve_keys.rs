//! API keys over the API (issue 53, items 1 and 2), against two real
//! `callai serve` processes on one run log (an SQLite file; a PostgreSQL
//! database of the throwaway cluster): a key made on one host works on
//! both, is listed without its secret, is held to its own limits on top of
//! its tenant's across both hosts, reaches only its models, has every
//! change in its audit list, and once revoked is `401` on the other host
//! within the refresh (the time it took is printed). Bad bodies are refused
//! naming the field; a tenant's token does not manage keys.

use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::process::{Reply as Answer, Serve};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const ADMIN: &str = "tok-admin";
const TEAM: &str = "tok-team";

fn completion() -> Value {
    json!({"model": "m", "usage": {"prompt_tokens": 5, "completion_tokens": 3},
           "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                        "finish_reason": "stop"}]})
}

fn host(dir: &std::path::Path, runlog: &str, port: u16) -> Serve {
    let path = dir.join(format!("keys-{port}.toml"));
    let toml = format!(
        r#"
[server]
tokenEnv = "ADMIN_TOKEN"
[retry]
maxRetryAttempts = 1
[runlog]
url = "{runlog}"
[providers.fake]
kind = "openai"
baseUrl = "http://127.0.0.1:{port}/v1"
apiKeyEnv = ""
model = "m"
[tenants.team]
tokenEnv = "TEAM_TOKEN"
[tenants.team.budget]
requests = 1000
window = "1d"
"#
    );
    std::fs::write(&path, toml).unwrap();
    Serve::start(
        env!("CARGO_BIN_EXE_callai"),
        &path,
        &[("ADMIN_TOKEN", ADMIN), ("TEAM_TOKEN", TEAM)],
    )
}

fn call(model: &str) -> Value {
    json!({"request": {"messages": [{"role": "user", "content": "hi"}], "model": model,
                       "provider": "fake", "maxTokens": 10}})
}

async fn calls_until(serve: &Serve, token: &str, status: u16) -> (Answer, Duration) {
    let started = Instant::now();
    loop {
        let r = serve
            .send("POST", "/v1/call", Some(&call("m")), Some(token))
            .await;
        if r.status == status || started.elapsed() > Duration::from_secs(10) {
            return (r, started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_made_on_one_host_works_on_both_and_once_revoked_on_neither() {
    let dir = tempfile::tempdir().unwrap();
    for (name, runlog, _cluster) in callai_tests::runlog_backends::urls(dir.path()) {
        let fake = FakeServer::repeating(Reply::ok(completion())).await;
        let (a, b) = (
            host(dir.path(), &runlog, fake.port()),
            host(dir.path(), &runlog, fake.port()),
        );
        // Waits out the end of a minute: the key's limit is per minute.
        let left = 60_000 - callai_engine::events::now_ms() % 60_000;
        if left < 20_000 {
            tokio::time::sleep(Duration::from_millis(left + 50)).await;
        }
        let new = json!({"name": "ci", "tenant": "team",
                         "limits": [{"requests": 3, "per": "1m"}],
                         "metadata": {"owner": "ci-team"}});
        let made = a.send("POST", "/v1/keys", Some(&new), Some(ADMIN)).await;
        assert_eq!(made.status, 201, "{name}: {}", made.body);
        let secret = made.body["key"].as_str().unwrap().to_owned();
        let id = made.body["id"].as_str().unwrap().to_owned();
        assert!(
            secret.starts_with("ck-") && secret.len() >= 3 + 64,
            "{name}: {secret}"
        );
        assert_eq!(made.body["status"], "active");

        // It works on both hosts (b reads it within its refresh).
        let r = a
            .send("POST", "/v1/call", Some(&call("m")), Some(&secret))
            .await;
        assert_eq!(r.status, 200, "{name}: {}", r.body);
        let limit = r.headers["x-ratelimit-limit-requests"].to_str().unwrap();
        assert_eq!(limit, "3", "{name}: the key's own limit is the tightest");
        let (r, took) = calls_until(&b, &secret, 200).await;
        assert_eq!(r.status, 200, "{name}: {} after {took:?}", r.body);
        // Its calls are its tenant's: the tenant's budget counts them.
        let budget = b.send("GET", "/v1/budget", None, Some(&secret)).await.body;
        assert_eq!(budget["tenant"], "team", "{name}: {budget}");
        // Its limit holds across both hosts: a third call fits, a fourth not.
        let r = a
            .send("POST", "/v1/call", Some(&call("m")), Some(&secret))
            .await;
        assert_eq!(r.status, 200, "{name}: {}", r.body);
        let r = b
            .send("POST", "/v1/call", Some(&call("m")), Some(&secret))
            .await;
        assert_eq!(r.status, 429, "{name}: {}", r.body);
        assert_eq!(r.body["error"]["details"]["per"], "1m");
        // The tenant's own token is not held to the key's limit.
        let r = b
            .send("POST", "/v1/call", Some(&call("m")), Some(TEAM))
            .await;
        assert_eq!(r.status, 200, "{name}: {}", r.body);

        listed_changed_and_revoked(name, &a, &b, &id, &secret).await;
    }
}

/// The key `id` (secret `secret`) made on `a`: listed on `b` without its
/// secret, renamed and revoked on `a`, then refused on `b`; every change in
/// its audit list.
async fn listed_changed_and_revoked(name: &str, a: &Serve, b: &Serve, id: &str, secret: &str) {
    // Listed and read without its secret, with its spend.
    let list = b.send("GET", "/v1/keys", None, Some(ADMIN)).await;
    assert_eq!(list.status, 200, "{name}: {}", list.body);
    let text = list.body.to_string();
    assert!(!text.contains(&secret[3..]), "{name}: no secret in {text}");
    let shown = &list.body["data"][0];
    assert_eq!(shown["id"], id);
    assert_eq!(shown["metadata"]["owner"], "ci-team");
    assert_eq!(shown["spend"][0]["window"], "1m");
    assert!(shown["hint"].as_str().unwrap().starts_with("ck-"));
    assert!(shown["lastUsedAt"].is_string(), "{name}: {shown}");

    // Changed: a new name; every change is in its audit list.
    let patch = json!({"name": "ci-renamed"});
    let r = a
        .send(
            "PATCH",
            &format!("/v1/keys/{id}"),
            Some(&patch),
            Some(ADMIN),
        )
        .await;
    assert_eq!(
        (r.status, &r.body["name"]),
        (200, &json!("ci-renamed")),
        "{name}: {}",
        r.body
    );
    let revoked = a
        .send("DELETE", &format!("/v1/keys/{id}"), None, Some(ADMIN))
        .await;
    assert_eq!(
        revoked.body["status"], "revoked",
        "{name}: {}",
        revoked.body
    );
    let (r, took) = calls_until(b, secret, 401).await;
    assert_eq!(r.status, 401, "{name}: still {} after {took:?}", r.status);
    eprintln!("{name}: a key revoked on one host was 401 on the other after {took:?}");
    let events = b
        .send("GET", &format!("/v1/keys/{id}/events"), None, Some(ADMIN))
        .await
        .body;
    let actions: Vec<&str> = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        ["created", "updated", "revoked"],
        "{name}: {events}"
    );
    assert_eq!(events["data"][0]["actor"], "admin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_the_admins_and_a_bad_body_is_refused_naming_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeServer::repeating(Reply::ok(completion())).await;
    let runlog = dir.path().join("runs.db");
    let a = host(dir.path(), runlog.to_str().unwrap(), fake.port());
    let ok = json!({"name": "k", "tenant": "team"});
    let r = a.send("POST", "/v1/keys", Some(&ok), Some(TEAM)).await;
    assert_eq!(r.status, 403, "a tenant does not manage keys: {}", r.body);
    let cases = [
        (json!({"name": "k", "tenant": "team", "rpm": 5}), "rpm"),
        (json!({"name": "k", "tenant": "no such!"}), "tenant"),
        (json!({"name": "", "tenant": "team"}), "name"),
        (
            json!({"name": "k", "tenant": "team", "limits": [{"requests": 1, "per": "1w"}]}),
            "limits",
        ),
        (
            json!({"name": "k", "tenant": "team", "allowedProviders": ["nowhere"]}),
            "allowedProviders[0]",
        ),
        (
            json!({"name": "k", "tenant": "team", "expiresAt": "tomorrow"}),
            "expiresAt",
        ),
    ];
    for (body, field) in cases {
        let r = a.send("POST", "/v1/keys", Some(&body), Some(ADMIN)).await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert!(r.body.to_string().contains(field), "{body}: {}", r.body);
    }
    let r = a.send("GET", "/v1/keys/key-nope", None, Some(ADMIN)).await;
    assert_eq!(r.status, 404, "{}", r.body);

    // A key of a tenant of its own, reaching one model only, and one that
    // has expired.
    let new = json!({"name": "m-only", "tenant": "newcomer", "allowedModels": ["fake/m"]});
    let made = a.send("POST", "/v1/keys", Some(&new), Some(ADMIN)).await;
    assert_eq!(made.status, 201, "{}", made.body);
    let secret = made.body["key"].as_str().unwrap();
    let mut allowed = call("m");
    allowed["request"]["model"] = json!("m");
    let r = a
        .send("POST", "/v1/call", Some(&allowed), Some(secret))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut other = call("m");
    other["request"]["model"] = json!("other");
    let r = a.send("POST", "/v1/call", Some(&other), Some(secret)).await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(r.body["error"]["details"]["field"], "model", "{}", r.body);
    let budget = a.send("GET", "/v1/budget", None, Some(secret)).await.body;
    assert_eq!(budget["tenant"], "newcomer", "{budget}");
    let r = a.send("POST", "/v1/keys", Some(&ok), Some(secret)).await;
    assert_eq!(r.status, 403, "a key does not manage keys: {}", r.body);

    let gone = json!({"name": "old", "tenant": "team", "expiresAt": "2020-01-01T00:00:00Z"});
    let made = a.send("POST", "/v1/keys", Some(&gone), Some(ADMIN)).await;
    assert_eq!(made.body["status"], "expired", "{}", made.body);
    let secret = made.body["key"].as_str().unwrap();
    let r = a
        .send("POST", "/v1/call", Some(&call("m")), Some(secret))
        .await;
    assert_eq!(r.status, 401, "{}", r.body);
}

/// Runs `callai keys ARGS` against `url` with `token` in a variable: its
/// exit code, standard output and error.
async fn cli(url: &str, args: &[&str], token: &str) -> (Option<i32>, String, String) {
    let mut command = crate::callai_command();
    command
        .arg("keys")
        .args(args)
        .args(["--url", url, "--token-env", "KEYS_TEST_TOKEN"])
        .env("KEYS_TEST_TOKEN", token);
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// `callai keys create|list|revoke` against a running server, the admin's
/// token from a variable; a wrong token is exit 2 with the server's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_makes_lists_and_revokes_keys() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeServer::repeating(Reply::ok(completion())).await;
    let runlog = dir.path().join("runs.db");
    let a = host(dir.path(), runlog.to_str().unwrap(), fake.port());
    let create = [
        "create",
        "--tenant",
        "team",
        "--name",
        "cli",
        "--limit",
        "requests=5/1m",
    ];
    let (code, out, err) = cli(&a.url, &create, ADMIN).await;
    assert_eq!(code, Some(0), "{err}");
    let made: Value = serde_json::from_str(&out).unwrap();
    let id = made["id"].as_str().unwrap().to_owned();
    assert_eq!(made["limits"][0]["requests"], 5, "{made}");
    let secret = made["key"].as_str().unwrap().to_owned();
    let r = a
        .send("POST", "/v1/call", Some(&call("m")), Some(&secret))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);

    let (code, out, err) = cli(&a.url, &["list"], ADMIN).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&id) && out.contains("active"), "{out}");
    assert!(!out.contains(&secret[3..]), "no secret in {out}");
    let (code, out, err) = cli(&a.url, &["revoke", &id], ADMIN).await;
    assert_eq!(
        (code, out.trim()),
        (Some(0), &*format!("{id} revoked")),
        "{err}"
    );
    let r = a
        .send("POST", "/v1/call", Some(&call("m")), Some(&secret))
        .await;
    assert_eq!(r.status, 401, "{}", r.body);

    let (code, _, err) = cli(&a.url, &["list"], TEAM).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("403") && err.contains("admin"), "{err}");
    let bad = [
        "create", "--tenant", "team", "--name", "x", "--limit", "rpm=5",
    ];
    let (code, _, err) = cli(&a.url, &bad, ADMIN).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--limit"), "{err}");
}
