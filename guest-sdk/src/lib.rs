//! Write callAI pack nodes in Rust.
//!
//! A pack node is a WebAssembly component: JSON in, JSON out. Inside it, ask
//! the host for a model completion with [`call`], read what that one call
//! really cost from [`Response::attempts`] (RFC 0248 §A), and narrow the
//! host's retries with [`Retry`] (§B). Check [`call_accounting`] before
//! relying on either.
//!
//! ```
//! use callai_sdk::{Request, Retry};
//! use serde_json::json;
//!
//! let request = Request::new()
//!     .system("You write short scenes.")
//!     .user("A lighthouse at dusk.")
//!     .max_tokens(2000)
//!     .schema(json!({"type": "object", "required": ["scene"]}))
//!     .retry(Retry::new().max_attempts(1).grow_max_tokens(false));
//! assert_eq!(request.to_json()["retry"], json!({"maxAttempts": 1, "growMaxTokens": false}));
//! ```
//!
//! A whole node (built for `wasm32-wasip2`):
//!
//! ```no_run
//! use callai_sdk::{Node, NodeError, Request, call};
//!
//! struct Hello;
//!
//! impl Node for Hello {
//!     fn run(input: &str) -> Result<String, NodeError> {
//!         let response = call(&Request::new().user(input))?;
//!         let spent = response.attempts().map_or(1, |a| a.count);
//!         Ok(serde_json::json!({"text": response.content(), "requests": spent}).to_string())
//!     }
//! }
//!
//! callai_sdk::export_node!(Hello);
//! # fn main() {}
//! ```

extern crate self as callai_sdk;

mod bindings;
mod budget;
mod call;
mod error;
mod node;
mod request;
mod response;

pub use budget::{Budget, BudgetError, Spent};
pub use call::{CallAccounting, call, call_accounting, call_json};
pub use error::{CallError, ErrorCode, NodeError};
pub use node::{Node, log};
pub use request::{Request, Retry, Role};
pub use response::{Attempts, FinishReason, Response, StructuredOutput, Usage};

/// Used by [`export_node!`]; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::bindings::{__export_pack_node, Guest};
    pub use wit_bindgen;
    pub mod bindings {
        pub use crate::bindings::*;
    }
}
