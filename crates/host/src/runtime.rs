//! The component runtime: compile a pack once (through the on-disk cache),
//! keep it pre-instantiated, and run a node on a fresh instance per run from
//! the pooling allocator, within the run's limits. The guest gets no
//! preopened directories, no network and no environment variables.

use crate::bindings::{PackNode, PackNodePre};
use crate::cache;
use crate::epoch::EpochTicker;
use crate::function_cache::FunctionCache;
use crate::limits::RunLimiter;
use crate::load::{LoadError, check_preamble, pack_code};
use crate::view::{CallAiCtx, CallAiView, add_to_linker};
use callai_engine::Host;
use callai_engine::config::Limits;
use callai_engine::events::{Event, EventLog};
use callai_engine::observe::SharedObserver;
use callai_engine::{Journal, RunError, RunSession};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{
    Config, Enabled, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap,
    UpdateDeadline,
};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// The store data of one run.
pub(super) struct RunState {
    wasi: WasiCtx,
    table: ResourceTable,
    callai: CallAiCtx,
    pub(super) limiter: RunLimiter,
}

impl WasiView for RunState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
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

/// How one run is made, beyond its input.
#[derive(Debug, Default)]
pub struct RunOptions {
    /// Live (the default), recording, replaying or resuming.
    pub journal: Journal,
    /// Told of every call served live and of each provider request.
    pub observer: Option<SharedObserver>,
    /// Where the run's events go, for a caller that watches them as the run
    /// goes on; a fresh log when absent.
    pub events: Option<EventLog>,
    /// The budget every ctx.callAI of the run is held to: each reserves its
    /// worst case before it sends anything and is charged what it spent.
    pub budget: Option<callai_engine::budget::SharedBudget>,
}

/// How a [`PackRuntime`] is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeOptions {
    /// Runs at once (instance slots in the pool); more wait for a slot.
    pub max_concurrent_runs: u32,
    /// The largest linear memory a run may have.
    pub max_memory_bytes: u64,
    /// Where compiled components are cached; `None`: no cache.
    pub cache_dir: Option<PathBuf>,
    /// The most the cache may hold on disk; past it the least recently
    /// used entries are removed (`[cache] maxBytes`).
    pub cache_max_bytes: u64,
    /// A component with a function body larger than this is refused before
    /// it is compiled; `None`: any size (`[server] maxPackFunctionBytes`).
    pub max_function_bytes: Option<u64>,
    /// A component with more code than this in all is refused before it is
    /// compiled; `None`: any size (`[server] maxPackCodeBytes`).
    pub max_code_bytes: Option<u64>,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self::from_limits(&Limits::default())
    }
}

impl RuntimeOptions {
    /// Options sized for `limits`, without a cache.
    pub fn from_limits(limits: &Limits) -> Self {
        Self {
            max_concurrent_runs: limits.max_concurrent_runs,
            max_memory_bytes: limits.memory_bytes,
            cache_dir: None,
            cache_max_bytes: DEFAULT_CACHE_MAX_BYTES,
            max_function_bytes: None,
            max_code_bytes: None,
        }
    }

    /// With the compiled-component cache in `dir`.
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }
}

/// The default bound on the compiled-component cache: 1 GiB.
pub const DEFAULT_CACHE_MAX_BYTES: u64 = 1 << 30;

/// A wasmtime engine and linker set up for pack nodes. Build one per process.
#[derive(Clone)]
pub struct PackRuntime {
    engine: wasmtime::Engine,
    linker: Linker<RunState>,
    slots: Arc<Semaphore>,
    ticker: EpochTicker,
    cache_dir: Option<PathBuf>,
    cache_max_bytes: u64,
    max_function_bytes: Option<u64>,
    max_code_bytes: Option<u64>,
}

impl std::fmt::Debug for PackRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackRuntime").finish_non_exhaustive()
    }
}

impl PackRuntime {
    /// A runtime with the default options.
    pub fn new() -> wasmtime::Result<Self> {
        Self::with_options(&RuntimeOptions::default())
    }

    /// A runtime: async, fuel and epochs on, the pooling allocator sized for
    /// `options`, and the WASI and callAI imports linked.
    pub fn with_options(options: &RuntimeOptions) -> wasmtime::Result<Self> {
        let n = options.max_concurrent_runs.max(1);
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(n)
            .total_core_instances(n.saturating_mul(8))
            .total_memories(n.saturating_mul(2))
            .total_tables(n.saturating_mul(8))
            .total_stacks(n)
            .max_memories_per_component(4)
            .max_tables_per_component(8)
            .max_memory_size(usize::try_from(options.max_memory_bytes).unwrap_or(usize::MAX))
            // Freed slots are decommitted in batches: each decommit is a
            // madvise whose TLB shootdown interrupts every worker thread.
            .decommit_batch_size(32)
            // Where the kernel can say which pages a run dirtied (Linux 6.7+),
            // reset only those and keep the slot resident: no madvise at all.
            .pagemap_scan(Enabled::Auto)
            .linear_memory_keep_resident(2 << 20)
            .table_keep_resident(64 << 10);
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .consume_fuel(true)
            .epoch_interruption(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        // Each function compiled once is reused by the next compile that
        // holds it (a pack rebuilt after an edit); a cache that cannot be
        // opened only costs compiles their speed.
        if let Some(functions) = options
            .cache_dir
            .as_deref()
            .and_then(|dir| FunctionCache::open(dir).ok())
        {
            config.enable_incremental_compilation(Arc::new(functions))?;
        }
        let engine = wasmtime::Engine::new(&config)?;
        let ticker = EpochTicker::start(&engine)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        add_to_linker(&mut linker, |s: &mut RunState| CallAiView {
            ctx: &mut s.callai,
        })?;
        Ok(Self {
            engine,
            linker,
            slots: Arc::new(Semaphore::new(n as usize)),
            ticker,
            cache_dir: options.cache_dir.clone(),
            cache_max_bytes: options.cache_max_bytes,
            max_function_bytes: options.max_function_bytes,
            max_code_bytes: options.max_code_bytes,
        })
    }

    /// Compiles (or loads from the cache) and pre-instantiates a component.
    /// A component that is refused (not a pack, or too large a function)
    /// is never stored in the cache.
    pub fn load(&self, bytes: &[u8]) -> Result<Pack, LoadError> {
        self.check(bytes)?;
        let Some(dir) = &self.cache_dir else {
            let component = Component::new(&self.engine, bytes).map_err(LoadError::Compile)?;
            return self.pre_instantiate(&component);
        };
        let source = cache::source_of(bytes);
        if let Some(component) = cache::lookup(&self.engine, &source, dir)
            && let Ok(pack) = self.pre_instantiate(&component)
        {
            return Ok(pack);
        }
        let component = Component::new(&self.engine, bytes).map_err(LoadError::Compile)?;
        let pack = self.pre_instantiate(&component)?;
        // A cache that cannot be written only costs the next load its speed.
        let _ = cache::store(&self.engine, &component, &source, dir, self.cache_max_bytes);
        Ok(pack)
    }

    /// What can be said of `bytes` without compiling them: a component (not
    /// a core module, not another file) of a pack node's shape (it imports
    /// only WASI and openwop:callai, and exports `run`), whose largest
    /// function body is within `max_function_bytes` and whose code in all
    /// is within `max_code_bytes`. Linear in the bytes.
    pub fn check(&self, bytes: &[u8]) -> Result<(), LoadError> {
        check_preamble(bytes)?;
        let code = pack_code(bytes)?;
        if let Some(limit) = self.max_function_bytes.filter(|l| code.largest > *l) {
            return Err(LoadError::FunctionTooLarge {
                largest: code.largest,
                limit,
                key: "server.maxPackFunctionBytes",
            });
        }
        if let Some(limit) = self.max_code_bytes.filter(|l| code.total > *l) {
            return Err(LoadError::CodeTooLarge {
                total: code.total,
                limit,
                key: "server.maxPackCodeBytes",
            });
        }
        match code.not_a_pack {
            Some(why) => Err(LoadError::NotAPackShape(why)),
            None => Ok(()),
        }
    }

    /// [`PackRuntime::load`] from a file.
    pub fn load_file(&self, path: &Path) -> Result<Pack, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
            path: path.to_owned(),
            source,
        })?;
        self.load(&bytes)
    }

    /// Whether it keeps compiled components in a cache on disk.
    pub fn has_cache(&self) -> bool {
        self.cache_dir.is_some()
    }

    /// Whether the compiled-component cache holds `bytes`' compilation for
    /// this engine.
    pub fn is_cached(&self, bytes: &[u8]) -> bool {
        self.cache_dir
            .as_deref()
            .is_some_and(|dir| cache::contains(&self.engine, &cache::source_of(bytes), dir))
    }

    fn pre_instantiate(&self, component: &Component) -> Result<Pack, LoadError> {
        let pre = self
            .linker
            .instantiate_pre(component)
            .and_then(PackNodePre::new)
            .map_err(LoadError::NotAPack)?;
        Ok(Pack {
            engine: self.engine.clone(),
            pre,
            slots: self.slots.clone(),
            ticker: self.ticker.clone(),
        })
    }
}

/// A compiled, pre-instantiated pack: cheap to run many times, at once.
#[derive(Clone)]
pub struct Pack {
    engine: wasmtime::Engine,
    pre: PackNodePre<RunState>,
    slots: Arc<Semaphore>,
    ticker: EpochTicker,
}

impl std::fmt::Debug for Pack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pack").finish_non_exhaustive()
    }
}

impl Pack {
    /// Runs the node once on a fresh instance. A pack that traps or hits a
    /// limit fails this run only.
    pub async fn run(&self, host: &Host, node_id: &str, input: &str) -> RunOutput {
        self.run_journaled(host, node_id, input, Journal::live())
            .await
    }

    /// [`Pack::run`], recording the run's calls into a run log or serving
    /// them from one, as `journal` says.
    pub async fn run_journaled(
        &self,
        host: &Host,
        node_id: &str,
        input: &str,
        journal: Journal,
    ) -> RunOutput {
        let options = RunOptions {
            journal,
            ..RunOptions::default()
        };
        self.run_with(host, node_id, input, options).await
    }

    /// [`Pack::run`], with `options`: a journal, an observer of its calls, a
    /// shared event log to watch the run through.
    pub async fn run_with(
        &self,
        host: &Host,
        node_id: &str,
        input: &str,
        options: RunOptions,
    ) -> RunOutput {
        let limits = host.config().limits;
        let RunOptions {
            journal,
            observer,
            events,
            budget,
        } = options;
        let mut session = RunSession::new(host.clone(), node_id, journal)
            .with_deadline(tokio::time::Instant::now() + Duration::from_millis(limits.wall_ms));
        if let Some(observer) = observer {
            session = session.with_observer(observer);
        }
        if let Some(events) = events {
            session = session.with_events(events);
        }
        if let Some(budget) = budget {
            session = session.with_budget(budget);
        }
        // Wait for an instance slot rather than fail when the pool is full.
        let _slot = self
            .slots
            .acquire()
            .await
            .expect("the slot semaphore is never closed");
        let stdio = crate::stdio::PackStdio::new(limits.max_log_bytes);
        let state = RunState {
            wasi: crate::clocks::sandbox(session.seed(), &stdio),
            table: ResourceTable::new(),
            callai: CallAiCtx::with_session(session).with_stdio(stdio),
            limiter: RunLimiter::new(&limits),
        };
        // The epoch ticks while this run's store lives, and not when none does.
        let _ticking = self.ticker.hold();
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.set_fuel(limits.fuel).expect("fuel is enabled");
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|mut ctx| {
            if ctx.data_mut().limiter.past_deadline() {
                Err(wasmtime::Error::msg("the run's wall-clock limit passed"))
            } else {
                // Yield each tick so a busy pack never starves other runs.
                Ok(UpdateDeadline::Yield(1))
            }
        });
        // The epoch deadline stops wasm that computes; this stops a run that
        // waits (on a provider) past its wall-clock limit.
        let wall = Duration::from_millis(limits.wall_ms);
        let result = match tokio::time::timeout(wall, self.call(&mut store, input)).await {
            Ok(result) => result,
            Err(_) => {
                store.data_mut().limiter.record_wall();
                Err(RunError::Trap("the run's wall-clock limit passed".into()))
            }
        };
        let state = store.data_mut();
        // A limit the host recorded names itself, over the trap the guest saw.
        let result = match (result, state.limiter.hit.take()) {
            (Err(_), Some(hit)) => Err(RunError::Limit {
                key: hit.key,
                message: hit.message,
            }),
            (result, _) => result,
        };
        let calls = state.callai.calls();
        let (result, events) = state.callai.finish(result).await;
        RunOutput {
            result,
            events,
            calls,
        }
    }

    async fn call(&self, store: &mut Store<RunState>, input: &str) -> Result<String, RunError> {
        let trap = |e: wasmtime::Error| match e.downcast_ref::<Trap>() {
            Some(Trap::OutOfFuel) => RunError::Limit {
                key: "limits.fuel",
                message: "the pack ran out of fuel (too much computation)".into(),
            },
            _ => RunError::Trap(format!("{e:#}")),
        };
        let instance: PackNode = self
            .pre
            .instantiate_async(&mut *store)
            .await
            .map_err(trap)?;
        match instance.call_run(&mut *store, input).await {
            Ok(Ok(output)) => Ok(output),
            Ok(Err(message)) => Err(RunError::Node(message)),
            Err(e) => Err(trap(e)),
        }
    }
}
