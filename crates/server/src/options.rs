//! How a server is set up beyond its config, and why it could not start.

use crate::layers::auth::OpenListen;
use callai_gateway::packs::BundledPack;
use callai_host::RuntimeOptions;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

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
