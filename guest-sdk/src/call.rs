//! ctx.callAI from inside the sandbox.

use crate::bindings::openwop::callai::ai;
use crate::error::CallError;
use crate::request::Request;
use crate::response::Response;

/// The host's `aiProviders.callAccounting` flags (RFC 0248 §C).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallAccounting {
    /// Results carry [`Response::attempts`].
    pub attempts: bool,
    /// The host honours [`crate::Retry`].
    pub retry_policy: bool,
}

/// One model completion.
pub fn call(request: &Request) -> Result<Response, CallError> {
    ai::call_ai(&request.to_wit())
        .map(Response::from_wit)
        .map_err(CallError::from_wit)
}

/// One model completion in the spec's wire JSON: the request as written
/// (malformed input reaches the host and is refused there), the result's
/// wire JSON back.
pub fn call_json(request: &str) -> Result<String, CallError> {
    ai::call_ai_json(request).map_err(CallError::from_wit)
}

/// What the host advertises: check before relying on `attempts` or `retry`.
pub fn call_accounting() -> CallAccounting {
    let flags = ai::call_accounting();
    CallAccounting {
        attempts: flags.attempts,
        retry_policy: flags.retry_policy,
    }
}
