//! Tenants that cannot see or touch each other's runs and packs (issue 31,
//! items 1 to 3), tried as a hostile tenant would, against a real `callai
//! serve` process on each run-log backend (an SQLite file; a PostgreSQL
//! database of the throwaway cluster): two tenants each have their own
//! `order-1001`, a third finds it exactly as an id nobody holds, the admin
//! reaches any with `?tenant=`, and all of it holds again from the run log
//! after a restart; uploads live in their uploader's namespace, shared packs
//! are read-only to tenants; `/metrics` takes the admin's or the metrics
//! token.

use callai_tests::pg::PgCluster;
use callai_tests::process::{Reply, Serve};
use serde_json::{Value, json};

const ADMIN: &str = "tok-admin";
const A: &str = "tok-a";
const B: &str = "tok-b";
const C: &str = "tok-c";
const METRICS: &str = "tok-metrics";

const ENV: [(&str, &str); 5] = [
    ("ADMIN_TOKEN", ADMIN),
    ("A_TOKEN", A),
    ("B_TOKEN", B),
    ("C_TOKEN", C),
    ("METRICS_TOKEN", METRICS),
];

fn config(dir: &std::path::Path, runlog: &str) -> std::path::PathBuf {
    let path = dir.join("host.toml");
    let toml = format!(
        r#"
[server]
tokenEnv = "ADMIN_TOKEN"
metricsTokenEnv = "METRICS_TOKEN"
[runlog]
url = "{runlog}"
[tenants.a]
tokenEnv = "A_TOKEN"
[tenants.b]
tokenEnv = "B_TOKEN"
[tenants.c]
tokenEnv = "C_TOKEN"
"#
    );
    std::fs::write(&path, toml).unwrap();
    path
}

fn start(config: &std::path::Path) -> Serve {
    Serve::start(env!("CARGO_BIN_EXE_callai"), config, &ENV)
}

/// A run of echo-attempts whose mock answers `text`.
fn run(id: &str, text: &str) -> Value {
    json!({"pack": "echo-attempts", "runId": id,
           "input": {"messages": [{"role": "user", "content": "the order"}]},
           "script": [{"content": text, "outputTokens": 3}]})
}

fn content(reply: &Reply) -> &str {
    reply.body["output"]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("an answer: {}", reply.body))
}

/// What `token` gets for run `id` (and `?tenant=` when given).
async fn get(serve: &Serve, token: &str, path: &str) -> Reply {
    serve.send("GET", path, None, Some(token)).await
}

/// The reads of runs, from memory or from the log.
async fn runs_are_their_owners(serve: &Serve, backend: &str) {
    let a = get(serve, A, "/v1/runs/order-1001").await;
    assert_eq!(content(&a), "A's answer", "{backend}");
    let b = get(serve, B, "/v1/runs/order-1001").await;
    assert_eq!(content(&b), "B's answer", "{backend}");
    // Another tenant's run is exactly an id nobody holds.
    let theirs = get(serve, C, "/v1/runs/order-1001").await;
    let nobodys = get(serve, C, "/v1/runs/order-7777").await;
    assert_eq!((theirs.status, nobodys.status), (404, 404), "{backend}");
    assert_eq!(
        theirs.body.to_string().replace("order-1001", "ID"),
        nobodys.body.to_string().replace("order-7777", "ID"),
        "{backend}: no oracle"
    );
    for path in ["/v1/runs/order-1001/events", "/v1/runs/order-7777/events"] {
        assert_eq!(get(serve, C, path).await.status, 404, "{backend} {path}");
    }
    let events = get(serve, A, "/v1/runs/order-1001/events").await;
    assert_eq!(events.status, 200, "{backend}: {}", events.body);
    // The admin reaches any tenant's by naming it; its own is its own.
    let as_a = get(serve, ADMIN, "/v1/runs/order-1001?tenant=a").await;
    assert_eq!(content(&as_a), "A's answer", "{backend}");
    let as_b = get(serve, ADMIN, "/v1/runs/order-1001?tenant=b").await;
    assert_eq!(content(&as_b), "B's answer", "{backend}");
    assert_eq!(get(serve, ADMIN, "/v1/runs/order-1001").await.status, 404);
    // A tenant naming another is refused, whatever the id.
    for path in [
        "/v1/runs/order-1001?tenant=b",
        "/v1/runs/order-7777?tenant=b",
    ] {
        let r = get(serve, A, path).await;
        assert_eq!(r.status, 403, "{backend} {path}: {}", r.body);
    }
}

async fn runs_on(backend: &str, runlog: &str) {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), runlog);
    let mut serve = start(&config);
    // Two tenants, one run id each.
    let a = serve
        .send(
            "POST",
            "/v1/runs",
            Some(&run("order-1001", "A's answer")),
            Some(A),
        )
        .await;
    assert_eq!((a.status, content(&a)), (200, "A's answer"), "{backend}");
    let b = serve
        .send(
            "POST",
            "/v1/runs",
            Some(&run("order-1001", "B's answer")),
            Some(B),
        )
        .await;
    assert_eq!((b.status, content(&b)), (200, "B's answer"), "{backend}");
    // Its owner's second POST of the id is a conflict; another tenant's
    // is not, and takes nothing from anyone.
    let again = serve
        .send(
            "POST",
            "/v1/runs",
            Some(&run("order-1001", "again")),
            Some(A),
        )
        .await;
    assert_eq!(again.status, 409, "{backend}: {}", again.body);
    runs_are_their_owners(&serve, backend).await;
    // From the run log alone, after a restart.
    serve.kill();
    let serve = start(&config);
    runs_are_their_owners(&serve, backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_their_tenants_own_on_sqlite_and_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("runs.db");
    runs_on("sqlite", file.to_str().unwrap()).await;
    if let Some(cluster) = PgCluster::shared() {
        runs_on("postgres", &cluster.database()).await;
    }
}

fn pack_bytes(tag: &str) -> Vec<u8> {
    let multi_call =
        std::fs::read(callai_test_programs_artifacts::path("multi_call").unwrap()).unwrap();
    callai_tests::components::with_custom_section(multi_call, tag)
}

/// The names and node ids `token` is shown by `GET /v1/packs`.
async fn packs(serve: &Serve, token: &str) -> Vec<(String, String)> {
    let list = get(serve, token, "/v1/packs").await.body;
    list.as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let name = p["name"].as_str().unwrap().to_owned();
            (name, p["nodeId"].as_str().unwrap().to_owned())
        })
        .collect()
}

fn node_of<'a>(packs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    packs
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, node)| node.as_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packs_live_in_their_uploaders_namespace_and_shared_ones_are_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("runs.db");
    let config = config(dir.path(), file.to_str().unwrap());
    let serve = start(&config);
    let put = |name: &str, node: &str, tag: &str, token: &'static str| {
        let path = format!("/v1/packs/{name}?nodeId={node}");
        let bytes = pack_bytes(tag);
        let serve = &serve;
        async move {
            serve
                .send_bytes("PUT", &path, Some(bytes), Some(token))
                .await
        }
    };
    // Two tenants upload under one name: each gets its own.
    assert_eq!(put("tool", "a.node", "a", A).await.status, 201);
    assert_eq!(put("tool", "b.node", "b", B).await.status, 201);
    assert_eq!(node_of(&packs(&serve, A).await, "tool"), Some("a.node"));
    assert_eq!(node_of(&packs(&serve, B).await, "tool"), Some("b.node"));
    assert_eq!(node_of(&packs(&serve, C).await, "tool"), None);
    let c_runs = serve
        .send(
            "POST",
            "/v1/runs",
            Some(&json!({"pack": "tool", "input": {}})),
            Some(C),
        )
        .await;
    assert_eq!(c_runs.status, 404, "{}", c_runs.body);
    // A's run of "tool" runs A's component: its node id is A's.
    let a_run = serve
        .send(
            "POST",
            "/v1/runs",
            Some(&json!({"pack": "tool", "input": {"calls": 1}, "events": true})),
            Some(A),
        )
        .await;
    assert_eq!(a_run.status, 200, "{}", a_run.body);
    let nodes: Vec<&str> = a_run.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["payload"]["nodeId"].as_str())
        .collect();
    assert!(
        !nodes.is_empty() && nodes.iter().all(|n| *n == "a.node"),
        "{nodes:?}"
    );
    // A shared pack is read-only to a tenant: not replaced, not deleted.
    let replace = put("echo-attempts", "b.echo", "b2", B).await;
    assert_eq!(replace.status, 403, "{}", replace.body);
    let delete = serve
        .send("DELETE", "/v1/packs/echo-attempts", None, Some(B))
        .await;
    assert_eq!(delete.status, 403, "{}", delete.body);
    // A tenant deletes its own; the other's stays.
    let gone = serve.send("DELETE", "/v1/packs/tool", None, Some(B)).await;
    assert_eq!(gone.status, 200, "{}", gone.body);
    assert_eq!(node_of(&packs(&serve, B).await, "tool"), None);
    assert_eq!(node_of(&packs(&serve, A).await, "tool"), Some("a.node"));
    let again = serve.send("DELETE", "/v1/packs/tool", None, Some(B)).await;
    assert_eq!(again.status, 404, "{}", again.body);
    // The admin's uploads are shared: every tenant may run them, none
    // replace them.
    assert_eq!(put("common", "common.node", "c", ADMIN).await.status, 201);
    for token in [A, B, C] {
        assert_eq!(
            node_of(&packs(&serve, token).await, "common"),
            Some("common.node")
        );
    }
    assert_eq!(put("common", "x", "x", C).await.status, 403);
    // The admin sees every namespace, and manages a tenant's by naming it.
    let all = get(&serve, ADMIN, "/v1/packs").await.body;
    let tenants: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["name"] == "tool")
        .filter_map(|p| p["tenant"].as_str())
        .collect();
    assert_eq!(tenants, ["a"], "{all}");
    let removed = serve
        .send("DELETE", "/v1/packs/tool?tenant=a", None, Some(ADMIN))
        .await;
    assert_eq!(removed.status, 200, "{}", removed.body);
    assert_eq!(node_of(&packs(&serve, A).await, "tool"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_take_the_admins_or_the_metrics_token() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("runs.db");
    let config = config(dir.path(), file.to_str().unwrap());
    let serve = start(&config);
    let read = |token: Option<&'static str>| {
        let serve = &serve;
        async move { serve.send("GET", "/metrics", None, token).await }
    };
    let tenant = read(Some(A)).await;
    assert_eq!(tenant.status, 403, "{}", tenant.body);
    assert!(
        tenant.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/v1/budget"),
        "{}",
        tenant.body
    );
    assert_eq!(read(None).await.status, 401);
    assert_eq!(read(Some("tok-nobody")).await.status, 401);
    for token in [ADMIN, METRICS] {
        let m = read(Some(token)).await;
        assert_eq!(m.status, 200, "{}", m.body);
        assert!(m.body.as_str().unwrap().contains("callai_runs_total"));
    }
    // The metrics token is no caller of the API.
    assert_eq!(
        serve
            .send("GET", "/v1/packs", None, Some(METRICS))
            .await
            .status,
        401
    );
    // A tenant reads its own figures where it always did.
    assert_eq!(
        serve.send("GET", "/v1/budget", None, Some(A)).await.status,
        200
    );
}
