//! This host as a conformance target: the real wasm fixture node, the
//! built-in conformance mock, an SQLite run log for the replay leg.

use super::{NODE_ID, Observation, Target, Variant};
use callai_engine::runlog::ExistingRun;
use callai_engine::wire::StructuredOutput;
use callai_engine::{Host, Journal, MockProvider, MockScript, Recording, RunLog, facet};
use callai_host::Pack;
use callai_runlog_sqlite::SqliteRunLog;
use serde_json::{Value, json};
use std::sync::Arc;

/// Runs the scenario's node on this host.
#[derive(Debug)]
pub struct HostTarget {
    pack: Pack,
    host: Host,
    rt: tokio::runtime::Runtime,
}

impl HostTarget {
    /// A target running `pack` (the `echo-attempts` fixture) on `host`; each
    /// run gets a mock of its own serving the run's script.
    pub fn new(pack: Pack, host: Host) -> std::io::Result<Self> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(Self { pack, host, rt })
    }

    fn go(
        &self,
        native: bool,
        script: &Value,
        request: &Value,
        journal: Journal,
    ) -> Option<Observation> {
        let mock = Arc::new(MockProvider::new(
            MockScript::from_json(&script.to_string()).ok()?,
            StructuredOutput::native_if(native),
        ));
        let host = self.host.with_provider("mock", mock.clone());
        let input = request.to_string();
        let out = self
            .rt
            .block_on(self.pack.run_journaled(&host, NODE_ID, &input, journal));
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
                .map(callai_engine::Event::to_json)
                .collect(),
            requests: mock.log(),
            native,
        })
    }
}

impl Target for HostTarget {
    fn facet(&self) -> Value {
        facet::document(&self.host)
    }

    fn supports_replay(&self) -> bool {
        true
    }

    fn run(&self, variant: Variant, script: &Value, request: &Value) -> Option<Observation> {
        let native = match variant {
            Variant::Default => self.host.config().mock.native,
            Variant::PromptMode => false,
        };
        self.go(native, script, request, Journal::live())
    }

    fn record_and_replay(
        &self,
        script: &Value,
        request: &Value,
    ) -> Option<(Observation, Observation)> {
        let dir = tempfile::tempdir().ok()?;
        let log: Arc<dyn RunLog> = Arc::new(SqliteRunLog::open(&dir.path().join("runs.db")).ok()?);
        let native = self.host.config().mock.native;
        let recording = Recording {
            existing: ExistingRun::Overwrite,
            ..Recording::default()
        };
        let journal = self
            .rt
            .block_on(Journal::record(
                log.clone(),
                "conformance",
                NODE_ID,
                recording,
            ))
            .ok()?;
        let recorded = self.go(native, script, request, journal)?;
        let journal = self
            .rt
            .block_on(Journal::replay(log.as_ref(), "conformance"))
            .ok()?;
        // The replay's mock has nothing to serve: any request would show.
        let replayed = self.go(native, &json!([]), request, journal)?;
        Some((recorded, replayed))
    }
}
