//! Write callAI pack nodes in Rust.
//!
//! A pack node is a WebAssembly component: JSON in, JSON out. Implement
//! [`Node`] with `serde` types for both, and export it with
//! [`export_node!`]. Inside it, ask the host for a model completion with
//! [`call`] (or [`call_as`] to decode a structured call's data), read what
//! that one call really cost from [`Response::attempts`] (RFC 0248 §A), and
//! narrow the host's retries with [`Retry`] (§B). Check [`call_accounting`]
//! before relying on either. [`Budget`] charges a per-node budget by the
//! provider requests calls really made. Offer the model tools with
//! [`Request::tool`], read its calls with [`Response::tool_calls`], and let
//! [`ToolLoop`] drive the steps, summing what each cost in a [`LoopRecord`].
//!
//! ```no_run
//! use callai_sdk::{Node, NodeError, Request, Retry, call_accounting, call_as};
//! use serde::{Deserialize, Serialize};
//! use serde_json::json;
//!
//! #[derive(Deserialize)]
//! struct Input { premise: String }
//!
//! #[derive(Deserialize, Serialize)]
//! struct Scene { scene: String }
//!
//! #[derive(Serialize)]
//! struct Output { scene: Scene, requests: u32 }
//!
//! struct Draft;
//!
//! impl Node for Draft {
//!     type Input = Input;
//!     type Output = Output;
//!
//!     fn run(input: Input) -> Result<Output, NodeError> {
//!         let mut request = Request::new()
//!             .system("You write short scenes.")
//!             .user(input.premise)
//!             .max_tokens(2000)
//!             .schema(json!({"type": "object", "required": ["scene"],
//!                            "properties": {"scene": {"type": "string"}}}));
//!         // Doing your own repair? Turn host retries off — if the host honours it.
//!         if call_accounting().retry_policy {
//!             request = request.retry(Retry::off());
//!         }
//!         let scene = call_as::<Scene>(&request)?;
//!         let requests = scene.response.attempts().map_or(1, |a| a.count);
//!         Ok(Output { scene: scene.data, requests })
//!     }
//! }
//!
//! callai_sdk::export_node!(Draft);
//! # fn main() {}
//! ```

#![warn(missing_docs)]

extern crate self as callai_sdk;

mod bindings;
mod budget;
mod call;
mod error;
mod node;
mod request;
mod response;
mod tools;

pub use budget::{Budget, BudgetError, Spent};
pub use call::{CallAsError, Structured, call, call_accounting, call_as, call_json};
pub use callai_wire::{
    Attempts, CallAccounting, CallError, ErrorCode, FinishReason, Image, Role, StructuredOutput,
    Tool, ToolCall, ToolChoice, Usage,
};
pub use error::NodeError;
pub use node::{Node, RawNode, log};
pub use request::{Request, Retry, RetryError};
pub use response::Response;
pub use tools::{LoopAnswer, LoopError, LoopRecord, ToolLoop, arguments_as};

/// Used by [`export_node!`]; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::bindings::{__export_pack_node, Guest};
    pub use crate::node::{run_raw, run_typed};
    pub use wit_bindgen;
    pub mod bindings {
        pub use crate::bindings::*;
    }
}
