//! The families `/metrics` shows and the server's [`Metrics`] that holds
//! them: registered once, in the order they are listed, every series a
//! dashboard looks for seeded at zero; and each tenant's budget counters.

use super::http::Http;
use super::money::MoneyCounter;
use super::upstream::Upstream;
use callai_engine::RequestReason;
use callai_engine::wire::ErrorCode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::time::Duration;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RequestLabels {
    pub(super) provider: String,
    pub(super) reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ProviderLabel {
    pub(super) provider: String,
}

/// Who spent what on which request: `callai_cost_total`'s labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CostLabels {
    tenant: String,
    provider: String,
    model: String,
    reason: &'static str,
    currency: String,
}

/// A routed model name and the `PROVIDER/MODEL` target that answered it.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RouteLabels {
    pub(super) model: String,
    pub(super) target: String,
}

/// The server's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    runs: Family<StatusLabel, Counter>,
    calls: Family<OutcomeLabel, Counter>,
    pub(super) requests: Family<RequestLabels, Counter>,
    pub(super) output_tokens: Family<ProviderLabel, Counter>,
    pub(super) routed: Family<RouteLabels, Counter>,
    cost: Family<CostLabels, MoneyCounter>,
    run_duration: Histogram,
    running: Gauge,
    queued: Gauge,
    compiles_running: Gauge,
    compiles_waiting: Gauge,
    packs_compiled: Gauge,
    client_retries: Family<EndpointLabel, Counter>,
    response_cache: Family<ResultLabel, Counter>,
    budget_spent: Family<SpendLabels, Counter>,
    budget_refused: Family<TenantLabel, Counter>,
    budget_overrun: Family<OverrunLabels, Counter>,
    pub(super) upstream: Upstream,
    http: Http,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OverrunLabels {
    tenant: String,
    provider: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SpendLabels {
    tenant: String,
    kind: &'static str,
}

/// One tenant's series of `callai_budget_spent_total` and
/// `callai_budget_refused_total`.
#[derive(Debug, Clone)]
pub struct BudgetCounters {
    tenant: String,
    requests: Counter,
    output_tokens: Counter,
    input_tokens: Counter,
    refused: Counter,
    overrun: Family<OverrunLabels, Counter>,
}

impl BudgetCounters {
    /// A settled call was charged `spent`.
    pub fn spent(&self, spent: &callai_engine::budget::Spend) {
        self.requests.inc_by(spent.requests);
        self.output_tokens.inc_by(spent.output_tokens);
        self.input_tokens.inc_by(spent.input_tokens);
    }

    /// A call was refused.
    pub fn refused(&self) {
        self.refused.inc();
    }

    /// An attempt to `provider` reported more than its worst case.
    pub fn overrun(&self, provider: &str) {
        self.overrun
            .get_or_create(&OverrunLabels {
                tenant: self.tenant.clone(),
                provider: provider.to_owned(),
            })
            .inc();
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TenantLabel {
    tenant: String,
}

/// The `kind` label of `callai_budget_spent_total`, per budget key.
const SPEND_KINDS: [&str; 3] = ["requests", "output_tokens", "input_tokens"];

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabel {
    endpoint: &'static str,
}

impl Metrics {
    /// Every family registered, and every series a dashboard looks for at
    /// zero: runs by status, calls by outcome, requests by provider (of
    /// `providers`) and reason, output tokens by provider, budgets spent
    /// and refused by tenant (of `tenants`; they are configured, so the
    /// label is bounded).
    pub fn new<'a>(
        providers: impl IntoIterator<Item = &'a str>,
        tenants: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let mut metrics = Self {
            registry: Registry::default(),
            runs: Family::default(),
            calls: Family::default(),
            requests: Family::default(),
            output_tokens: Family::default(),
            routed: Family::default(),
            cost: Family::default(),
            // 5 ms to about 20 minutes.
            run_duration: Histogram::new([
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
                1200.0,
            ]),
            running: Gauge::default(),
            queued: Gauge::default(),
            compiles_running: Gauge::default(),
            compiles_waiting: Gauge::default(),
            packs_compiled: Gauge::default(),
            client_retries: Family::default(),
            response_cache: Family::default(),
            budget_spent: Family::default(),
            budget_refused: Family::default(),
            budget_overrun: Family::default(),
            upstream: Upstream::default(),
            http: Http::default(),
        };
        metrics.register();
        let providers: Vec<&str> = providers.into_iter().collect();
        let tenants: Vec<&str> = tenants.into_iter().collect();
        metrics.seed(&providers, &tenants);
        metrics
    }

    /// Registers every family, in the order `/metrics` lists them.
    fn register(&mut self) {
        let registry = &mut self.registry;
        registry.register(
            "callai_budget_overrun",
            "Provider requests of budgeted calls that reported more than their worst case \
             (output past max_tokens, input past its bound and the provider's inputOverheadTokens); \
             charged what they reported. Stays 0 with a correct configuration",
            self.budget_overrun.clone(),
        );
        registry.register(
            "callai_budget_spent",
            "What tenants' settled calls were charged, by tenant and kind (requests, output_tokens, input_tokens)",
            self.budget_spent.clone(),
        );
        registry.register(
            "callai_budget_refused",
            "Calls refused before any request because their worst case did not fit the tenant's budget",
            self.budget_refused.clone(),
        );
        // prometheus-client adds `_total` to counters.
        registry.register(
            "callai_runs",
            "Node runs, by how they ended",
            self.runs.clone(),
        );
        registry.register(
            "callai_calls",
            "ctx.callAI calls (of packs and of /v1/call), by outcome: ok or the error code",
            self.calls.clone(),
        );
        registry.register(
            "callai_provider_requests",
            "Provider requests sent, by provider and by why each was sent",
            self.requests.clone(),
        );
        registry.register(
            "callai_output_tokens",
            "Output tokens the providers reported, over every request",
            self.output_tokens.clone(),
        );
        registry.register(
            "callai_cost",
            "What provider requests cost at their provider's and model's price, by tenant, \
             provider, model, why each was sent (what retries cost) and currency; a request \
             with no usage at its worst case",
            self.cost.clone(),
        );
        registry.register(
            "callai_routed_calls",
            "Calls to a routed model name ([models.NAME]) that a target answered, by model and \
             by the PROVIDER/MODEL target that served it",
            self.routed.clone(),
        );
        registry.register(
            "callai_run_duration_seconds",
            "How long node runs took, queueing excluded",
            self.run_duration.clone(),
        );
        registry.register(
            "callai_runs_running",
            "Runs and calls holding a slot now",
            self.running.clone(),
        );
        registry.register(
            "callai_runs_queued",
            "Runs and calls waiting for a slot now",
            self.queued.clone(),
        );
        registry.register(
            "callai_pack_compiles_running",
            "Pack compilations running now (at most [server] maxCompiles)",
            self.compiles_running.clone(),
        );
        registry.register(
            "callai_pack_compiles_waiting",
            "Pack compilations waiting for a turn",
            self.compiles_waiting.clone(),
        );
        registry.register(
            "callai_packs_compiled",
            "Compiled packs held in memory (a replaced upload's is dropped)",
            self.packs_compiled.clone(),
        );
        registry.register(
            "callai_client_retries",
            "Requests a client sent again on its own (x-stainless-retry-count > 0), by drop-in endpoint",
            self.client_retries.clone(),
        );
        registry.register(
            "callai_response_cache",
            "Requests the response cache answered (hit) or ran and kept (miss)",
            self.response_cache.clone(),
        );
        self.upstream.register(registry);
        self.http.register(registry);
    }

    /// A `method` request to route `endpoint` was answered `status` after
    /// `seconds` (`callai_http_request_duration_seconds`).
    pub fn answered(&self, endpoint: &str, method: &str, status: u16, seconds: f64) {
        self.http.answered(endpoint, method, status, seconds);
    }

    /// The connections each provider holds open now
    /// (`callai_upstream_connections`, `callai_upstream_streams_in_flight`).
    pub fn set_connections(&self, providers: &callai_engine::Providers) {
        for name in providers.names() {
            let held = providers.get(name).and_then(|(_, p)| p.connections());
            if let Some(now) = held {
                self.upstream.set_connections(name, now);
            }
        }
    }

    /// Each target's circuit breaker as `health` says
    /// (`callai_circuit_breaker_state`).
    pub fn set_health(&self, health: &[callai_engine::breaker::TargetHealth]) {
        self.upstream.set_health(health);
    }

    /// Every series a dashboard looks for, at zero.
    fn seed(&self, providers: &[&str], tenants: &[&str]) {
        self.upstream.seed(providers);
        for tenant in tenants {
            for provider in providers {
                let _ = self.budget_overrun.get_or_create(&OverrunLabels {
                    tenant: (*tenant).to_owned(),
                    provider: (*provider).to_owned(),
                });
            }
            for kind in SPEND_KINDS {
                let _ = self.budget_spent.get_or_create(&SpendLabels {
                    tenant: (*tenant).to_owned(),
                    kind,
                });
            }
            let _ = self.budget_refused.get_or_create(&TenantLabel {
                tenant: (*tenant).to_owned(),
            });
        }
        for endpoint in ["chat_completions", "messages", "responses", "embeddings"] {
            let _ = self
                .client_retries
                .get_or_create(&EndpointLabel { endpoint });
        }
        for status in ["ok", "failed"] {
            let _ = self.runs.get_or_create(&StatusLabel { status });
        }
        for result in ["hit", "miss"] {
            let _ = self.response_cache.get_or_create(&ResultLabel { result });
        }
        let outcomes = ["ok", "cancelled", "budget_exceeded", "budget_unavailable"]
            .into_iter()
            .chain(ErrorCode::ALL.iter().map(|c| c.as_str()));
        for outcome in outcomes {
            let _ = self.calls.get_or_create(&OutcomeLabel { outcome });
        }
        for provider in providers {
            for reason in RequestReason::ALL {
                let _ = self.requests.get_or_create(&RequestLabels {
                    provider: (*provider).to_owned(),
                    reason: reason.as_str(),
                });
            }
            let _ = self.output_tokens.get_or_create(&ProviderLabel {
                provider: (*provider).to_owned(),
            });
        }
    }

    /// The counter of `provider`'s requests its quota held back.
    pub fn quota_refusals(&self, provider: &str) -> Counter {
        self.upstream.held_back(provider)
    }

    /// The counters of `tenant`'s budget, to count its calls without a
    /// lookup each time.
    pub fn budget_counters(&self, tenant: &str) -> BudgetCounters {
        let spent = |kind| {
            self.budget_spent.get_or_create_owned(&SpendLabels {
                tenant: tenant.to_owned(),
                kind,
            })
        };
        BudgetCounters {
            tenant: tenant.to_owned(),
            overrun: self.budget_overrun.clone(),
            requests: spent(SPEND_KINDS[0]),
            output_tokens: spent(SPEND_KINDS[1]),
            input_tokens: spent(SPEND_KINDS[2]),
            refused: self.budget_refused.get_or_create_owned(&TenantLabel {
                tenant: tenant.to_owned(),
            }),
        }
    }

    /// A client sent a request again on its own, to `endpoint`.
    pub fn client_retry(&self, endpoint: &'static str) {
        self.client_retries
            .get_or_create(&EndpointLabel { endpoint })
            .inc();
    }

    /// The response cache answered a request (`hit`) or ran one and kept
    /// its answer (`miss`).
    pub fn response_cache(&self, hit: bool) {
        let result = if hit { "hit" } else { "miss" };
        self.response_cache
            .get_or_create(&ResultLabel { result })
            .inc();
    }

    /// A run ended, `ok` or not, after `took`.
    pub fn run_finished(&self, ok: bool, took: Duration) {
        let status = if ok { "ok" } else { "failed" };
        self.runs.get_or_create(&StatusLabel { status }).inc();
        self.run_duration.observe(took.as_secs_f64());
    }

    /// Sets the gauges of work in flight.
    pub fn set_load(&self, running: usize, queued: usize) {
        self.running.set(running as i64);
        self.queued.set(queued as i64);
    }

    /// Sets the gauges of pack compilation: running, waiting, held.
    pub fn set_compiles(&self, running: usize, waiting: usize, compiled: usize) {
        self.compiles_running.set(running as i64);
        self.compiles_waiting.set(waiting as i64);
        self.packs_compiled.set(compiled as i64);
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }

    /// A request of `tenant` to `model` of `provider`, sent for `reason`,
    /// cost `cost`.
    pub fn spent(
        &self,
        tenant: &str,
        provider: &str,
        model: &str,
        reason: &'static str,
        cost: &callai_engine::cost::Cost,
    ) {
        self.cost
            .get_or_create(&CostLabels {
                tenant: tenant.to_owned(),
                provider: provider.to_owned(),
                model: model.to_owned(),
                reason,
                currency: cost.currency.to_string(),
            })
            .add(cost.nanos);
    }

    pub(super) fn call_ended(&self, outcome: &'static str) {
        self.calls.get_or_create(&OutcomeLabel { outcome }).inc();
    }
}
