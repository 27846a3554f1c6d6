//! The component runtime: compile a pack once, keep it pre-instantiated, run
//! a node on a fresh instance per run. The guest gets no preopened
//! directories, no network and no environment variables.

use super::bindings::{PackNode, PackNodePre};
use super::view::{CallAiCtx, CallAiView, add_to_linker};
use crate::engine::Engine;
use crate::events::{Event, EventLog};
use crate::runlog::Journal;
use std::path::Path;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// The store data of one run.
struct RunState {
    wasi: WasiCtx,
    table: ResourceTable,
    callai: CallAiCtx,
}

impl WasiView for RunState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Why a run produced no output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// The node returned `Err`.
    #[error("the node failed: {0}")]
    Node(String),
    /// The pack trapped (panic, `unreachable`, out-of-bounds access...).
    #[error("the pack trapped: {0}")]
    Trap(String),
    /// Replay met a call other than the recorded one; the run was stopped.
    #[error("replay diverged: {0}")]
    ReplayDiverged(String),
    /// The run log could not record the run; the run was stopped.
    #[error("{0}")]
    RunLog(String),
}

impl RunError {
    /// The error as JSON, as `callai run` prints it.
    pub fn to_json(&self) -> serde_json::Value {
        let (kind, message) = match self {
            Self::Node(m) => ("node", m),
            Self::Trap(m) => ("trap", m),
            Self::ReplayDiverged(m) => ("replay_diverged", m),
            Self::RunLog(m) => ("run_log", m),
        };
        serde_json::json!({"error": {"kind": kind, "message": message}})
    }
}

/// What one run left behind besides its output.
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// The node's result.
    pub result: Result<String, RunError>,
    /// Every event of the run, in order.
    pub events: Vec<Event>,
    /// The ctx.callAI calls the node made.
    pub calls: u32,
}

/// A wasmtime engine and linker set up for pack nodes. Build one per process.
#[derive(Clone)]
pub struct PackRuntime {
    engine: wasmtime::Engine,
    linker: Linker<RunState>,
}

impl std::fmt::Debug for PackRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackRuntime").finish_non_exhaustive()
    }
}

impl PackRuntime {
    /// A runtime with async support and the WASI and callAI imports linked.
    pub fn new() -> wasmtime::Result<Self> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        let engine = wasmtime::Engine::new(&config)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        add_to_linker(&mut linker, |s: &mut RunState| CallAiView {
            ctx: &mut s.callai,
        })?;
        Ok(Self { engine, linker })
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &wasmtime::Engine {
        &self.engine
    }

    /// Compiles and pre-instantiates a pack component.
    pub fn load(&self, bytes: &[u8]) -> wasmtime::Result<Pack> {
        let component = Component::new(&self.engine, bytes)?;
        self.pre_instantiate(&component)
    }

    /// [`PackRuntime::load`] from a file.
    pub fn load_file(&self, path: &Path) -> wasmtime::Result<Pack> {
        let component = Component::from_file(&self.engine, path)?;
        self.pre_instantiate(&component)
    }

    fn pre_instantiate(&self, component: &Component) -> wasmtime::Result<Pack> {
        let pre = self.linker.instantiate_pre(component)?;
        Ok(Pack {
            engine: self.engine.clone(),
            pre: PackNodePre::new(pre)?,
        })
    }
}

/// A compiled, pre-instantiated pack: cheap to run many times.
#[derive(Clone)]
pub struct Pack {
    engine: wasmtime::Engine,
    pre: PackNodePre<RunState>,
}

impl std::fmt::Debug for Pack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pack").finish_non_exhaustive()
    }
}

impl Pack {
    /// Runs the node once on a fresh instance. A trapping pack yields
    /// `RunError::Trap` for this run only.
    pub async fn run(&self, engine: &Engine, node_id: &str, input: &str) -> RunOutput {
        self.run_journaled(engine, node_id, input, Journal::Live)
            .await
    }

    /// [`Pack::run`], recording the run's calls into a run log or serving
    /// them from one, as `journal` says.
    pub async fn run_journaled(
        &self,
        engine: &Engine,
        node_id: &str,
        input: &str,
        journal: Journal,
    ) -> RunOutput {
        let events = EventLog::new();
        let state = RunState {
            // Nothing granted: no preopens, no env, no args, no sockets,
            // stdio closed.
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
            callai: CallAiCtx::new(engine.clone(), node_id, events.clone()).with_journal(journal),
        };
        let mut store = Store::new(&self.engine, state);
        let result = self.call(&mut store, input).await;
        let result = store.data_mut().callai.settle(result);
        RunOutput {
            result,
            events: events.take(),
            calls: store.data().callai.calls(),
        }
    }

    async fn call(&self, store: &mut Store<RunState>, input: &str) -> Result<String, RunError> {
        let instance: PackNode = self
            .pre
            .instantiate_async(&mut *store)
            .await
            .map_err(|e| RunError::Trap(format!("{e:#}")))?;
        match instance.call_run(&mut *store, input).await {
            Ok(Ok(output)) => Ok(output),
            Ok(Err(message)) => Err(RunError::Node(message)),
            Err(trap) => Err(RunError::Trap(format!("{trap:#}"))),
        }
    }
}
