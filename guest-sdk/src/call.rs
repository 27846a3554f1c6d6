//! ctx.callAI from inside the sandbox.

use crate::bindings::openwop::callai::{ai, types};
use crate::request::Request;
use crate::response::Response;
use callai_wire::{CallAccounting, CallError, ErrorCode};
use serde::de::DeserializeOwned;
use std::fmt;

/// One model completion. A request with tools (or tool calls and results
/// in its conversation) goes through the JSON entry, which carries them;
/// any other through the typed one, as before tools existed.
pub fn call(request: &Request) -> Result<Response, CallError> {
    if request.needs_json() {
        let text = serde_json::to_string(request.as_wire()).expect("a request serialises");
        let result = call_json(&text)?;
        return serde_json::from_str::<callai_wire::CallResult>(&result)
            .map(Response::from)
            .map_err(|e| {
                CallError::new(
                    ErrorCode::ProviderRejected,
                    format!("the host's result is not a callAI result: {e}"),
                )
            });
    }
    let wit = types::CallRequest::from(request.as_wire().clone());
    ai::call_ai(&wit)
        .map(|r| Response::from(callai_wire::CallResult::from(r)))
        .map_err(Into::into)
}

/// One model completion in the spec's wire JSON: the request as written
/// (malformed input reaches the host and is refused there), the result's
/// wire JSON back.
pub fn call_json(request: &str) -> Result<String, CallError> {
    ai::call_ai_json(request).map_err(Into::into)
}

/// What the host advertises: check before relying on `attempts` or `retry`.
pub fn call_accounting() -> CallAccounting {
    ai::call_accounting().into()
}

/// A structured call's data, decoded, with the response it came in.
#[derive(Debug, Clone, PartialEq)]
pub struct Structured<T> {
    /// The schema-valid data, as `T`.
    pub data: T,
    /// The whole response: usage, attempts, finish reason.
    pub response: Response,
}

/// Why [`call_as`] produced no `T`.
#[derive(Debug, Clone, PartialEq)]
pub enum CallAsError {
    /// The call failed.
    Call(CallError),
    /// The call succeeded, but its data is not a `T` (the request's schema
    /// admits values `T` does not).
    Decode(String),
}

impl fmt::Display for CallAsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Call(e) => write!(f, "{e}"),
            Self::Decode(e) => write!(f, "the call's data does not decode: {e}"),
        }
    }
}

impl std::error::Error for CallAsError {}

impl From<CallError> for CallAsError {
    fn from(e: CallError) -> Self {
        Self::Call(e)
    }
}

/// One structured call whose data is decoded into `T`. The request should
/// carry a schema ([`Request::schema`]) that describes `T`.
///
/// ```no_run
/// use callai_sdk::{Request, call_as};
/// use serde::Deserialize;
/// use serde_json::json;
///
/// #[derive(Deserialize)]
/// struct Scene { scene: String }
///
/// let request = Request::new()
///     .user("A harbour at dawn.")
///     .schema(json!({"type": "object", "required": ["scene"],
///                    "properties": {"scene": {"type": "string"}}}));
/// let scene = call_as::<Scene>(&request)?;
/// println!("{} ({} requests)", scene.data.scene, scene.response.attempts().map_or(1, |a| a.count));
/// # Ok::<(), callai_sdk::CallAsError>(())
/// ```
pub fn call_as<T: DeserializeOwned>(request: &Request) -> Result<Structured<T>, CallAsError> {
    let response = call(request)?;
    let data = response
        .data_as()
        .map_err(|e| CallAsError::Decode(e.to_string()))?;
    Ok(Structured { data, response })
}
