//! `POST /v1/responses`: the OpenAI Responses API, mapped onto a
//! ctx.callAI request as the other drop-ins are: `input` (a string, or
//! message, function-call and function-call-output items) and
//! `instructions` into the conversation, function `tools` and
//! `tool_choice`, `text.format` into the response schema,
//! `max_output_tokens` into the output budget the host grows on
//! truncation. The answer is a `response` whose `id` is the call's, with
//! the final attempt's `usage` and the `callai` extension; streamed, the
//! API's typed events. What the host cannot honour is refused naming its
//! field (see `request.rs`); a stored response is kept in the run log
//! (`store.rs`).

mod answer;
mod api;
mod events;
mod input;
mod request;
mod store;

pub use store::{create, delete, get, input_items};
