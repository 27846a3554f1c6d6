//! What the host says of itself: `/healthz`, the facet, the discovery
//! document, `/metrics`; and the answers of a route or a method it does
//! not have.

use crate::error::{ApiCode, ApiError};
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use callai_gateway::Gateway;
use serde::Serialize;
use std::sync::Arc;

/// `GET /healthz`: `{"status": "ok"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
struct Health {
    /// Always `ok` while the server answers.
    status: &'static str,
}

/// `GET /healthz`.
pub async fn healthz() -> impl IntoResponse {
    axum::Json(Health { status: "ok" })
}

/// `GET /v1/facet`.
pub async fn facet(State(gateway): State<Arc<Gateway>>) -> impl IntoResponse {
    axum::Json(callai_engine::facet::document(&gateway.host))
}

/// `GET /.well-known/openwop`.
pub async fn well_known(State(gateway): State<Arc<Gateway>>) -> impl IntoResponse {
    axum::Json(callai_gateway::discovery::document(
        &gateway.host,
        &gateway.packs,
    ))
}

/// `GET /metrics`.
pub async fn metrics(State(gateway): State<Arc<Gateway>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        gateway.metrics_text(),
    )
}

/// A path no route has.
pub async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!("no route {}", uri.path()))
}

/// A method the route does not take.
pub async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        ApiCode::MethodNotAllowed,
        format!("{method} is not allowed on {}", uri.path()),
    )
}
