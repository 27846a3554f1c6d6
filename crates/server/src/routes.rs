//! The routes of the API: which sub-router each endpoint is on, with the
//! layers it needs (its token, its body limit, its idempotency, its error
//! shape). The handlers are in `handlers/` and `dropin/`.

use crate::dropin::{self, Anthropic, Api, Embeddings, OpenAi, Reshape};
use crate::handlers::{call, keys, meta, packs, runs, targets, tenants, traces};
use crate::layers::access_log::AccessLog;
use crate::layers::around::AroundLayer;
use crate::layers::auth::{Auth, require_metrics_token};
use crate::layers::idempotency::{Keyed, KeyedLayer};
use crate::state::AppState;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::handler::Handler;
use axum::routing::{MethodRouter, get, post_service, put};
use tower::ServiceBuilder;

/// The router: liveness, discovery and the viewer's assets open to anyone,
/// `/metrics` behind the admin's or the metrics token, every other route
/// behind a caller's token; the drop-ins' routes answer their errors in
/// their API's shape.
pub fn router(state: AppState, auth: Auth, log: AccessLog) -> Router {
    let open = Router::new()
        .route("/healthz", get(meta::healthz))
        .route("/.well-known/openwop", get(meta::well_known))
        .merge(callai_ui::router());
    let metrics = Router::new().route("/metrics", get(meta::metrics)).layer(
        axum::middleware::from_fn_with_state(auth.clone(), require_metrics_token),
    );
    let router = Router::new()
        .merge(open)
        .merge(metrics)
        .merge(callai(&state, auth.clone()))
        .merge(openai(&state, auth.clone()))
        .merge(responses(&state, auth.clone()))
        .merge(anthropic(&state, auth));
    // Every request timed, and logged unless `[log] format = "off"`.
    let log = log.timing(state.gateway.metrics.clone());
    router.with_state(state).layer(AroundLayer(log))
}

/// A `POST` route of `handler` that reads a JSON body: bounded by
/// `[server] maxBodyBytes`, keyed by `Idempotency-Key` (whose answers are
/// kept as the client got them: `shape`d, for a drop-in), a client's own
/// retry counted under `endpoint` when it is a drop-in's; answered by the
/// response cache, when it is on, if `cacheable`.
fn keyed_post<H, T>(
    state: &AppState,
    handler: H,
    shape: Option<Api>,
    cacheable: bool,
) -> MethodRouter<AppState>
where
    H: Handler<T, AppState>,
    T: 'static,
{
    let body_limit = usize::try_from(state.server.max_body_bytes).unwrap_or(usize::MAX);
    let keyed = Keyed {
        gateway: state.gateway.clone(),
        client_retries: shape.map(Api::endpoint),
        cacheable,
    };
    // The layers composed on the handler into one service, which the
    // method router boxes once: `.layer` on a method router boxes the route
    // again for each layer, and every box is cloned per request.
    post_service(
        ServiceBuilder::new()
            .layer(DefaultBodyLimit::max(body_limit))
            .layer(KeyedLayer(keyed))
            .option_layer(shape.map(|api| AroundLayer(Reshape(api))))
            .service(handler.with_state(state.clone())),
    )
}

/// The callai API, every route behind a caller's token.
fn callai(state: &AppState, auth: Auth) -> Router<AppState> {
    let pack_limit = usize::try_from(state.server.max_pack_bytes).unwrap_or(usize::MAX);
    Router::new()
        .route("/v1/facet", get(meta::facet))
        .route("/v1/packs", get(packs::list_packs))
        .route(
            "/v1/packs/{name}",
            put(packs::put_pack)
                .layer(DefaultBodyLimit::max(pack_limit))
                .delete(packs::delete_pack),
        )
        .route("/v1/runs", keyed_post(state, runs::post_run, None, false))
        .route("/v1/runs/{run_id}", get(runs::get_run))
        .route("/v1/runs/{run_id}/events", get(runs::get_events))
        .route("/v1/call", keyed_post(state, call::post_call, None, true))
        .route("/v1/calls", get(traces::list_calls))
        .route("/v1/calls/{id}", get(traces::get_call))
        .route("/v1/usage", get(traces::usage))
        .route("/v1/budget", get(tenants::budget))
        .route("/v1/tenants", get(tenants::tenants))
        .route("/v1/keys", get(keys::list).post(keys::create))
        .route(
            "/v1/keys/{id}",
            get(keys::get).patch(keys::patch).delete(keys::revoke),
        )
        .route("/v1/keys/{id}/events", get(keys::events))
        .route("/v1/targets", get(targets::targets))
        .fallback(meta::not_found)
        .method_not_allowed_fallback(meta::method_not_allowed)
        .layer(AroundLayer(auth))
}

/// The OpenAI drop-in: Chat Completions, Embeddings and the model list.
fn openai(state: &AppState, auth: Auth) -> Router<AppState> {
    let chat = keyed_post(state, dropin::handle::<OpenAi>, Some(Api::OpenAi), true);
    let embeddings = keyed_post(
        state,
        dropin::handle::<Embeddings>,
        Some(Api::Embeddings),
        true,
    );
    Router::new()
        .route("/v1/chat/completions", chat)
        .route("/v1/embeddings", embeddings)
        .route("/v1/models", get(dropin::models))
        .method_not_allowed_fallback(meta::method_not_allowed)
        .layer(AroundLayer((Reshape(Api::OpenAi), auth)))
}

/// The OpenAI Responses drop-in, its errors in OpenAI's shape: a response
/// created, and a stored one read, listed by its input and deleted.
fn responses(state: &AppState, auth: Auth) -> Router<AppState> {
    let create = keyed_post(state, dropin::create_response, Some(Api::Responses), true);
    Router::new()
        .route("/v1/responses", create)
        .route(
            "/v1/responses/{id}",
            get(dropin::get_response).delete(dropin::delete_response),
        )
        .route(
            "/v1/responses/{id}/input_items",
            get(dropin::response_input_items),
        )
        .method_not_allowed_fallback(meta::method_not_allowed)
        .layer(AroundLayer((Reshape(Api::Responses), auth)))
}

/// The Anthropic drop-in: Messages, which also takes the token in
/// `x-api-key`, where the Anthropic clients send it.
fn anthropic(state: &AppState, auth: Auth) -> Router<AppState> {
    let messages = keyed_post(
        state,
        dropin::handle::<Anthropic>,
        Some(Api::Anthropic),
        true,
    );
    Router::new()
        .route("/v1/messages", messages)
        .method_not_allowed_fallback(meta::method_not_allowed)
        .layer(AroundLayer((Reshape(Api::Anthropic), auth.with_api_key())))
}
