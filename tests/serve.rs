//! A `callai serve` in the test process: the real server on a loopback
//! port, the bundled examples and the test programs as its packs, and a
//! small client for its JSON API.

use callai_config::Config;
use callai_host::RuntimeOptions;
use callai_server::{BundledPack, EnvSource, Server, ServerOptions};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running server.
#[derive(Debug)]
pub struct TestServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), callai_server::ServeError>>,
    /// The `--packs` folder (the test programs).
    _packs: tempfile::TempDir,
    client: reqwest::Client,
    token: Option<String>,
}

/// Where a test server keeps the packs it compiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackCache {
    /// The tests' shared compiled-component cache
    /// ([`crate::cache_dir`]): the test programs every server loads
    /// compile once for all servers of all runs (a start is ~30 ms, not
    /// the ~700 ms of CPU compiling them took).
    Shared,
    /// None: every pack compiles, as on a host without a cache; for a
    /// test that watches compilations happen.
    Off,
}

/// An answer with the `x-callai-*` headers it carried.
#[derive(Debug)]
pub struct Exchange {
    /// The HTTP status.
    pub status: u16,
    /// The body as JSON (a string when it is not JSON).
    pub body: Value,
    /// Its `x-callai-*` headers.
    pub headers: CallaiHeaders,
}

/// The `x-callai-*` headers of an answer, in order.
#[derive(Debug, Default)]
pub struct CallaiHeaders(pub Vec<(String, String)>);

impl CallaiHeaders {
    /// The value of header `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An answer: status, `Retry-After` when set, and the body as JSON (a
/// string when it is not JSON).
#[derive(Debug, Clone)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The `Retry-After` header.
    pub retry_after: Option<String>,
    /// The body.
    pub body: Value,
}

/// Starts `callai serve` (the binary at `bin`) with `args` and `envs`,
/// stderr drained; the child and its address from the `listening on
/// http://ADDR` line it prints once it listens.
pub fn spawn_serve(
    bin: &str,
    args: &[&str],
    envs: &[(&str, &str)],
) -> (std::process::Child, String) {
    let mut command = crate::callai_command(bin);
    command.arg("serve").args(args).envs(envs.iter().copied());
    let (child, addr, before) = spawn_serve_command(command);
    assert!(before.is_empty(), "printed before listening: {before:?}");
    (child, addr)
}

/// Starts `command` (a `callai serve` however wrapped); returns the child,
/// its address from the `listening on http://ADDR` line, and the lines it
/// printed on stderr before that one.
pub fn spawn_serve_command(
    mut command: std::process::Command,
) -> (std::process::Child, String, Vec<String>) {
    use std::io::BufRead;
    let mut child = command
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("callai serve starts");
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut before = Vec::new();
    let addr = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("serve ended after {before:?}"))
            .expect("text");
        match line.strip_prefix("listening on http://") {
            Some(addr) => break addr.to_owned(),
            None => before.push(line),
        }
    };
    // Keep draining stderr so the server never blocks on it.
    std::thread::spawn(move || lines.for_each(drop));
    (child, addr, before)
}

/// An HTTP client for tests that talk to servers of their own making (a
/// `callai serve` process): TLS through rustls, as the host's.
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// A folder holding the test programs `names` as `NAME.wasm`.
pub fn packs_dir(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in names {
        let from = callai_test_programs_artifacts::path(name).unwrap();
        std::fs::copy(from, dir.path().join(format!("{name}.wasm"))).unwrap();
    }
    dir
}

impl TestServer {
    /// A server of the config `toml`, with the test programs `trap`,
    /// `loop_forever` and `multi_call` in its `--packs` folder.
    pub async fn start(toml: &str) -> Self {
        Self::start_with(toml, None, |_| None).await
    }

    /// [`TestServer::start`] with a run log and an environment of its own.
    pub async fn start_with(
        toml: &str,
        runlog: Option<&Path>,
        env: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        Self::start_cached(toml, runlog, env, PackCache::Shared).await
    }

    /// [`TestServer::start_with`], keeping compiled packs in `cache`.
    pub async fn start_cached(
        toml: &str,
        runlog: Option<&Path>,
        env: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
        cache: PackCache,
    ) -> Self {
        // The test client speaks TLS through rustls, as the host does.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut config = Config::from_toml(toml).expect("a valid config");
        // No line per request from the servers of the tests, unless one asks.
        if !toml.contains("[log]") {
            config.log.format = callai_config::LogFormat::Off;
        }
        let packs = packs_dir(&["trap", "loop_forever", "multi_call"]);
        let env: EnvSource = Arc::new(env);
        let token = (!config.server.token_env.is_empty())
            .then(|| env(&config.server.token_env))
            .flatten();
        let options = ServerOptions {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            packs_dir: Some(packs.path().to_owned()),
            runlog: runlog.map(|p| p.display().to_string()),
            bundled: callai_examples::EXAMPLES
                .iter()
                .map(|e| {
                    BundledPack::new(e.name, e.node_id, Some(e.default_script.into()), e.loader())
                        .with_sha256(e.sha256)
                })
                .collect(),
            runtime: match cache {
                PackCache::Shared => RuntimeOptions::from_limits(&config.host.limits)
                    .cache_dir(crate::cache_dir().join("components")),
                PackCache::Off => RuntimeOptions::from_limits(&config.host.limits),
            },
            env,
            open: callai_server::OpenListen::LoopbackOnly,
        };
        let server = Server::bind(config, options)
            .await
            .expect("the server starts");
        let url = format!("http://{}", server.local_addr());
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async {
            let _ = rx.await;
        }));
        Self {
            url,
            stop: Some(tx),
            task,
            _packs: packs,
            client: reqwest::Client::new(),
            token,
        }
    }

    /// A server whose provider `p` (the default) speaks `kind` (`openai`,
    /// `anthropic`) to a loopback fake answering `replies`, with the
    /// section's extra `keys` (TOML lines), its key `sk-t` in `FAKE_KEY`,
    /// and host retries that back off 1 ms.
    pub async fn before_fake(
        kind: &str,
        keys: &str,
        replies: Vec<crate::fake_server::Reply>,
    ) -> (Self, crate::fake_server::FakeServer) {
        let fake = crate::fake_server::FakeServer::start(replies).await;
        let toml = format!(
            "[providers.p]\nkind = \"{kind}\"\nbaseUrl = \"{}\"\napiKeyEnv = \"FAKE_KEY\"\n{keys}\n\
             [retry]\nbackoffBaseMs = 1\nbackoffMaxMs = 2\n[defaults]\nprovider = \"p\"\n",
            fake.url()
        );
        let server =
            Self::start_with(&toml, None, |k| (k == "FAKE_KEY").then(|| "sk-t".into())).await;
        (server, fake)
    }

    /// Sends `method path` with `body`, with the token when the server has one.
    pub async fn send(&self, method: &str, path: &str, body: Option<Vec<u8>>) -> Answer {
        let token = self.token.clone();
        self.send_as(method, path, body, token.as_deref()).await
    }

    /// [`TestServer::send`] with `token` (or none).
    pub async fn send_as(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        token: Option<&str>,
    ) -> Answer {
        let post = method.eq_ignore_ascii_case("POST");
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.client.request(method, format!("{}{path}", self.url));
        if let Some(t) = token {
            request = request.bearer_auth(t);
        }
        if let Some(b) = body {
            // A POST's body is JSON, and says so: a server without tokens
            // takes no other (a page of another site could send it).
            if post {
                request = request.header("content-type", "application/json");
            }
            request = request.body(b);
        }
        let response = request.send().await.expect("the server answers");
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Answer {
            status,
            retry_after,
            body,
        }
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Answer {
        self.send("GET", path, None).await
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Answer {
        self.send("POST", path, Some(body.to_string().into_bytes()))
            .await
    }

    /// `POST path` with the JSON `body`, as `token` (`None`: the server's
    /// own, if it has one): the response as it came.
    async fn post_json(&self, path: &str, body: &Value, token: Option<&str>) -> reqwest::Response {
        let mut request = self
            .client
            .post(format!("{}{path}", self.url))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(t) = token.or(self.token.as_deref()) {
            request = request.bearer_auth(t);
        }
        request.send().await.expect("the server answers")
    }

    /// `POST path` with the JSON `body`, as `token` (`None`: the server's
    /// own, if it has one): the answer with its `x-callai-*` headers.
    pub async fn exchange(&self, path: &str, body: &Value, token: Option<&str>) -> Exchange {
        let response = self.post_json(path, body, token).await;
        let status = response.status().as_u16();
        let headers = CallaiHeaders(
            response
                .headers()
                .iter()
                .filter(|(k, _)| k.as_str().starts_with("x-callai-"))
                .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_owned()))
                .collect(),
        );
        let text = response.text().await.expect("a body");
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Exchange {
            status,
            body,
            headers,
        }
    }

    /// `POST path` with the JSON `body` (a streamed request), as `token`
    /// (`None`: the server's own, if it has one): the `data:` payloads of
    /// the event stream it answers, each parsed as JSON.
    pub async fn events(&self, path: &str, body: &Value, token: Option<&str>) -> Vec<Value> {
        let response = self.post_json(path, body, token).await;
        let text = response.text().await.expect("a body");
        text.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap_or_else(|_| Value::String(d.to_owned())))
            .collect()
    }

    /// `/metrics`, as text.
    pub async fn metrics(&self) -> String {
        match self.get("/metrics").await.body {
            Value::String(text) => text,
            other => panic!("metrics are text, got {other}"),
        }
    }

    /// The value of the sample `line_start` (e.g.
    /// `callai_runs_total{status="ok"}`), 0 when absent.
    pub async fn metric(&self, line_start: &str) -> f64 {
        metric_in(&self.metrics().await, line_start)
    }

    /// Asks the server to shut down (as SIGTERM does) and waits for it.
    pub async fn shutdown(mut self) {
        self.begin_shutdown();
        self.task.await.unwrap().expect("the server stops cleanly");
    }

    /// Asks the server to shut down without waiting.
    pub fn begin_shutdown(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }

    /// Waits for a shutdown begun earlier.
    pub async fn stopped(self) {
        self.task.await.unwrap().expect("the server stops cleanly");
    }
}

/// The value of the sample starting `line_start` in `text`; panics when
/// there is none (a refused `/metrics` answers no series).
pub fn metric_in(text: &str, line_start: &str) -> f64 {
    let value = text
        .lines()
        .find_map(|l| l.strip_prefix(line_start)?.strip_prefix(' '));
    let Some(value) = value else {
        let start: String = text.chars().take(300).collect();
        panic!("no series {line_start} in /metrics (every one is seeded at 0): {start}");
    };
    value.trim().parse().unwrap()
}

/// Every sample of the family `name` (its lines `name{...} value`).
pub fn samples(text: &str, name: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let (labels, value) = rest.rsplit_once(' ')?;
            labels
                .starts_with('{')
                .then(|| (labels.to_owned(), value.parse().unwrap()))
        })
        .collect()
}

/// A text request.
pub fn hello() -> Value {
    json!({"messages": [{"role": "user", "content": "hi"}]})
}

/// A structured request whose script makes `n` provider requests: `n - 1`
/// truncated replies, then a good one.
pub fn truncating(n: usize) -> (Value, Value) {
    let request = json!({
        "messages": [{"role": "user", "content": "hi"}],
        "maxTokens": 100,
        "responseSchema": {"type": "object", "required": ["x"]}
    });
    let mut script: Vec<Value> = (1..n)
        .map(|_| json!({"content": "{\"x\": ", "finishReason": "length", "outputTokens": 100}))
        .collect();
    script.push(json!({"content": "{\"x\": 1}", "outputTokens": 7}));
    (request, Value::Array(script))
}
