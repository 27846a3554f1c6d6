//! Shared helpers for the integration tests: run a wasm pack end to end
//! through the host, on a scripted mock, and collect what happened; a fake
//! provider on loopback for the HTTP adapters.

pub mod bookai;
pub mod clients;
pub mod components;
pub mod fake_server;
pub mod otlp;
pub mod paced;
pub mod pg;
pub mod process;
pub mod runlog_backends;
pub mod schemas;
pub mod serve;
pub mod tls_fake;
pub mod vertex_fake;
pub mod wire;

use callai_engine::{
    BoxFuture, Event, Host, HostConfig, Journal, MockLogEntry, MockProvider, MockScript, RunError,
    Sleeper,
};
use callai_host::{Pack, PackRuntime, RuntimeOptions};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// A sleeper that records each backoff wait the engine asks for and
/// returns at once: tests see the waits without waiting them out.
#[derive(Debug, Default)]
pub struct NoWait(Mutex<Vec<Duration>>);

impl NoWait {
    /// The waits asked for so far.
    pub fn waits(&self) -> Vec<Duration> {
        self.0.lock().unwrap().clone()
    }
}

impl Sleeper for NoWait {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        self.0.lock().unwrap().push(duration);
        Box::pin(async {})
    }
}

/// A folder under cargo's target directory that outlives a test run (cargo
/// gives integration tests `CARGO_TARGET_TMPDIR`, but not this library):
/// the test binary is `<target>/<profile>/deps/NAME`.
pub fn target_tmp(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let target = exe.ancestors().nth(3).map(std::path::Path::to_path_buf);
    target
        .unwrap_or_else(std::env::temp_dir)
        .join("tmp")
        .join(name)
}

/// The tests' `CALLAI_CACHE_DIR`: a folder under the target directory that
/// outlives a run. The runtime in this process and every `callai` the tests
/// start compile into its `components` (so a component, and each function
/// of one, compiles once for them all, and a rerun loads them), and none
/// writes to the user's own cache.
pub fn cache_dir() -> std::path::PathBuf {
    target_tmp("callai-cache")
}

/// A compiled-component cache of its own, `parent/cache` (what
/// `CALLAI_CACHE_DIR` would name), whose function cache is the tests'
/// shared one: a `callai` given it writes the component it compiles there
/// alone, and the functions that component shares with the repository's
/// packs (a JavaScript or Python engine) are not compiled again, as on a
/// machine where `callai` already compiled a pack.
pub fn cache_sharing_functions(parent: &std::path::Path) -> std::path::PathBuf {
    let cache = parent.join("cache");
    let own = cache.join("components");
    std::fs::create_dir_all(&own).expect("a cache folder");
    let shared = cache_dir().join("components");
    // The shared cache's key signs its functions; without one yet (nothing
    // compiled), this cache starts empty.
    if std::fs::copy(shared.join("cache.key"), own.join("cache.key")).is_ok() {
        std::fs::create_dir_all(shared.join("functions")).expect("the shared function cache");
        std::os::unix::fs::symlink(shared.join("functions"), own.join("functions"))
            .expect("a link to the shared function cache");
    }
    cache
}

/// How many compiled components the cache `CALLAI_CACHE_DIR` = `cache`
/// holds.
pub fn compiled_components(cache: &std::path::Path) -> usize {
    std::fs::read_dir(cache.join("components"))
        .expect("the cache's components folder")
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        .count()
}

/// The `callai` binary at `exe`, as a command whose compiled-component
/// cache is the tests' own ([`cache_dir`]).
pub fn callai_command(exe: &str) -> std::process::Command {
    let mut command = std::process::Command::new(exe);
    command.env("CALLAI_CACHE_DIR", cache_dir());
    command
}

/// One runtime for the whole test binary, as a host would have, with a
/// compiled-component cache that outlives the run: a rerun after a change
/// that leaves the packs as they were loads them instead of compiling.
pub fn runtime() -> &'static PackRuntime {
    static RUNTIME: OnceLock<PackRuntime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let options = RuntimeOptions::default().cache_dir(cache_dir().join("components"));
        PackRuntime::with_options(&options).expect("wasmtime starts")
    })
}

/// Loads a pack by name into another runtime (one with other options).
pub fn pack_in(runtime: &PackRuntime, name: &str) -> Pack {
    match callai_examples::example(name) {
        Some(e) => runtime.load(&e.component()),
        None => {
            let path = callai_test_programs_artifacts::path(name)
                .unwrap_or_else(|| panic!("no example or test program {name}"));
            runtime.load_file(std::path::Path::new(path))
        }
    }
    .unwrap_or_else(|e| panic!("cannot load {name}: {e:#}"))
}

/// A pack by name: a bundled example (`echo-attempts`) or a test program
/// (`trap`), compiled once per test binary.
/// Tests that ask for one pack at once wait for one compile of it.
pub fn pack(name: &str) -> Pack {
    type Once = Arc<OnceLock<Pack>>;
    static CACHE: OnceLock<Mutex<HashMap<String, Once>>> = OnceLock::new();
    let once = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(name.into())
        .or_default()
        .clone();
    once.get_or_init(|| pack_in(runtime(), name)).clone()
}

/// A host of `config` whose mock serves `script`; the mock, to read its log.
pub fn host_with_script(config: HostConfig, script: &Value) -> (Host, Arc<MockProvider>) {
    let script = MockScript::from_json(&script.to_string()).expect("a valid script");
    let mock = Arc::new(
        MockProvider::new(script, config.mock.structured_output())
            .with_latency(config.mock.latency()),
    );
    let host = Host::builder(config)
        .sleeper(Arc::new(NoWait::default()))
        .build()
        .expect("the host starts");
    (host.with_provider("mock", mock.clone()), mock)
}

/// A current-thread tokio runtime for a synchronous test.
pub fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
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
    run_journaled(pack, config, script, input, Journal::live())
}

/// [`run`], recording into or replaying from a run log.
pub fn run_journaled(
    pack: &Pack,
    config: HostConfig,
    script: &Value,
    input: &str,
    journal: Journal,
) -> Outcome {
    let (host, mock) = host_with_script(config, script);
    let out = block_on(pack.run_journaled(&host, "test.node", input, journal));
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
