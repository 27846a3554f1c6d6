//! A request as read, before the host's checks: its well-shaped fields,
//! each refused field with its refusal, `retry` read whether or not it is
//! honoured, and the keys that are none of the spec's; and what the host
//! makes of it ([`ParsedRequest::check`]).

use super::retry::ParsedRetry;
use super::shape::Kind;
use crate::error::CallError;
use crate::request::{CallRequest, RetryField, RetryPolicy};
use crate::unknown::UnknownField;

/// The request's fields, in the order their refusals are reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Field {
    Provider,
    Model,
    SystemPrompt,
    Messages,
    Temperature,
    MaxTokens,
    StopSequences,
    ResponseSchema,
    Tools,
    ToolChoice,
    ParallelToolCalls,
}

/// A ctx.callAI request as read from its wire JSON, before the host's
/// checks: each field read into its type or refused, naming it.
///
/// It deserializes from any JSON object (a refused field is kept, not a
/// serde error), so a body that carries a request (`POST /v1/call`) reads
/// it in the same pass as the rest; [`ParsedRequest::check`] then says
/// what the host makes of it. A value that is not an object is serde's
/// `invalid type: ..., expected a map`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedRequest {
    /// The well-shaped fields.
    pub(super) request: CallRequest,
    /// Whether `messages` was sent.
    pub(super) has_messages: bool,
    /// The refused fields, each with its refusal (empty for a request of
    /// the right shape: nothing is allocated for it).
    pub(super) refused: Vec<(Field, CallError)>,
    /// `retry`, read whether or not the host honours it.
    pub(super) retry: Option<Result<RetryPolicy, CallError>>,
    /// The top-level keys that are none of the spec's.
    pub(super) unknown: Vec<String>,
}

impl ParsedRequest {
    /// The request, or its first refusal: a field of the wrong shape (in
    /// the order the spec lists them), then `retry` (when `retry` says the
    /// host honours it; an ignored `retry` is dropped, malformed or not),
    /// then the ranges. With it, the top-level fields the spec does not
    /// define, each with the field it looks like, in byte order.
    pub fn check(self, retry: RetryField) -> Result<(CallRequest, Vec<UnknownField>), CallError> {
        let Self {
            mut request,
            has_messages,
            refused,
            retry: policy,
            unknown,
        } = self;
        let mut refused = refused;
        if !has_messages {
            let missing = CallError::validation("messages", "is required");
            refused.push((Field::Messages, missing));
        }
        if let Some((_, e)) = refused.into_iter().min_by_key(|(field, _)| *field) {
            return Err(e);
        }
        request.retry = match (retry, policy) {
            (RetryField::Honoured, Some(policy)) => Some(policy?),
            _ => None,
        };
        request.check(retry)?;
        Ok((request, crate::unknown::named(unknown)))
    }

    /// A request a server built in its types (a drop-in endpoint's mapping
    /// of another API's request), with the `retry` it read: checked as one
    /// read from JSON is, its schema's shape too (a schema is an object or
    /// a boolean).
    pub fn typed(mut request: CallRequest, retry: Option<ParsedRetry>) -> Self {
        let mut refused = Vec::new();
        if let Some(schema) = &request.response_schema
            && !(schema.is_object() || schema.is_boolean())
        {
            refused.push((
                Field::ResponseSchema,
                CallError::validation(
                    "responseSchema",
                    format!(
                        "must be a JSON Schema (an object), got {}",
                        Kind::of_value(schema)
                    ),
                ),
            ));
            request.response_schema = None;
        }
        request.retry = None;
        Self {
            request,
            has_messages: true,
            refused,
            retry: retry.map(|r| r.0),
            unknown: Vec::new(),
        }
    }

    /// The fields read so far that have their shape (for the host's size
    /// limit, counted before the checks).
    pub fn request(&self) -> &CallRequest {
        &self.request
    }
}
