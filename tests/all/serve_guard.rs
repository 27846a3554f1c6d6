//! `callai serve` guarding its door: bodies that are not what they should
//! be, uploads (a component or not, a name taken or not), the token, and no
//! listening beyond loopback without one.

use callai_tests::serve::{TestServer, hello};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_are_refused_naming_what_is_wrong() {
    let server = TestServer::start("[server]\nmaxBodyBytes = 4096\nmaxPackBytes = 65536").await;
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("/v1/runs", b"not json".to_vec(), 400, "body"),
        ("/v1/runs", b"[]".to_vec(), 400, "body"),
        ("/v1/runs", br#"{"input": {}}"#.to_vec(), 400, "pack"),
        (
            "/v1/runs",
            br#"{"pack": "echo-attempts"}"#.to_vec(),
            400,
            "input",
        ),
        (
            "/v1/runs",
            br#"{"pack": "echo-attempts", "input": 1, "wait": 1}"#.to_vec(),
            400,
            "wait",
        ),
        (
            "/v1/runs",
            br#"{"pack": "echo-attempts", "input": 1, "durable": true}"#.to_vec(),
            400,
            "durable",
        ),
        (
            "/v1/runs",
            br#"{"pack": "echo-attempts", "input": 1, "script": {}}"#.to_vec(),
            400,
            "script",
        ),
        (
            "/v1/runs",
            br#"{"pack": "echo-attempts", "input": 1, "extra": 1}"#.to_vec(),
            400,
            "extra",
        ),
        ("/v1/call", b"{".to_vec(), 400, "body"),
        ("/v1/call", br#"{"script": []}"#.to_vec(), 400, "request"),
        ("/v1/call", br#"{"request": []}"#.to_vec(), 400, "request"),
    ];
    for (path, body, status, field) in cases {
        let a = server.send("POST", path, Some(body.clone())).await;
        assert_eq!(
            a.status,
            status,
            "{path} {}: {}",
            String::from_utf8_lossy(&body),
            a.body
        );
        assert_eq!(a.body["error"]["code"], "validation_error");
        assert_eq!(a.body["error"]["details"]["field"], field, "{}", a.body);
    }
    let big = vec![b' '; 5000];
    for path in ["/v1/runs", "/v1/call"] {
        let a = server.send("POST", path, Some(big.clone())).await;
        assert_eq!(a.status, 413, "{path}");
        assert_eq!(a.body["error"]["code"], "payload_too_large");
        assert_eq!(a.body["error"]["details"]["limit"], "server.maxBodyBytes");
    }
    let unknown = server
        .post("/v1/runs", &json!({"pack": "nope", "input": 1}))
        .await;
    assert_eq!(unknown.status, 404);
    assert!(
        unknown.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nope")
    );

    // A pack upload that is no component, an empty one, one too large.
    for (body, status) in [
        (b"\0asm\x01\0\0\0garbage".to_vec(), 400),
        (b"hello".to_vec(), 400),
        (Vec::new(), 400),
        (vec![0u8; 70_000], 413),
    ] {
        let a = server.send("PUT", "/v1/packs/junk", Some(body)).await;
        assert_eq!(a.status, status, "{}", a.body);
        assert!(a.body["error"]["message"].is_string());
    }
    let packs = server.get("/v1/packs").await;
    assert!(!packs.body.to_string().contains("junk"));
    // The server is still whole.
    let ok = server
        .post(
            "/v1/runs",
            &json!({"pack": "echo-attempts", "input": hello()}),
        )
        .await;
    assert_eq!(ok.body["status"], "ok");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uploaded_pack_runs_and_names_are_guarded() {
    let server = TestServer::start("").await;
    let bytes = std::fs::read(callai_test_programs_artifacts::path("multi_call").unwrap()).unwrap();
    let a = server
        .send("PUT", "/v1/packs/mine?nodeId=my.node", Some(bytes.clone()))
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    assert_eq!(a.body["name"], "mine");
    assert_eq!(a.body["nodeId"], "my.node");
    // Issue 22 #14: an id with a NUL (or any control character) is refused
    // at the edge, naming it; it used to be kept, and every run of it on
    // PostgreSQL answered 500.
    for bad in ["%00", "a%0Ab", ""] {
        let refused = server
            .send(
                "PUT",
                &format!("/v1/packs/other?nodeId={bad}"),
                Some(bytes.clone()),
            )
            .await;
        assert_eq!(refused.status, 400, "{bad}: {}", refused.body);
        assert_eq!(refused.body["error"]["details"]["field"], "nodeId");
    }
    let refused = server
        .post(
            "/v1/call",
            &serde_json::json!({"request": hello(), "nodeId": "a\u{0}b"}),
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(refused.body["error"]["details"]["field"], "nodeId");
    assert_eq!(a.body["sha256"], callai_host::sha256_hex(&bytes));
    let listed = server.get("/v1/packs").await;
    let mine = listed
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "mine")
        .unwrap()
        .clone();
    assert_eq!(mine, a.body);
    // The same bytes under the name of a `--packs` file hash alike.
    let file = listed
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "multi_call")
        .unwrap();
    assert_eq!(file["sha256"], a.body["sha256"]);
    // Replacing an upload is fine; a bundled or --packs name is not.
    let again = server
        .send("PUT", "/v1/packs/mine", Some(bytes.clone()))
        .await;
    assert_eq!(again.status, 201);
    for taken in ["echo-attempts", "trap"] {
        let a = server
            .send("PUT", &format!("/v1/packs/{taken}"), Some(bytes.clone()))
            .await;
        assert_eq!(a.status, 409, "{taken}");
    }
    let bad = server
        .send("PUT", "/v1/packs/.hidden", Some(bytes.clone()))
        .await;
    assert_eq!(
        (bad.status, bad.body["error"]["details"]["field"].as_str()),
        (400, Some("name"))
    );

    let run = server
        .post(
            "/v1/runs",
            &json!({"pack": "mine", "input": {"calls": 2},
                    "script": [{"content": "a", "outputTokens": 1}, {"content": "b", "outputTokens": 2}]}),
        )
        .await;
    assert_eq!(run.status, 200, "{}", run.body);
    assert_eq!(run.body["status"], "ok", "{}", run.body);
    assert_eq!(run.body["calls"], 2);
    assert_eq!(
        run.body["attempts"],
        json!({"count": 2, "outputTokens": 3, "usageComplete": true})
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_guards_everything_but_health_and_discovery() {
    let toml = "[server]\ntokenEnv = \"CALLAI_TEST_TOKEN\"";
    let server = TestServer::start_with(toml, None, |k| {
        (k == "CALLAI_TEST_TOKEN").then(|| "s3cret-token".to_owned())
    })
    .await;
    for path in ["/v1/facet", "/v1/packs", "/metrics", "/v1/runs/x"] {
        let none = server.send_as("GET", path, None, None).await;
        assert_eq!(none.status, 401, "{path}");
        assert_eq!(none.body["error"]["code"], "unauthorized");
        let wrong = server
            .send_as("GET", path, None, Some("s3cret-tokeN"))
            .await;
        assert_eq!(wrong.status, 401, "{path}");
        assert!(!wrong.body.to_string().contains("s3cret"), "{}", wrong.body);
    }
    let post = server
        .send_as("POST", "/v1/call", Some(b"{}".to_vec()), None)
        .await;
    assert_eq!(post.status, 401);
    for path in ["/healthz", "/.well-known/openwop"] {
        assert_eq!(
            server.send_as("GET", path, None, None).await.status,
            200,
            "{path}"
        );
    }
    assert_eq!(server.get("/v1/facet").await.status, 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_the_server_stays_on_loopback() {
    let config = callai_config::Config::default();
    let options = callai_server::ServerOptions {
        listen: Some("0.0.0.0:0".parse().unwrap()),
        ..callai_server::ServerOptions::default()
    };
    let e = callai_server::Server::bind(config, options)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("server.tokenEnv"), "{e}");
    let config =
        callai_config::Config::from_toml("[server]\ntokenEnv = \"CALLAI_NO_SUCH_VAR_0248\"")
            .unwrap();
    let options = callai_server::ServerOptions {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        env: std::sync::Arc::new(|_| None),
        ..callai_server::ServerOptions::default()
    };
    let e = callai_server::Server::bind(config, options)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("CALLAI_NO_SUCH_VAR_0248"), "{e}");
}
