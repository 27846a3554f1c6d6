//! The gateway: what every endpoint shares (the host a caller's call goes
//! through, the packs, the runs and call traces this host keeps, the
//! callers and their budgets, the gate in front of runs and calls, the
//! metrics, the run log), built once from its parts, and how it winds
//! down.

use crate::admission::Admission;
use crate::config::{ResponseCacheConfig, RunLogConfig, ServerConfig};
use crate::error::GatewayError;
use crate::metrics::{Metrics, MetricsObserver};
use crate::packs::PackStore;
use crate::quotas::QuotaPlan;
use crate::runs::table::RunTable;
use crate::spans::Spans;
use crate::tenants::{Holder, Tenant, Tenants};
use crate::traces::CallStore;
use callai_engine::observe::{Observers, SharedObserver};
use callai_engine::runlog::decode::Inspected;
use callai_engine::{Host, HostConfig, MockProvider, MockScript, RunKey, RunLog, RunLogError};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::task::TaskTracker;

/// What a gateway is built of: the host (its providers started, its mock
/// and prices set), the packs, the callers, the run log, where spans go,
/// and the config it keeps to.
#[derive(Debug)]
pub struct Parts {
    /// The host: config, providers (the mock's script empty), engine.
    pub host: Host,
    /// The packs.
    pub packs: PackStore,
    /// The callers, by token.
    pub tenants: Tenants,
    /// Where runs, traces, budgets and keys are kept, when anywhere.
    pub runlog: Option<Arc<dyn RunLog>>,
    /// Where spans go, when anywhere.
    pub spans: Option<Arc<dyn Spans>>,
    /// `[server]`: what the gateway keeps (runs, calls, the queue).
    pub server: ServerConfig,
    /// `[runlog]`
    pub runlog_config: RunLogConfig,
    /// `[responseCache]`
    pub response_cache: ResponseCacheConfig,
    /// `[providers.NAME.limits]`: the providers' quotas (kept in the run
    /// log).
    pub quotas: Vec<QuotaPlan>,
}

/// What every endpoint shares.
#[derive(Debug)]
pub struct Gateway {
    /// The host: config, providers (the mock's script empty), engine.
    pub host: Host,
    /// The packs.
    pub packs: Arc<PackStore>,
    /// The runs in memory.
    pub runs: Arc<RunTable>,
    /// The traces of recent calls.
    pub calls: Arc<CallStore>,
    /// The gate in front of runs and calls.
    pub admission: Admission,
    /// The counters of `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Where spans go, when anywhere.
    pub spans: Option<Arc<dyn Spans>>,
    /// Where runs are recorded, when anywhere.
    pub runlog: Option<Arc<dyn RunLog>>,
    /// Every run task, for shutdown to wait on.
    pub tasks: TaskTracker,
    /// This host's name in the leases it holds.
    pub lease_owner: String,
    /// `[runlog]`
    pub runlog_config: RunLogConfig,
    /// `[responseCache]`
    pub response_cache: ResponseCacheConfig,
    /// The callers, by token, each with its allotment of its budget.
    pub tenants: Arc<Tenants>,
    /// The metrics' observer, made once: the first of every call's.
    call_observer: SharedObserver,
}

impl Gateway {
    /// The gateway of `parts`: its metrics, its gate, its stores, and each
    /// budgeted tenant's allotment on the run log. Spawns the traces'
    /// run-log writer on the current tokio runtime.
    pub fn new(parts: Parts) -> Self {
        let Parts {
            host,
            packs,
            tenants,
            runlog,
            spans,
            server,
            runlog_config,
            response_cache,
            quotas,
        } = parts;
        let limits = &host.config().limits;
        let metrics = Arc::new(Metrics::new(host.providers().names(), tenants.names()));
        let lease_owner = crate::ids::lease_owner();
        // A reservation outlives a host that died holding it by a call's
        // wall time and a lease.
        let ttl = Duration::from_millis(limits.wall_ms) + runlog_config.lease();
        if let Some(log) = &runlog {
            let holder = Holder {
                owner: &lease_owner,
                ttl,
                metrics: metrics.clone(),
            };
            let queue = Duration::from_millis(limits.queue_ms);
            tenants.allot(log, &holder, queue);
            host.set_quotas(crate::quotas::quotas_of(&quotas, log, &holder, queue));
        }
        let calls = CallStore::of(
            server.keep_calls as usize,
            server.keep_text_bytes,
            runlog_config.keep_text,
            runlog.as_ref(),
        );
        Self {
            admission: Admission::new(
                limits.max_concurrent_runs as usize,
                server.max_queued_runs as usize,
            ),
            call_observer: Arc::new(MetricsObserver(metrics.clone())),
            host,
            packs: Arc::new(packs),
            runs: Arc::new(RunTable::new(server.keep_runs as usize)),
            calls: Arc::new(calls),
            metrics,
            spans,
            runlog,
            tasks: TaskTracker::new(),
            lease_owner,
            runlog_config,
            response_cache,
            tenants: Arc::new(tenants),
        }
    }

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

    /// `/metrics`' text, its load gauges and the targets' breakers brought
    /// up to date first.
    pub fn metrics_text(&self) -> String {
        self.report_load();
        self.metrics.set_health(&self.host.target_health());
        self.metrics.set_connections(self.host.providers());
        self.metrics.render()
    }

    /// A run from the run log, as far as its records read back (a damaged
    /// call is named, not an error on every read); not found when neither
    /// this host nor the log knows it (another tenant's run of the same id
    /// is not it).
    pub async fn load(&self, run: RunKey<'_>) -> Result<Inspected, GatewayError> {
        let unknown = || GatewayError::not_found(format!("no run {:?} on this host", run.run_id));
        let Some(log) = &self.runlog else {
            return Err(unknown());
        };
        match log.inspect(run).await {
            Ok(run) => Ok(run),
            Err(RunLogError::NoSuchRun(_)) => Err(unknown()),
            Err(e) => Err(GatewayError::internal(e.to_string())),
        }
    }

    /// Closes the door: no new run or call is admitted.
    pub fn drain(&self) {
        self.admission.drain();
    }

    /// Ends the grace period: runs and calls still going are told to stop.
    pub fn stop_all(&self) {
        self.admission.stop_all();
    }

    /// Once nothing new comes in: lets the runs nobody waits on go on until
    /// `deadline` (then stops them), then writes what this host still holds
    /// (the traces of the calls that ended, what its calls spent of each
    /// budget) to the run log.
    pub async fn wind_down(&self, deadline: tokio::time::Instant) {
        self.tasks.close();
        tokio::select! {
            () = self.tasks.wait() => {}
            () = tokio::time::sleep_until(deadline) => self.stop_all(),
        }
        self.tasks.wait().await;
        if let Err(e) = self.calls.flush().await {
            eprintln!("callai serve: at shutdown, {e}");
        }
        for limited in self.tenants.limited() {
            limited.flush().await;
        }
    }
}
