//! `callai serve`: the callAI host as a long-running HTTP/JSON service.
//!
//! Workflow engines in any language run packs (`POST /v1/runs`), upload
//! them (`PUT /v1/packs/{name}`), or hand their own ctx.callAI to the engine
//! (`POST /v1/call`) and get honest `attempts` back; the OpenAI and
//! Anthropic clients people already have talk to it unchanged. Every
//! provider request is counted in `/metrics` (Prometheus) and, with an OTLP
//! endpoint set, traced in the OpenTelemetry GenAI conventions. The API is
//! the design's "contract — `callai serve`".
//!
//! This crate is the HTTP edge only: listening and connection bounds, the
//! routes and their layers (token check, access log, idempotency, error
//! shapes), the bodies, each API's request and answer shapes, and the
//! `x-callai-*` headers. What a request does is `callai-gateway`'s, whose
//! errors it maps to each API's.
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

mod banner;
mod body;
mod cache_mark;
mod call_headers;
mod check;
mod dropin;
mod error;
mod handlers;
mod headers;
mod layers;
mod listen;
mod options;
mod routes;
mod setup;
mod spans;
mod state;

pub use callai_gateway::packs::{BundledPack, MAX_UPLOADS};
pub use check::check_config;
pub use error::ApiError;
pub use layers::auth::OpenListen;
pub use options::{EnvSource, ServeError, ServerOptions};

use callai_config::Config;
use callai_gateway::Gateway;
use callai_gateway::runs::Background;
use callai_telemetry::Telemetry;
use layers::access_log::AccessLog;
use layers::auth::Auth;
use state::AppState;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

/// A bound server, ready to [`Server::run`].
#[derive(Debug)]
pub struct Server {
    state: AppState,
    /// The OTLP exporter, when spans are sent: shut down last.
    telemetry: Option<Telemetry>,
    /// The line each request writes.
    log: callai_gateway::config::LogFormat,
    listener: tokio::net::TcpListener,
    auth: Auth,
    addr: SocketAddr,
    banner: String,
}

/// After the grace period, how long stopped runs' answers have to be
/// written before the connections are closed.
const ANSWER_MARGIN: std::time::Duration = std::time::Duration::from_secs(1);

impl Server {
    /// Checks the config, builds the host (reading API keys), compiles the
    /// `--packs` folder, opens the run log, and binds the socket.
    pub async fn bind(config: Config, options: ServerOptions) -> Result<Self, ServeError> {
        let setup::Setup {
            addr,
            gateway,
            telemetry,
            runlog_url,
        } = setup::setup(&config, &options).await?;
        let gateway = Arc::new(Gateway::new(gateway));
        let auth = Auth::new(gateway.tenants.clone(), &config.server.allowed_hosts);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Listen { addr, source })?;
        let addr = listener.local_addr()?;
        let banner = banner::banner(&banner::BannerFacts {
            addr,
            config: &config,
            host: &gateway.host,
            tenants: &gateway.tenants,
            runlog: &runlog_url,
            bundled: options.bundled.len(),
            packs_dir: options.packs_dir.as_deref(),
        });
        Ok(Self {
            state: AppState {
                gateway,
                server: Arc::new(config.server.clone()),
            },
            telemetry,
            log: config.log.format,
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
        let gateway = self.state.gateway.clone();
        let grace = self.state.server.shutdown_grace();
        // The log lines' writer thread, until the server stops.
        let log = AccessLog::start(self.log)?;
        let limits = listen::ConnectionLimits::from_config(&self.state.server);
        let app = routes::router(self.state, self.auth, log.clone());
        let (stage_tx, stage_rx) = tokio::sync::watch::channel(listen::Stage::Serving);
        // Durable runs whose host died are resumed here; the log is pruned.
        let background = Background::start(&gateway);
        let serving = tokio::spawn(listen::serve(self.listener, app, limits, stage_rx));
        shutdown.await;
        background.stop();
        gateway.drain();
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
            () = tokio::time::sleep_until(deadline) => gateway.stop_all(),
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
        // Runs nobody waits on may go on until the deadline; then the
        // traces and budget spend this host holds reach the run log.
        gateway.wind_down(deadline).await;
        if let Some(t) = self.telemetry {
            // The exporter's shutdown blocks on its thread.
            let _ = tokio::task::spawn_blocking(move || t.shutdown()).await;
        }
        // Every request's line is out before the server is gone.
        log.close();
        Ok(())
    }
}
