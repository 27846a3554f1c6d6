//! Server-sent events of a settled call, in the frames each API's SDK
//! parses (`event:` when named, one `data:` line, a blank line).
//!
//! The frames of one answer are known before the first is sent (the call
//! settles first: retries happen before the first byte), so they are
//! written as one body; no SSE crate is needed to encode a handful of
//! lines whose data is JSON without newlines.

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

/// A `text/event-stream` answer of `frames`: each an optional event name and
/// its data (a line of JSON, or `[DONE]`).
pub fn body(frames: impl IntoIterator<Item = (Option<&'static str>, String)>) -> Response {
    let mut text = String::new();
    for (event, data) in frames {
        if let Some(event) = event {
            text.push_str("event: ");
            text.push_str(event);
            text.push('\n');
        }
        debug_assert!(!data.contains('\n'), "one data line per frame");
        text.push_str("data: ");
        text.push_str(&data);
        text.push_str("\n\n");
    }
    let mut response = Body::from(text).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
