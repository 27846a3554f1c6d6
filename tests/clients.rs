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
        };
        if found.python.exists() && found.openai_module.exists() {
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
