//! The routes of the API and the state they share.

use crate::admission::Admission;
use crate::answer::Health;
use crate::auth::{Auth, require_metrics_token, require_token};
use crate::body::{self, ApiJson, CallBody, CallBodyJson, RunBody, RunRequest};
use crate::config::{RunLogConfig, ServerConfig};
use crate::error::{ApiCode, ApiError};
use crate::metrics::{Metrics, MetricsObserver};
use crate::packs::PackStore;
use crate::runs::{self, RunTable};
use crate::scope::{Scope, TenantQuery};
use crate::tenants::{Caller, Tenant, Tenants};
use crate::{discovery, runner};
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Extension, Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use callai_engine::observe::Observers;
use callai_engine::{Host, HostConfig, MockProvider, MockScript, RunKey, RunLog, RunLogError};
use callai_telemetry::Telemetry;
use serde::Deserialize;
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
    /// The callers, by token.
    pub tenants: Arc<Tenants>,
    /// This host's allotment of each budgeted tenant's budget, by name.
    pub allotments: std::collections::HashMap<String, Arc<crate::tenants::Allotment>>,
}

type Shared = State<Arc<AppState>>;

impl AppState {
    /// The engine's config.
    pub fn config(&self) -> &HostConfig {
        self.host.config()
    }

    /// The host for one run or call of `tenant`: its policy, and its mock
    /// serving `script` (the run's, or its pack's own), or, with none, the
    /// default reply `callai run` gives a component without a script.
    pub fn host_for(&self, tenant: &Tenant, script: Option<MockScript>) -> Host {
        let script = script.unwrap_or_else(MockScript::default_reply);
        let mock = &self.config().mock;
        let mock = MockProvider::new(script, mock.structured_output()).with_latency(mock.latency());
        tenant.host.with_provider("mock", Arc::new(mock))
    }

    /// The observers every call gets: metrics, and then whatever is passed.
    pub fn observers(&self) -> Observers {
        Observers::new().with(Arc::new(MetricsObserver(self.metrics.clone())))
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
}

/// The router: liveness and discovery open to anyone, `/metrics` behind
/// the admin's or the metrics token, every other route behind a caller's
/// token.
pub fn router(state: Arc<AppState>, auth: Auth) -> Router {
    let open = Router::new()
        .route("/healthz", get(healthz))
        .route("/.well-known/openwop", get(well_known));
    let metrics =
        Router::new()
            .route("/metrics", get(metrics))
            .layer(axum::middleware::from_fn_with_state(
                auth.clone(),
                require_metrics_token,
            ));
    Router::new()
        .merge(open)
        .merge(metrics)
        .merge(api(state.clone(), auth))
        .with_state(state)
}

/// The API, every route behind a caller's token.
fn api(state: Arc<AppState>, auth: Auth) -> Router<Arc<AppState>> {
    let server = &state.server;
    let pack_limit = usize::try_from(server.max_pack_bytes).unwrap_or(usize::MAX);
    let body_limit = usize::try_from(server.max_body_bytes).unwrap_or(usize::MAX);
    // Idempotency-Key reads the body before the handler does, so the body
    // limit goes outside it.
    let keyed = || axum::middleware::from_fn_with_state(state.clone(), crate::idempotency::keyed);
    Router::new()
        .route("/v1/facet", get(facet))
        .route("/v1/packs", get(list_packs))
        .route(
            "/v1/packs/{name}",
            put(put_pack)
                .layer(DefaultBodyLimit::max(pack_limit))
                .delete(delete_pack),
        )
        .route(
            "/v1/runs",
            post(post_run)
                .layer::<_, std::convert::Infallible>(keyed())
                .layer(DefaultBodyLimit::max(body_limit)),
        )
        .route("/v1/runs/{run_id}", get(get_run))
        .route("/v1/runs/{run_id}/events", get(get_events))
        .route(
            "/v1/call",
            post(post_call)
                .layer::<_, std::convert::Infallible>(keyed())
                .layer(DefaultBodyLimit::max(body_limit)),
        )
        .route(
            "/v1/chat/completions",
            post(crate::dropin::openai::chat)
                .layer::<_, std::convert::Infallible>(keyed())
                .layer(DefaultBodyLimit::max(body_limit)),
        )
        .route(
            "/v1/messages",
            post(crate::dropin::anthropic::messages)
                .layer::<_, std::convert::Infallible>(keyed())
                .layer(DefaultBodyLimit::max(body_limit)),
        )
        .route("/v1/budget", get(budget))
        .route("/v1/models", get(crate::dropin::models))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(auth, require_token))
}

async fn healthz() -> impl IntoResponse {
    axum::Json(Health { status: "ok" })
}

async fn facet(State(state): Shared) -> impl IntoResponse {
    axum::Json(callai_engine::facet::document(&state.host))
}

async fn well_known(State(state): Shared) -> impl IntoResponse {
    axum::Json(discovery::document(&state.host, &state.packs))
}

/// `?tenant=`, refused naming the field when it is not one.
type TenantParam = Result<Query<TenantQuery>, axum::extract::rejection::QueryRejection>;

/// The scope of `caller`'s request with `query`.
fn scope(caller: &Caller, query: TenantParam) -> Result<Scope, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::invalid("tenant", e.body_text()))?;
    Scope::of(caller, query.tenant.as_deref())
}

/// `GET /v1/packs`: the packs the caller may run (its own and the shared
/// ones); the admin sees every namespace's, or one tenant's view with
/// `?tenant=`.
async fn list_packs(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
    query: TenantParam,
) -> Result<Response, ApiError> {
    let named = query.as_ref().is_ok_and(|q| q.tenant.is_some());
    let scope = scope(&caller, query)?;
    let view = (!caller.is_admin() || named).then_some(scope.tenant());
    Ok(axum::Json(state.packs.list(view)).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PutQuery {
    node_id: Option<String>,
    tenant: Option<String>,
}

/// `PUT /v1/packs/{name}`: an upload into the caller's namespace (the
/// admin's: the shared one, or a tenant's with `?tenant=`).
async fn put_pack(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    query: Result<Query<PutQuery>, axum::extract::rejection::QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| {
        let field = if e.body_text().contains("tenant") {
            "tenant"
        } else {
            "nodeId"
        };
        ApiError::invalid(field, e.body_text())
    })?;
    let scope = Scope::of(&caller, query.tenant.as_deref())?;
    let bytes = body::bytes(body, "server.maxPackBytes")?;
    if bytes.is_empty() {
        return Err(ApiError::invalid(
            "body",
            "empty: send the component's bytes",
        ));
    }
    let info = state
        .packs
        .upload(scope.tenant(), &name, query.node_id, bytes.to_vec())
        .await?;
    Ok((StatusCode::CREATED, axum::Json(info)).into_response())
}

/// `DELETE /v1/packs/{name}`: the caller's own upload (the admin's: a
/// shared upload, or a tenant's with `?tenant=`).
async fn delete_pack(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    query: TenantParam,
) -> Result<Response, ApiError> {
    let scope = scope(&caller, query)?;
    let gone = state.packs.delete(scope.tenant(), &name)?;
    Ok(axum::Json(gone).into_response())
}

async fn post_run(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
    ApiJson(body): ApiJson<RunBody>,
) -> Result<Response, ApiError> {
    runner::start(state, caller, RunRequest::try_from(body)?).await
}

async fn budget(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    let answer = crate::tenants::budget_answer(&state, &caller).await?;
    Ok(axum::Json(answer).into_response())
}

/// `GET /v1/runs/{id}`: the caller's run of that id (the admin's, or a
/// tenant's with `?tenant=`); another tenant's is 404, as an id nobody holds.
async fn get_run(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
    Path(run_id): Path<String>,
    query: TenantParam,
) -> Result<Response, ApiError> {
    let scope = scope(&caller, query)?;
    let key = RunKey::new(scope.tenant(), &run_id);
    if let Some(entry) = state
        .runs
        .get(key.tenant, key.run_id)
        .filter(|e| !e.is_handed_on())
    {
        return Ok(axum::Json(entry.answer()).into_response());
    }
    let run = load(&state, key).await?;
    Ok(axum::Json(runs::inspected_answer(&run)).into_response())
}

/// `GET /v1/runs/{id}/events`, scoped as [`get_run`] is.
async fn get_events(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
    Path(run_id): Path<String>,
    query: TenantParam,
) -> Result<Response, ApiError> {
    let scope = scope(&caller, query)?;
    let key = RunKey::new(scope.tenant(), &run_id);
    if let Some(entry) = state
        .runs
        .get(key.tenant, key.run_id)
        .filter(|e| !e.is_handed_on())
    {
        // Read "done" first: every event of a finished run is in by then.
        let complete = entry.is_done();
        let events = entry.events.stamped_since(0);
        return Ok(axum::Json(runs::events_answer(&events, complete)).into_response());
    }
    let run = load(&state, key).await?.run;
    let complete = run.status != callai_engine::runlog::RunStatus::Running;
    let events: Vec<_> = run.event_times.into_iter().zip(run.events).collect();
    Ok(axum::Json(runs::events_answer(&events, complete)).into_response())
}

/// A run from the run log, as far as its records read back (a damaged
/// call is named, not a `500` on every read); 404 when neither this host
/// nor the log knows it (another tenant's run of the same id is not it).
pub(crate) async fn load(
    state: &AppState,
    run: RunKey<'_>,
) -> Result<callai_engine::runlog::decode::Inspected, ApiError> {
    let unknown = || ApiError::not_found(format!("no run {:?} on this host", run.run_id));
    let Some(log) = &state.runlog else {
        return Err(unknown());
    };
    match log.inspect(run).await {
        Ok(run) => Ok(run),
        Err(RunLogError::NoSuchRun(_)) => Err(unknown()),
        Err(e) => Err(ApiError::internal(e.to_string())),
    }
}

async fn post_call(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
    ApiJson(body): ApiJson<CallBodyJson>,
) -> Result<Response, ApiError> {
    crate::call::serve(&state, &caller, CallBody::try_from(body)?).await
}

async fn metrics(State(state): Shared) -> impl IntoResponse {
    state.report_load();
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!("no route {}", uri.path()))
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        ApiCode::MethodNotAllowed,
        format!("{method} is not allowed on {}", uri.path()),
    )
}
