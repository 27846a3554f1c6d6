//! Server-sent events of a settled call, in the frames each API's SDK
//! parses (`event:` when named, one `data:` line, a blank line).
//!
//! Encoding is a few lines whose data is JSON without newlines, written
//! here; parsing a provider's stream is the `eventsource-stream` crate's.

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

/// One frame: an optional event name, and its data (a line of JSON, or
/// `[DONE]`).
pub type Frame = (Option<&'static str>, String);

/// `frames` as the text of an event stream.
pub fn encode(frames: impl IntoIterator<Item = Frame>) -> String {
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
    text
}

/// A `text/event-stream` answer of `frames`, all known now.
pub fn body(frames: impl IntoIterator<Item = Frame>) -> Response {
    streaming(Body::from(encode(frames)))
}

/// A `text/event-stream` answer whose frames `body` streams.
pub fn streaming(body: Body) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
