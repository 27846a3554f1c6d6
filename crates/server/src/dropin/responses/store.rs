//! Stored responses (`store`, the API's default): a response and its input
//! kept in the run log for its tenant before the answer goes out, so that
//! `previous_response_id` goes on from it (its conversation, then this
//! request's input), `GET /v1/responses/{id}` reads it,
//! `GET /v1/responses/{id}/input_items` lists its input and `DELETE`
//! removes it. Without a run log a response is answered and not kept, and
//! what needs a kept one is refused naming the missing `[runlog] url`.

use super::api::Responses;
use super::request::{Echo, ResponsesRequest};
use crate::body::{self, Naming};
use crate::cache_mark::{CacheMiss, cache_word};
use crate::call_headers::CallHeaders;
use crate::dropin::api::{AnswerExtension, DropinApi, Keep, answer_text};
use crate::dropin::handler;
use crate::dropin::outcome::CallFailure;
use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use callai_engine::runlog::StoredResponse;
use callai_engine::wire::{CallResult, Message, Role};
use callai_gateway::Gateway;
use callai_gateway::tenants::Caller;
use serde::Serialize;
use serde_json::value::RawValue;
use std::sync::Arc;

/// `POST /v1/responses`.
pub async fn create(
    State(gateway): State<Arc<Gateway>>,
    axum::Extension(caller): axum::Extension<Caller>,
    miss: Option<axum::Extension<CacheMiss>>,
    headers: CallHeaders,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, CallFailure> {
    // The body's bytes end here, not with the call.
    let request: ResponsesRequest = {
        let bytes = body::bytes(body, "server.maxBodyBytes")?;
        body::parse_naming(&bytes, Naming::FullPath)?
    };
    let earlier = match request.previous_response_id.as_deref() {
        Some(id) => Some(conversation(
            &gateway
                .kept_response(&caller, id, "previous_response_id")
                .await
                .map_err(ApiError::from)?,
        )?),
        None => None,
    };
    let store = request.store.unwrap_or(true) && gateway.keeps_responses();
    let items = store.then(|| request.input_items()).transpose()?;
    let (mut mapped, echo) = Responses::map(request)?;
    if let Some(mut earlier) = earlier {
        earlier.append(&mut mapped.request.messages);
        mapped.request.messages = earlier;
    }
    let keep = items.map(|items| {
        let conversation = mapped.request.messages.clone();
        keeper(
            gateway.clone(),
            caller.clone(),
            conversation,
            items,
            echo.clone(),
        )
    });
    let cache = cache_word(miss);
    handler::serve::<Responses>(&gateway, &caller, headers, mapped, echo, keep, cache).await
}

/// The conversation a kept response ended.
fn conversation(kept: &StoredResponse) -> Result<Vec<Message>, ApiError> {
    serde_json::from_str(&kept.conversation).map_err(|e| {
        ApiError::internal(format!(
            "the kept response {:?} does not read back: {e}",
            kept.id
        ))
    })
}

/// What keeps a response: its answer, and its conversation with its output
/// as the assistant's turn, written for its tenant.
fn keeper(
    gateway: Arc<Gateway>,
    caller: Caller,
    mut conversation: Vec<Message>,
    input_items: String,
    echo: Echo,
) -> Keep {
    Box::new(move |result: &CallResult, id: &str, model: &str| {
        let answer = Responses::answer(model, id, result, AnswerExtension::of(result), &echo);
        let response = serde_json::to_string(&answer).expect("a response always serialises");
        let text = answer_text(result).into_owned();
        conversation.push(match &result.tool_calls {
            Some(calls) => Message::tool_calls(text, calls.clone()),
            None => Message::new(Role::Assistant, text),
        });
        let kept = StoredResponse {
            id: id.to_owned(),
            tenant: caller.name().to_owned(),
            created_ms: callai_engine::events::now_ms(),
            conversation: serde_json::to_string(&conversation).expect("messages serialise"),
            input_items,
            response,
        };
        Box::pin(async move {
            // The answer is the caller's either way: a response that could
            // not be kept is said on stderr, and a later read of it is 404.
            if let Err(e) = gateway.keep_response(&kept).await {
                eprintln!("callai serve: response {} not kept: {e}", kept.id);
            }
        })
    })
}

/// A JSON answer of `body`, already JSON.
fn json(body: String) -> Response {
    let mut response = body.into_response();
    let value = HeaderValue::from_static("application/json");
    response.headers_mut().insert(header::CONTENT_TYPE, value);
    response
}

/// `GET /v1/responses/{id}`: the response as it was answered.
pub async fn get(
    State(gateway): State<Arc<Gateway>>,
    axum::Extension(caller): axum::Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let kept = gateway.kept_response(&caller, &id, "id").await?;
    Ok(json(kept.response))
}

/// `GET /v1/responses/{id}/input_items`: its input, as sent, in order.
#[derive(Serialize)]
struct ItemList {
    data: Vec<Box<RawValue>>,
    first_id: Option<()>,
    has_more: bool,
    last_id: Option<()>,
    object: &'static str,
}

/// `GET /v1/responses/{id}/input_items`.
pub async fn input_items(
    State(gateway): State<Arc<Gateway>>,
    axum::Extension(caller): axum::Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let kept = gateway.kept_response(&caller, &id, "id").await?;
    let data: Vec<Box<RawValue>> = serde_json::from_str(&kept.input_items).map_err(|e| {
        ApiError::internal(format!(
            "the kept response {id:?}'s input does not read back: {e}"
        ))
    })?;
    let list = ItemList {
        data,
        first_id: None,
        has_more: false,
        last_id: None,
        object: "list",
    };
    Ok(axum::Json(list).into_response())
}

/// `DELETE /v1/responses/{id}`.
#[derive(Serialize)]
struct Deleted {
    deleted: bool,
    id: String,
    object: &'static str,
}

/// `DELETE /v1/responses/{id}`.
pub async fn delete(
    State(gateway): State<Arc<Gateway>>,
    axum::Extension(caller): axum::Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    gateway.delete_response(&caller, &id).await?;
    let deleted = Deleted {
        deleted: true,
        id,
        object: "response",
    };
    Ok(axum::Json(deleted).into_response())
}
