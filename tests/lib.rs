//! Shared helpers for the integration tests: run a wasm pack end to end
//! through the host, on a scripted mock, and collect what happened; a fake
//! provider on loopback for the HTTP adapters.

pub mod fake_server;
pub mod wire;

use callai_host::bundled::{self, test_programs};
use callai_host::{
    Engine, Event, HostConfig, Journal, MockLogEntry, MockProvider, MockScript, Pack, PackRuntime,
    Providers, RunError,
};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// One runtime for the whole test binary, as a host would have.
pub fn runtime() -> &'static PackRuntime {
    static RUNTIME: OnceLock<PackRuntime> = OnceLock::new();
    RUNTIME.get_or_init(|| PackRuntime::new().expect("wasmtime starts"))
}

/// Loads a pack by name into another runtime (one with other options).
pub fn pack_in(runtime: &PackRuntime, name: &str) -> Pack {
    match bundled::example(name) {
        Some(e) => runtime.load(e.component),
        None => runtime.load_file(std::path::Path::new(program_path(name))),
    }
    .unwrap_or_else(|e| panic!("cannot load {name}: {e:#}"))
}

/// A pack by name: a bundled example (`echo-attempts`) or a test program
/// (`trap`), compiled once per test binary.
pub fn pack(name: &str) -> Pack {
    static CACHE: OnceLock<Mutex<HashMap<String, Pack>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(p) = cache.lock().unwrap().get(name) {
        return p.clone();
    }
    let loaded = pack_in(runtime(), name);
    cache.lock().unwrap().insert(name.into(), loaded.clone());
    loaded
}

fn program_path(name: &str) -> &'static str {
    match name {
        "trap" => test_programs::TRAP,
        "typed_call" => test_programs::TYPED_CALL,
        "multi_call" => test_programs::MULTI_CALL,
        "loop_forever" => test_programs::LOOP_FOREVER,
        "alloc_forever" => test_programs::ALLOC_FOREVER,
        "call_loop" => test_programs::CALL_LOOP,
        "huge_prompt" => test_programs::HUGE_PROMPT,
        other => panic!("no test program {other}"),
    }
}

/// What one run produced.
#[derive(Debug)]
pub struct Outcome {
    /// The node's output, parsed as JSON.
    pub output: Result<Value, RunError>,
    /// Every event of the run.
    pub events: Vec<Event>,
    /// What the mock received.
    pub mock_log: Vec<MockLogEntry>,
    /// Calls the node made.
    pub calls: u32,
}

impl Outcome {
    /// The output, which must be Ok.
    pub fn ok(&self) -> &Value {
        self.output.as_ref().expect("the run should succeed")
    }

    /// The payloads of the events named `name`.
    pub fn events_named(&self, name: &str) -> Vec<Value> {
        self.events
            .iter()
            .filter(|e| e.type_name() == name)
            .map(|e| e.to_json()["payload"].clone())
            .collect()
    }
}

/// Runs `pack` once with `input` on a mock serving `script`.
pub fn run(pack: &Pack, config: HostConfig, script: &Value, input: &str) -> Outcome {
    run_journaled(pack, config, script, input, Journal::Live)
}

/// [`run`], recording into or replaying from a run log.
pub fn run_journaled(
    pack: &Pack,
    config: HostConfig,
    script: &Value,
    input: &str,
    journal: Journal,
) -> Outcome {
    let script = MockScript::from_json(&script.to_string()).expect("a valid script");
    let mock = Arc::new(MockProvider::new(script, config.mock.native));
    let engine = Engine::new(Arc::new(config), Providers::new().with(mock.clone()));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = rt.block_on(pack.run_journaled(&engine, "test.node", input, journal));
    Outcome {
        output: out
            .result
            .map(|text| serde_json::from_str(&text).expect("the node outputs JSON")),
        events: out.events,
        mock_log: mock.log(),
        calls: out.calls,
    }
}

/// Runs the conformance node `echo-attempts` with a request on a script.
pub fn echo(config: HostConfig, script: Value, request: Value) -> Outcome {
    run(
        &pack("echo-attempts"),
        config,
        &script,
        &request.to_string(),
    )
}
