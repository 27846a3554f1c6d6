//! A node's own failure.

use crate::budget::BudgetError;
use crate::call::CallAsError;
use crate::request::RetryError;
use callai_wire::CallError;
use std::fmt;

/// Why a node failed; the host reports its text as the run's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeError(String);

impl NodeError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NodeError {}

impl From<CallError> for NodeError {
    /// `code: message` (`envelope_invalid: ...`), as the TypeScript and
    /// Python SDKs word a failed call: the host's run error carries it as
    /// text, not as JSON inside a string.
    fn from(e: CallError) -> Self {
        Self(e.to_string())
    }
}

impl From<CallAsError> for NodeError {
    fn from(e: CallAsError) -> Self {
        match e {
            CallAsError::Call(e) => e.into(),
            CallAsError::Decode(_) => Self(e.to_string()),
        }
    }
}

impl From<BudgetError> for NodeError {
    fn from(e: BudgetError) -> Self {
        Self(e.to_string())
    }
}

impl From<RetryError> for NodeError {
    fn from(e: RetryError) -> Self {
        Self(e.to_string())
    }
}

impl From<serde_json::Error> for NodeError {
    fn from(e: serde_json::Error) -> Self {
        Self(format!("invalid JSON: {e}"))
    }
}

impl From<String> for NodeError {
    fn from(s: String) -> Self {
        Self(s)
    }
}

impl From<&str> for NodeError {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}
