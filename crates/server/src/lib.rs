//! `callai serve`: the callAI host as a long-running HTTP/JSON service.
//!
//! Workflow engines in any language run packs (`POST /v1/runs`), upload
//! them (`PUT /v1/packs/{name}`), or hand their own ctx.callAI to the engine
//! (`POST /v1/call`) and get honest `attempts` back. Every provider request
//! is counted in `/metrics` (Prometheus) and, with an OTLP endpoint set,
//! traced in the OpenTelemetry GenAI conventions. The API is the design's
//! "contract — `callai serve`".
//!
//! ```no_run
//! use callai_host::RuntimeOptions;
//! use callai_config::Config;
//! use callai_server::{Server, ServerOptions};
//!
//! # async fn demo() -> Result<(), callai_server::ServeError> {
//! let config = Config::default();
//! let options = ServerOptions {
//!     runtime: RuntimeOptions::from_limits(&config.host.limits),
//!     ..ServerOptions::default()
//! };
//! let server = Server::bind(config, options).await?;
//! eprintln!("listening on http://{}", server.local_addr());
//! server.run(async { let _ = tokio::signal::ctrl_c().await; }).await
//! # }
//! ```

#![warn(missing_docs)]

mod access_log;
mod admission;
mod answer;
mod around;
mod auth;
mod banner;
mod body;
mod call;
mod calls;
mod check;
mod discovery;
mod dropin;
mod durable;
mod error;
mod idempotency;
#[cfg(test)]
mod layering;
mod listen;
mod metrics;
mod packs;
mod retention;
mod routes;
mod runner;
mod runs;
mod scope;
mod state;
mod tenants;

pub use auth::OpenListen;
/// The host's prices (`[providers.NAME.prices]`, `[pricing] file`): what
/// the engine prices each attempt by (`HostBuilder::prices`), in `serve`
/// and `callai run` alike.
pub use calls::PriceList;
pub use check::check_config;
pub use error::ApiError;
pub use packs::{BundledPack, MAX_UPLOADS};

use admission::Admission;
use auth::Auth;
use callai_config::{Config, OpenLog, open_runlog, parse_listen};
use callai_engine::{MockProvider, MockScript, RunLog};
use callai_host::{PackRuntime, RuntimeOptions};
use callai_telemetry::Telemetry;
use metrics::Metrics;
use packs::PackStore;
use runs::RunTable;
use state::AppState;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tenants::Tenants;
use tokio_util::task::TaskTracker;

/// Where the environment is read (the token, API keys, OTLP variables).
pub type EnvSource = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// How a server is set up, beyond its config.
#[derive(Clone)]
pub struct ServerOptions {
    /// Listen here instead of `[server] listen`.
    pub listen: Option<SocketAddr>,
    /// Every `*.wasm` here is a pack, named by its file stem.
    pub packs_dir: Option<PathBuf>,
    /// Record runs here instead of `[runlog] url`: an SQLite file or a
    /// `postgres://` URL.
    pub runlog: Option<String>,
    /// The bundled example packs.
    pub bundled: Vec<BundledPack>,
    /// The wasmtime runtime's options (pool size, compiled-component cache).
    pub runtime: RuntimeOptions,
    /// The environment: the process's own unless a test says otherwise.
    pub env: EnvSource,
    /// Whether a server with no token at all may listen beyond loopback.
    pub open: OpenListen,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            listen: None,
            packs_dir: None,
            runlog: None,
            bundled: Vec::new(),
            runtime: RuntimeOptions::default(),
            env: Arc::new(|k| std::env::var(k).ok()),
            open: OpenListen::LoopbackOnly,
        }
    }
}

impl std::fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerOptions")
            .field("listen", &self.listen)
            .field("packs_dir", &self.packs_dir)
            .field("runlog", &self.runlog)
            .finish_non_exhaustive()
    }
}

/// Why a server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The config or the options are not usable.
    #[error("{0}")]
    Setup(String),
    /// The listening socket failed.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address it could not bind.
        addr: SocketAddr,
        /// The bind error (in use, not permitted, not this machine's).
        source: std::io::Error,
    },
    /// The server stopped with an I/O error.
    #[error("the server stopped: {0}")]
    Io(#[from] std::io::Error),
}

/// A bound server, ready to [`Server::run`].
#[derive(Debug)]
pub struct Server {
    state: Arc<AppState>,
    listener: tokio::net::TcpListener,
    auth: Auth,
    addr: SocketAddr,
    banner: String,
}

/// After the grace period, how long stopped runs' answers have to be
/// written before the connections are closed.
const ANSWER_MARGIN: std::time::Duration = std::time::Duration::from_secs(1);

/// This host's name in leases: the machine's, the process id, and a
/// random part (a restarted process is another host).
fn host_id() -> String {
    let machine = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "host".into());
    let nonce = callai_engine::runlog::RunSeed::fresh().seed as u32;
    format!("{machine}-{}-{nonce:08x}", std::process::id())
}

/// The built-in mock as `[mock]` sets it up; each run or call brings its
/// own script.
fn mock(config: &Config) -> MockProvider {
    MockProvider::new(
        MockScript::from_json("[]").expect("an empty script"),
        config.host.mock.structured_output(),
    )
    .with_latency(config.host.mock.latency())
}

/// The packs: the bundled ones and `--packs DIR`'s, compiled by a wasmtime
/// runtime bounded as `[server]` and `[cache]` say.
async fn open_packs(config: &Config, options: &ServerOptions) -> Result<PackStore, ServeError> {
    let mut runtime_options = options.runtime.clone();
    runtime_options.max_function_bytes = Some(config.server.max_pack_function_bytes);
    runtime_options.max_code_bytes = Some(config.server.max_pack_code_bytes);
    runtime_options.cache_max_bytes = config.cache.max_bytes;
    let runtime = PackRuntime::with_options(&runtime_options)
        .map_err(|e| ServeError::Setup(format!("cannot start wasmtime: {e:#}")))?;
    let packs = PackStore::new(
        runtime,
        options.bundled.clone(),
        config.server.max_compiles as usize,
    );
    if let Some(dir) = &options.packs_dir {
        packs.add_dir(dir).await.map_err(ServeError::Setup)?;
    }
    Ok(packs)
}

/// The callers: the admin (with `admin_token`), the metrics scraper and
/// every tenant, their tokens read through `env`; a tenant's budget needs a
/// run log (`has_runlog`).
fn callers(
    config: &Config,
    host: &callai_engine::Host,
    admin_token: Option<&str>,
    env: &EnvSource,
    has_runlog: bool,
) -> Result<Arc<Tenants>, ServeError> {
    let setup = ServeError::Setup;
    let metrics_token = auth::server_token(
        "server.metricsTokenEnv",
        &config.server.metrics_token_env,
        |k| env(k),
    )
    .map_err(setup)?;
    let tokens = tenants::ServerTokens {
        admin: admin_token,
        metrics: metrics_token.as_deref(),
    };
    let tenants = Tenants::new(host, tokens, &config.tenants, &|k| env(k))
        .map_err(|e| setup(e.to_string()))?;
    if let Some(name) = tenants.budgeted().next()
        && !has_runlog
    {
        return Err(setup(format!(
            "tenants.{name}.budget: budgets are kept in the run log; set [runlog] url (or --runlog)"
        )));
    }
    Ok(Arc::new(tenants))
}

/// The run log `serve` keeps (`--runlog`, else `[runlog] url`; none when
/// both are empty), opened (created if missing), with its URL.
async fn server_runlog(
    config: &Config,
    options: &ServerOptions,
) -> Result<(String, Option<Arc<dyn RunLog>>), ServeError> {
    let url = options
        .runlog
        .clone()
        .unwrap_or_else(|| config.runlog.url.clone());
    if url.is_empty() {
        return Ok((url, None));
    }
    let log = open_runlog(&url, OpenLog::CreateIfMissing, &config.runlog)
        .await
        .map_err(|e| ServeError::Setup(format!("run log: {e}")))?;
    Ok((url, Some(log)))
}

impl Server {
    /// Checks the config, builds the host (reading API keys), compiles the
    /// `--packs` folder, opens the run log, and binds the socket.
    pub async fn bind(config: Config, options: ServerOptions) -> Result<Self, ServeError> {
        let setup = ServeError::Setup;
        let listen = || parse_listen(&config.server.listen);
        let addr = options.listen.map_or_else(listen, Ok);
        let addr = addr.map_err(|m| setup(format!("server.listen: {m}")))?;
        let env = options.env.clone();
        let admin_token = auth::admin_token(
            &config.server.token_env,
            addr,
            config.tenants.len(),
            options.open,
            |k| env(k),
        )
        .map_err(setup)?;
        let telemetry = Telemetry::from_config(&config.telemetry, |k| env(k))
            .map_err(|e| setup(e.to_string()))?;
        let (runlog_url, runlog) = server_runlog(&config, &options).await?;
        // Every request is priced once, by the engine, at these prices: for
        // its trace, its span, its metric and a budget in money alike.
        let prices = Arc::new(PriceList::load(&config).map_err(|e| setup(e.to_string()))?);
        let host = config
            .host_builder(&|k| env(k))
            .and_then(|builder| builder.mock(mock(&config)).prices(prices).build())
            .map_err(|e| setup(e.to_string()))?;
        let packs = open_packs(&config, &options).await?;
        let tenants = callers(
            &config,
            &host,
            admin_token.as_deref(),
            &env,
            runlog.is_some(),
        )?;
        let auth = Auth::new(tenants.clone());
        let limits = &config.host.limits;
        let metrics = Arc::new(Metrics::new(host.providers().names(), tenants.names()));
        let host_id = host_id();
        // A reservation outlives a host that died holding it by a call's
        // wall time and a lease.
        let ttl = std::time::Duration::from_millis(limits.wall_ms) + config.runlog.lease();
        if let Some(log) = &runlog {
            let holder = tenants::Holder {
                owner: &host_id,
                ttl,
                metrics: metrics.clone(),
            };
            tenants.allot(log, &holder);
        }
        let call_observer = Arc::new(metrics::MetricsObserver(metrics.clone()));
        let state = Arc::new(AppState {
            host,
            packs,
            runs: RunTable::new(config.server.keep_runs as usize),
            calls: Arc::new(calls::CallStore::of(&config, runlog.as_ref())),
            log: config.log.format,
            admission: Admission::new(
                limits.max_concurrent_runs as usize,
                config.server.max_queued_runs as usize,
            ),
            metrics,
            telemetry,
            runlog,
            tasks: TaskTracker::new(),
            host_id,
            server: config.server.clone(),
            runlog_config: config.runlog.clone(),
            tenants,
            call_observer,
        });
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Listen { addr, source })?;
        let addr = listener.local_addr()?;
        let banner = banner::banner(&banner::BannerFacts {
            addr,
            config: &config,
            host: &state.host,
            tenants: &state.tenants,
            runlog: &runlog_url,
            bundled: options.bundled.len(),
            packs_dir: options.packs_dir.as_deref(),
        });
        Ok(Self {
            state,
            listener,
            auth,
            addr,
            banner,
        })
    }

    /// The address it listens on (the real port when `:0` was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// What it serves, in a few lines for its operator: the first is
    /// `listening on http://ADDR`, then its providers, who may call it
    /// (and whether no token is set), its run log and its packs.
    pub fn banner(&self) -> &str {
        &self.banner
    }

    /// Serves until `shutdown` completes; then stops accepting work, lets
    /// runs in flight finish for up to `[server] shutdownGraceMs`, fails the
    /// rest cleanly, closes every connection still open, and returns.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let state = self.state.clone();
        let grace = state.server.shutdown_grace();
        // The log lines' writer thread, until the server stops.
        let log = access_log::AccessLog::start(state.log)?;
        let app = routes::router(state.clone(), self.auth, log.clone());
        let limits = listen::ConnectionLimits::from_config(&state.server);
        let (stage_tx, stage_rx) = tokio::sync::watch::channel(listen::Stage::Serving);
        // Durable runs whose host died are resumed here.
        let takeover = tokio::spawn(durable::take_over(state.clone()));
        let pruning = tokio::spawn(retention::prune_periodically(state.clone()));
        let serving = tokio::spawn(listen::serve(self.listener, app, limits, stage_rx));
        shutdown.await;
        takeover.abort();
        pruning.abort();
        state.admission.drain();
        stage_tx.send_replace(listen::Stage::Draining);
        let deadline = tokio::time::Instant::now() + grace;
        // Handlers still waiting on runs answer once their runs end or are
        // stopped at the deadline; then their answers get a moment to be
        // written before every connection left is closed.
        let serving_done = async {
            let _ = serving.await;
        };
        tokio::pin!(serving_done);
        let mut serving_ended = false;
        tokio::select! {
            () = &mut serving_done => serving_ended = true,
            () = tokio::time::sleep_until(deadline) => state.admission.stop_all(),
        }
        if !serving_ended {
            tokio::select! {
                () = &mut serving_done => {}
                () = tokio::time::sleep(ANSWER_MARGIN) => {
                    stage_tx.send_replace(listen::Stage::Closing);
                    serving_done.await;
                }
            }
        }
        // Runs nobody waits on may go on until the deadline.
        state.tasks.close();
        tokio::select! {
            () = state.tasks.wait() => {}
            () = tokio::time::sleep_until(deadline) => state.admission.stop_all(),
        }
        state.tasks.wait().await;
        // The traces of the calls that ended reach the run log.
        if let Err(e) = state.calls.flush().await {
            eprintln!("callai serve: at shutdown, {e}");
        }
        // What this host's calls spent reaches the database before it goes.
        for allotment in state.tenants.allotments() {
            allotment.flush().await;
        }
        if let Some(t) = state.telemetry.clone() {
            // The exporter's shutdown blocks on its thread.
            let _ = tokio::task::spawn_blocking(move || t.shutdown()).await;
        }
        // Every request's line is out before the server is gone.
        log.close();
        Ok(())
    }
}
