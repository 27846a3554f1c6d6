//! What the gateway refuses or fails with: one enum, each variant a kind
//! of answer, never a status code. The HTTP edge maps each to its API's
//! shape (`callai-server`'s `From<GatewayError> for ApiError`).

use callai_engine::wire::CallError;

/// Why the gateway did not do what it was asked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GatewayError {
    /// A field of the request is refused; `field` names it, in the words
    /// of the request it came in (`script`, `callai.script`, `runId`).
    #[error("{field}: {message}")]
    Invalid {
        /// The field.
        field: String,
        /// Why, for a person.
        message: String,
    },
    /// A ctx.callAI call failed, or was refused before any request, with
    /// its own code (`validation_error`, `policy_denied`, a budget's
    /// refusal, `provider_unavailable`, ...).
    #[error("{}", .0.message)]
    Call(CallError),
    /// No such pack, run or call for this caller (another tenant's is not
    /// it).
    #[error("{0}")]
    NotFound(String),
    /// A run id or a name already in use.
    #[error("{0}")]
    Conflict(String),
    /// The caller may not do this (a tenant naming another, changing a
    /// shared pack); `field`, when it is about one.
    #[error("{message}")]
    Forbidden {
        /// Why, for a person.
        message: String,
        /// The field it is about, if any.
        field: Option<&'static str>,
    },
    /// A body or a component over the bound `key` (`server.maxPackBytes`,
    /// `server.maxPackFunctionBytes`, ...).
    #[error("{message}")]
    TooLarge {
        /// The config key of the bound.
        key: &'static str,
        /// What was over it.
        message: String,
    },
    /// A run or a call went past the `[limits]` bound `key`.
    #[error("{message}")]
    LimitExceeded {
        /// The config key of the limit (`limits.wallMs`, ...).
        key: &'static str,
        /// What went past it.
        message: String,
    },
    /// Every run slot and queue place is taken: try again soon.
    #[error("{0}")]
    Overloaded(String),
    /// The host is shutting down: try another, or again soon.
    #[error("{0}")]
    ShuttingDown(String),
    /// The host holds as many uploaded packs as it keeps.
    #[error("{0}")]
    TooManyPacks(String),
    /// A fault of this host (its run log, a task), never of the request.
    #[error("{0}")]
    Internal(String),
}

impl GatewayError {
    /// The refusal of `field`, for `message`.
    pub fn invalid(field: &str, message: impl std::fmt::Display) -> Self {
        Self::Invalid {
            field: field.to_owned(),
            message: message.to_string(),
        }
    }

    /// No such thing, as `message` says.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::NotFound(message.into())
    }

    /// Already there, as `message` says.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::Conflict(message.into())
    }

    /// A fault of this host, as `message` says.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::Internal(message.into())
    }

    /// Not for this caller, as `message` says; about `field` when given.
    pub fn forbidden(message: impl Into<String>, field: Option<&'static str>) -> Self {
        Self::Forbidden {
            message: message.into(),
            field,
        }
    }

    /// The message, as a person reads it (for the places that keep only a
    /// message: a run taken over whose pack fails to compile).
    pub fn message(&self) -> String {
        self.to_string()
    }
}

impl From<CallError> for GatewayError {
    fn from(error: CallError) -> Self {
        Self::Call(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_field_is_named_first() {
        let e = GatewayError::invalid("runId", "use 1 to 128 letters");
        assert_eq!(e.to_string(), "runId: use 1 to 128 letters");
        let e = GatewayError::from(CallError::validation("messages", "missing"));
        assert!(matches!(&e, GatewayError::Call(c) if c.field() == Some("messages")));
    }
}
