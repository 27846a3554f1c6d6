//! The official OpenAI and Anthropic clients, as the drop-in tests run
//! them: the `openai` and `anthropic` Python packages in a venv and the
//! `openai` npm package, each pinned in `tests/clients/` and installed by
//! `.ci/run` into `$CALLAI_CLIENTS_DIR` (default
//! `~/.cache/callai-runtime/clients`), outside the clone.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The installed clients.
#[derive(Debug, Clone)]
pub struct Clients {
    python: PathBuf,
    openai_module: PathBuf,
    codex: PathBuf,
}

/// What `codex exec` did: its last message, and what it printed.
#[derive(Debug)]
pub struct CodexTurn {
    /// The agent's last message (`--output-last-message`).
    pub last_message: String,
    /// Its standard error, for a failure to show.
    pub stderr: String,
}

/// Which client drives a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// `openai` for Python.
    OpenAiPython,
    /// `anthropic` for Python.
    AnthropicPython,
    /// `openai` for Node.
    OpenAiNode,
}

impl Clients {
    /// The clients, when installed. Missing under `CI=true` is a failure
    /// that says how to install them; elsewhere the tests say they skip.
    pub fn installed() -> Option<Self> {
        let dir = std::env::var_os("CALLAI_CLIENTS_DIR")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .map(|h| PathBuf::from(h).join(".cache/callai-runtime/clients"))
            })?;
        let found = Self {
            python: dir.join("venv/bin/python"),
            openai_module: dir.join("node/node_modules/openai/index.mjs"),
            codex: dir.join("node/node_modules/@openai/codex/bin/codex.js"),
        };
        if found.python.exists() && found.openai_module.exists() && found.codex.exists() {
            return Some(found);
        }
        let how = format!(
            "the official clients are not installed in {}: .ci/run installs them \
             (python3 -m venv DIR/venv; DIR/venv/bin/pip install --require-hashes --only-binary=:all: \
             -r tests/clients/requirements.txt; npm ci in DIR/node with tests/clients/package*.json)",
            dir.display()
        );
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{how}");
        }
        eprintln!("skipped: {how}");
        None
    }

    /// Runs `plan` through `client` against the server at `base`; what the
    /// client parsed, one entry per call.
    pub fn run(&self, client: Client, base: &str, plan: &Value) -> Vec<Value> {
        let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients");
        let mut command = match client {
            Client::OpenAiPython => {
                let mut c = Command::new(&self.python);
                c.arg(scripts.join("openai_client.py"));
                c
            }
            Client::AnthropicPython => {
                let mut c = Command::new(&self.python);
                c.arg(scripts.join("anthropic_client.py"));
                c
            }
            Client::OpenAiNode => {
                let mut c = Command::new("node");
                c.arg(scripts.join("openai_client.mjs"))
                    .env("OPENAI_MODULE", &self.openai_module);
                c
            }
        };
        command.arg(base).arg(plan.to_string());
        let out = printed(command, &format!("{client:?}"));
        serde_json::from_value(out).expect("the client prints one entry per call")
    }

    /// Runs a tool-use scenario of `tests/clients/tools_client.py` (or, for
    /// `openai-loop-node`, `tools_client.mjs`) against the server at
    /// `base`; what the client parsed.
    pub fn agent(&self, scenario: &str, base: &str) -> Value {
        let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients");
        let mut command = match scenario {
            "openai-loop-node" => {
                let mut c = Command::new("node");
                c.arg(scripts.join("tools_client.mjs"))
                    .env("OPENAI_MODULE", &self.openai_module)
                    .arg(base);
                c
            }
            _ => {
                let mut c = Command::new(&self.python);
                c.arg(scripts.join("tools_client.py"))
                    .arg(base)
                    .arg(scenario);
                c
            }
        };
        // Nothing of LangChain's or the Agents SDK's may call out.
        command
            .env("LANGSMITH_TRACING", "false")
            .env("OPENAI_AGENTS_DISABLE_TRACING", "1");
        printed(command, scenario)
    }
}

impl Clients {
    /// The venv's Python, which has `cryptography` and `pyjwt`.
    pub fn python(&self) -> &Path {
        &self.python
    }

    /// Runs a Responses API scenario of `tests/clients/responses_client.py`
    /// against the server at `base`; what the client parsed.
    pub fn responses(&self, scenario: &str, base: &str) -> Value {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/responses_client.py");
        let mut command = Command::new(&self.python);
        command.arg(script).arg(base).arg(scenario);
        // Nothing of the Agents SDK may call out.
        command.env("OPENAI_AGENTS_DISABLE_TRACING", "1");
        printed(command, scenario)
    }

    /// Runs an embeddings scenario of `tests/clients/embeddings_client.py`
    /// against the server at `base`, with `key` as the API key; what the
    /// client parsed.
    pub fn embeddings(&self, scenario: &str, base: &str, key: &str) -> Value {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/embeddings_client.py");
        let mut command = Command::new(&self.python);
        command.arg(script).arg(base).arg(scenario).arg(key);
        printed(command, scenario)
    }

    /// Runs Codex CLI's `codex exec` once with `prompt`, its model provider
    /// the server at `base` over the Responses API (model `p`), in a home
    /// and a working directory of its own. Codex's hosted tools and its
    /// sub-agent tools (which this host refuses by name) are off; every
    /// request it might make elsewhere goes to a closed loopback proxy.
    pub fn codex_exec(&self, prompt: &str, base: &str) -> CodexTurn {
        let home = tempfile::tempdir().expect("a temporary directory");
        let work = tempfile::tempdir().expect("a temporary directory");
        let last = home.path().join("last-message.txt");
        let provider = format!(
            "model_providers.callai={{name=\"callai\", base_url=\"{base}/v1\", \
             env_key=\"CALLAI_TOKEN\", wire_api=\"responses\", request_max_retries=0, \
             stream_max_retries=0}}"
        );
        let out = Command::new("timeout")
            .arg("120")
            .arg("node")
            .arg(&self.codex)
            .args(["exec", "--skip-git-repo-check", "--ephemeral"])
            .args(["--disable", "multi_agent", "--disable", "goals"])
            .args([
                "-c",
                "web_search=\"disabled\"",
                "-c",
                "analytics.enabled=false",
            ])
            .args(["-c", "check_for_update_on_startup=false"])
            .args([
                "-c",
                "model_provider=\"callai\"",
                "-c",
                &provider,
                "-m",
                "p",
            ])
            .arg("-C")
            .arg(work.path())
            .arg("-o")
            .arg(&last)
            .arg(prompt)
            .env("CODEX_HOME", home.path())
            .env("CALLAI_TOKEN", "unused")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_API_KEY")
            .env("HTTPS_PROXY", "http://127.0.0.1:9")
            .env("HTTP_PROXY", "http://127.0.0.1:9")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("codex runs");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "codex exec: {stderr}\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        CodexTurn {
            last_message: std::fs::read_to_string(&last).unwrap_or_default(),
            stderr,
        }
    }
}

/// Runs a client command; the one JSON value it printed.
fn printed(mut command: Command, what: &str) -> Value {
    let out = command
        // The clients read these; none may point them elsewhere.
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env("NO_PROXY", "*")
        .output()
        .expect("the client runs");
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}
