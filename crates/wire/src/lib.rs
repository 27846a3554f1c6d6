//! The ctx.callAI wire types of RFC 0248, defined once.
//!
//! A pack asks its host for one model completion with a [`CallRequest`]; the
//! host answers with a [`CallResult`] carrying [`Attempts`] (every provider
//! request the call made), or fails with a [`CallError`]. The request may
//! narrow the host's retries with a [`RetryPolicy`]. These types serialise to
//! the spec's wire JSON (camelCase), and they are shared by the host, the
//! guest SDK (this crate builds for `wasm32-wasip2`) and the conformance
//! judges.
//!
//! ```
//! use callai_wire::{CallRequest, ErrorCode, RetryField};
//!
//! let request = CallRequest::from_json(
//!     r#"{"messages": [{"role": "user", "content": "hi"}], "retry": {"maxAttempts": 2}}"#,
//!     RetryField::Honoured,
//! )?;
//! assert_eq!(request.retry.unwrap().max_attempts, Some(2));
//!
//! // §B.5: a malformed retry is refused, naming the key.
//! let refused = CallRequest::from_json(
//!     r#"{"messages": [{"role": "user", "content": "hi"}], "retry": {"maxAttempts": 2.5}}"#,
//!     RetryField::Honoured,
//! ).unwrap_err();
//! assert_eq!(refused.code, ErrorCode::ValidationError);
//! assert_eq!(refused.field(), Some("retry.maxAttempts"));
//! # Ok::<(), callai_wire::CallError>(())
//! ```

#![warn(missing_docs)]

mod convert;
mod embedding;
mod error;
mod image;
mod parse;
mod prompt_cache;
mod request;
mod result;
mod thinking;
mod tools;
mod unknown;

pub use embedding::Embedding;
pub use error::{CallError, ErrorCode};
pub use image::{IMAGE_MEDIA_TYPES, Image, ImageSource};
pub use parse::{ParsedRequest, ParsedRetry};
pub use prompt_cache::{PromptCache, SystemBlock};
pub use request::{
    CallRequest, MAX_ATTEMPTS, Message, RetryField, RetryPolicy, Role, TokenLimitField,
};
pub use result::{Attempts, CallAccounting, CallResult, FinishReason, StructuredOutput, Usage};
pub use thinking::{Thinking, ThinkingBlock, ThinkingConfig, ThinkingDisplay, ThinkingKind};
pub use tools::{MAX_TOOL_NAME, Tool, ToolCall, ToolChoice};
pub use unknown::{REQUEST_FIELDS, UnknownField, unknown_fields};

/// Used by [`wit_conversions!`]; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use serde_json;
}
