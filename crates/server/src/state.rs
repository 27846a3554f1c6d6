//! What every handler shares, and the few things it answers itself: the
//! host a caller's call goes through, the observers every call gets, the
//! load gauges, a run read back from the run log. It depends on the parts
//! it holds and on nothing that handles a request.

use crate::admission::Admission;
use crate::calls::CallStore;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::packs::PackStore;
use crate::runs::RunTable;
use crate::tenants::{Tenant, Tenants};
use callai_config::RunLogConfig;
use callai_config::ServerConfig;
use callai_engine::observe::{Observers, SharedObserver};
use callai_engine::runlog::decode::Inspected;
use callai_engine::{Host, HostConfig, MockProvider, MockScript, RunKey, RunLog, RunLogError};
use callai_telemetry::Telemetry;
use std::sync::Arc;
use tokio_util::task::TaskTracker;

/// What every handler shares.
#[derive(Debug)]
pub struct AppState {
    /// The host: config, providers (the mock's script empty), engine.
    pub host: Host,
    /// The packs.
    pub packs: PackStore,
    /// The runs in memory.
    pub runs: RunTable,
    /// The traces of recent calls.
    pub calls: Arc<CallStore>,
    /// The line each request writes on stderr.
    pub log: callai_config::LogFormat,
    /// The gate in front of runs and calls.
    pub admission: Admission,
    /// The counters of `/metrics`.
    pub metrics: Arc<Metrics>,
    /// The trace pipeline, when one is set.
    pub telemetry: Option<Telemetry>,
    /// Where runs are recorded, when anywhere.
    pub runlog: Option<Arc<dyn RunLog>>,
    /// Every run task, for shutdown to wait on.
    pub tasks: TaskTracker,
    /// This host's name in the leases it holds.
    pub host_id: String,
    /// `[server]`
    pub server: ServerConfig,
    /// `[runlog]`
    pub runlog_config: RunLogConfig,
    /// The callers, by token, each with its allotment of its budget.
    pub tenants: Arc<Tenants>,
    /// The metrics' observer, made once: the first of every call's.
    pub call_observer: SharedObserver,
}

impl AppState {
    /// The engine's config.
    pub fn config(&self) -> &HostConfig {
        self.host.config()
    }

    /// The host for one run or call of `tenant`: its policy, and its mock
    /// serving `script` (the run's, or its pack's own), or, with none, the
    /// unscripted mock `callai run` gives a component without a script.
    pub fn host_for(&self, tenant: &Tenant, script: Option<MockScript>) -> Host {
        let config = &self.config().mock;
        let structured = config.structured_output();
        let mock = match script {
            Some(script) => MockProvider::new(script, structured),
            None => MockProvider::unscripted(structured),
        };
        let mock = mock.with_latency(config.latency());
        tenant.host.with_provider("mock", Arc::new(mock))
    }

    /// The observers every call gets: metrics, and then whatever is passed.
    pub fn observers(&self) -> Observers {
        Observers::new().with(self.call_observer.clone())
    }

    /// Updates the load gauges.
    pub fn report_load(&self) {
        let running = self.admission.running();
        let queued = self.admission.admitted().saturating_sub(running);
        self.metrics.set_load(running, queued);
        let compiles = self.packs.compile_load();
        self.metrics.set_compiles(
            compiles.running(),
            compiles.waiting(),
            self.packs.compiled_count(),
        );
    }

    /// A run from the run log, as far as its records read back (a damaged
    /// call is named, not a `500` on every read); 404 when neither this
    /// host nor the log knows it (another tenant's run of the same id is
    /// not it).
    pub async fn load(&self, run: RunKey<'_>) -> Result<Inspected, ApiError> {
        let unknown = || ApiError::not_found(format!("no run {:?} on this host", run.run_id));
        let Some(log) = &self.runlog else {
            return Err(unknown());
        };
        match log.inspect(run).await {
            Ok(run) => Ok(run),
            Err(RunLogError::NoSuchRun(_)) => Err(unknown()),
            Err(e) => Err(ApiError::internal(e.to_string())),
        }
    }
}
