//! The routes of the API: which sub-router each endpoint is on, with the
//! layers it needs (its token, its body limit, its idempotency, its error
//! shape), and the handlers of the callai API's own endpoints.

use crate::answer::Health;
use crate::around::AroundLayer;
use crate::auth::{Auth, require_metrics_token};
use crate::body::{self, ApiJson, CallBody, CallBodyJson, RunBody, RunRequest};
use crate::dropin::{self, Anthropic, Api, OpenAi, Reshape};
use crate::error::{ApiCode, ApiError};
use crate::idempotency::Keyed;
use crate::runs;
use crate::scope::{Scope, TenantQuery};
use crate::state::AppState;
use crate::tenants::Caller;
use crate::{discovery, runner};
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Extension, Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use callai_engine::RunKey;
use serde::Deserialize;
use std::sync::Arc;

type Shared = State<Arc<AppState>>;

/// The router: liveness, discovery and the viewer's assets open to anyone, `/metrics` behind
/// the admin's or the metrics token, every other route behind a caller's
/// token; the drop-ins' routes answer their errors in their API's shape.
pub fn router(state: Arc<AppState>, auth: Auth, log: crate::access_log::AccessLog) -> Router {
    let open = Router::new()
        .route("/healthz", get(healthz))
        .route("/.well-known/openwop", get(well_known))
        .merge(callai_ui::router());
    let metrics =
        Router::new()
            .route("/metrics", get(metrics))
            .layer(axum::middleware::from_fn_with_state(
                auth.clone(),
                require_metrics_token,
            ));
    let router = Router::new()
        .merge(open)
        .merge(metrics)
        .merge(callai(&state, auth.clone()))
        .merge(openai(&state, auth.clone()))
        .merge(anthropic(&state, auth))
        .with_state(state);
    // `[log] format = "off"`: not even the layer.
    if log.is_off() {
        return router;
    }
    router.layer(AroundLayer(log))
}

/// A `POST` route of `handler` that reads a JSON body: bounded by
/// `[server] maxBodyBytes`, keyed by `Idempotency-Key` (whose answers are
/// kept as the client got them: `shape`d, for a drop-in), a client's own
/// retry counted under `endpoint` when it is a drop-in's.
fn keyed_post<H, T>(
    state: &Arc<AppState>,
    handler: H,
    shape: Option<Api>,
) -> axum::routing::MethodRouter<Arc<AppState>>
where
    H: axum::handler::Handler<T, Arc<AppState>>,
    T: 'static,
{
    let body_limit = usize::try_from(state.server.max_body_bytes).unwrap_or(usize::MAX);
    let keyed = Keyed {
        state: state.clone(),
        client_retries: shape.map(Api::endpoint),
    };
    let mut route = post(handler);
    if let Some(api) = shape {
        route = route.layer(AroundLayer(Reshape(api)));
    }
    route
        .layer::<_, std::convert::Infallible>(crate::idempotency::KeyedLayer(keyed))
        .layer(DefaultBodyLimit::max(body_limit))
}

/// The callai API, every route behind a caller's token.
fn callai(state: &Arc<AppState>, auth: Auth) -> Router<Arc<AppState>> {
    let pack_limit = usize::try_from(state.server.max_pack_bytes).unwrap_or(usize::MAX);
    Router::new()
        .route("/v1/facet", get(facet))
        .route("/v1/packs", get(list_packs))
        .route(
            "/v1/packs/{name}",
            put(put_pack)
                .layer(DefaultBodyLimit::max(pack_limit))
                .delete(delete_pack),
        )
        .route("/v1/runs", keyed_post(state, post_run, None))
        .route("/v1/runs/{run_id}", get(get_run))
        .route("/v1/runs/{run_id}/events", get(get_events))
        .route("/v1/call", keyed_post(state, post_call, None))
        .route("/v1/calls", get(crate::calls::list_calls))
        .route("/v1/calls/{id}", get(crate::calls::get_call))
        .route("/v1/usage", get(crate::calls::usage))
        .route("/v1/budget", get(budget))
        .route("/v1/tenants", get(tenants))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(AroundLayer(auth))
}

/// The OpenAI drop-in: Chat Completions and the model list.
fn openai(state: &Arc<AppState>, auth: Auth) -> Router<Arc<AppState>> {
    let chat = keyed_post(state, dropin::handle::<OpenAi>, Some(Api::OpenAi));
    Router::new()
        .route("/v1/chat/completions", chat)
        .route("/v1/models", get(dropin::models))
        .method_not_allowed_fallback(method_not_allowed)
        .layer(AroundLayer(auth))
        .layer(AroundLayer(Reshape(Api::OpenAi)))
}

/// The Anthropic drop-in: Messages, which also takes the token in
/// `x-api-key`, where the Anthropic clients send it.
fn anthropic(state: &Arc<AppState>, auth: Auth) -> Router<Arc<AppState>> {
    let messages = keyed_post(state, dropin::handle::<Anthropic>, Some(Api::Anthropic));
    Router::new()
        .route("/v1/messages", messages)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(AroundLayer(auth.with_api_key()))
        .layer(AroundLayer(Reshape(Api::Anthropic)))
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
    let answer = crate::tenants::budget_answer(state.runlog.as_ref(), &caller).await?;
    Ok(axum::Json(answer).into_response())
}

/// `GET /v1/tenants`: every tenant's budget in its current window, for
/// the admin; a tenant's own, for a tenant.
async fn tenants(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    let log = state.runlog.as_ref();
    let mut answers = Vec::new();
    if caller.is_admin() {
        for tenant in state.tenants.all() {
            answers.push(crate::tenants::budget_answer(log, &Caller(tenant.clone())).await?);
        }
    } else {
        answers.push(crate::tenants::budget_answer(log, &caller).await?);
    }
    Ok(axum::Json(serde_json::json!({ "data": answers })).into_response())
}

/// The run `key` as this host holds it in memory, unless it handed the run
/// on (another host has it now: the log says where it stands).
fn in_memory(state: &AppState, key: RunKey<'_>) -> Option<Arc<runs::RunEntry>> {
    state
        .runs
        .get(key.tenant, key.run_id)
        .filter(|e| !e.is_handed_on())
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
    if let Some(entry) = in_memory(&state, key) {
        return Ok(axum::Json(entry.answer()).into_response());
    }
    let run = state.load(key).await?;
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
    if let Some(entry) = in_memory(&state, key) {
        // Read "done" first: every event of a finished run is in by then.
        let complete = entry.is_done();
        let events = entry.events.stamped_since(0);
        return Ok(axum::Json(runs::events_answer(&events, complete)).into_response());
    }
    let run = state.load(key).await?.run;
    let complete = run.status != callai_engine::runlog::RunStatus::Running;
    let events: Vec<_> = run.event_times.into_iter().zip(run.events).collect();
    Ok(axum::Json(runs::events_answer(&events, complete)).into_response())
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
