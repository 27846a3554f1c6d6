//! This host as a conformance target: the real wasm fixture node, the
//! built-in conformance mock, the SQLite run log for the replay leg.

use super::{NODE_ID, Observation, Target, Variant};
use crate::config::HostConfig;
use crate::engine::Engine;
use crate::mock::{MockProvider, MockScript};
use crate::provider::Providers;
use crate::runlog::{Journal, RunLog, SqliteRunLog};
use crate::wasm::{Pack, RunOutput};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// Runs the scenario's node on this host.
#[derive(Debug)]
pub struct HostTarget {
    pack: Pack,
    config: HostConfig,
    rt: tokio::runtime::Runtime,
}

impl HostTarget {
    /// A target running `pack` (the `echo-attempts` fixture) under `config`.
    pub fn new(pack: Pack, config: HostConfig) -> std::io::Result<Self> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(Self { pack, config, rt })
    }

    fn go(
        &self,
        config: HostConfig,
        script: &Value,
        request: &Value,
        journal: Journal,
    ) -> Option<Observation> {
        let script_text = script.to_string();
        let mock = Arc::new(MockProvider::new(
            MockScript::from_json(&script_text).ok()?,
            config.mock.native,
        ));
        let engine = Engine::new(Arc::new(config), Providers::new().with(mock.clone()));
        let input = request.to_string();
        let out: RunOutput = self
            .rt
            .block_on(self.pack.run_journaled(&engine, NODE_ID, &input, journal));
        let output = match out.result {
            Ok(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
            Err(e) => json!({"runError": e.to_json()}),
        };
        Some(Observation {
            script: script.clone(),
            request: request.clone(),
            output,
            events: out
                .events
                .iter()
                .map(crate::events::Event::to_json)
                .collect(),
            requests: mock.log(),
        })
    }
}

/// A run log file of its own, removed when dropped.
struct TempLog(PathBuf);

impl TempLog {
    fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Self(std::env::temp_dir().join(format!("callai-conformance-{}-{n}.db", std::process::id())))
    }
}

impl Drop for TempLog {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut p = self.0.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Target for HostTarget {
    fn facet(&self) -> Value {
        crate::facet::document(&self.config)
    }

    fn supports_replay(&self) -> bool {
        true
    }

    fn run(&self, variant: Variant, script: &Value, request: &Value) -> Option<Observation> {
        let mut config = self.config.clone();
        if variant == Variant::PromptMode {
            config.mock.native = false;
        }
        self.go(config, script, request, Journal::Live)
    }

    fn record_and_replay(
        &self,
        script: &Value,
        request: &Value,
    ) -> Option<(Observation, Observation)> {
        let file = TempLog::new();
        let log: Arc<dyn RunLog> = Arc::new(SqliteRunLog::open(&file.0).ok()?);
        let journal = Journal::record(log.clone(), "conformance", NODE_ID, true).ok()?;
        let recorded = self.go(self.config.clone(), script, request, journal)?;
        let journal = Journal::replay(log.as_ref(), "conformance").ok()?;
        // The replay's mock has nothing to serve: any request would show.
        let replayed = self.go(self.config.clone(), &json!([]), request, journal)?;
        Some((recorded, replayed))
    }
}
