//! WIT types to the engine's own types and back.

use super::bindings::openwop::callai::types as wit;
use crate::error::{CallError, ErrorCode};
use crate::request::{CallRequest, Message, RetryPolicy, Role};
use crate::result::{CallResult, FinishReason, StructuredMode};

/// The typed entry's request, validated as the JSON entry's is.
pub(super) fn request_from_wit(
    r: wit::CallRequest,
    honour_retry: bool,
) -> Result<CallRequest, CallError> {
    let response_schema = r
        .response_schema
        .map(|text| {
            serde_json::from_str(&text).map_err(|e| {
                CallError::validation("responseSchema", format!("is not valid JSON: {e}"))
            })
        })
        .transpose()?;
    let request = CallRequest {
        provider: r.provider,
        model: r.model,
        system_prompt: r.system_prompt,
        messages: r
            .messages
            .into_iter()
            .map(|m| Message {
                role: match m.role {
                    wit::Role::User => Role::User,
                    wit::Role::Assistant => Role::Assistant,
                    wit::Role::System => Role::System,
                },
                content: m.content,
            })
            .collect(),
        temperature: r.temperature,
        max_tokens: r.max_tokens,
        stop_sequences: r.stop_sequences,
        response_schema,
        retry: match honour_retry {
            true => r.retry.map(|p| RetryPolicy {
                max_attempts: p.max_attempts,
                grow_max_tokens: p.grow_max_tokens,
            }),
            false => None,
        },
    };
    request.validate(honour_retry)?;
    Ok(request)
}

/// The bytes a typed request carries, as `limits.maxRequestBytes` counts them.
pub(super) fn request_size(r: &wit::CallRequest) -> usize {
    let text = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    r.messages.iter().map(|m| m.content.len()).sum::<usize>()
        + text(&r.system_prompt)
        + text(&r.response_schema)
        + text(&r.provider)
        + text(&r.model)
        + r.stop_sequences
            .iter()
            .flatten()
            .map(String::len)
            .sum::<usize>()
}

pub(super) fn result_to_wit(r: CallResult) -> wit::CallResult {
    wit::CallResult {
        content: r.content,
        data: r.data.map(|d| d.to_string()),
        usage: r.usage.map(|u| wit::Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            total_tokens: u.total_tokens,
        }),
        finish_reason: r.finish_reason.map(|f| match f {
            FinishReason::Stop => wit::FinishReason::Stop,
            FinishReason::Length => wit::FinishReason::Length,
            FinishReason::ContentFilter => wit::FinishReason::ContentFilter,
            FinishReason::ToolCall => wit::FinishReason::ToolCall,
            FinishReason::Other => wit::FinishReason::Other,
        }),
        model: r.model,
        attempts: r.attempts.map(|a| wit::Attempts {
            count: a.count,
            output_tokens: a.output_tokens,
            usage_complete: a.usage_complete,
            structured_output: a.structured_output.map(|s| match s {
                StructuredMode::Native => wit::StructuredOutput::Native,
                StructuredMode::Prompt => wit::StructuredOutput::Prompt,
            }),
        }),
    }
}

pub(super) fn error_to_wit(e: &CallError) -> wit::CallError {
    wit::CallError {
        code: match e.code {
            ErrorCode::ValidationError => wit::ErrorCode::ValidationError,
            ErrorCode::PolicyDenied => wit::ErrorCode::PolicyDenied,
            ErrorCode::EnvelopeInvalid => wit::ErrorCode::EnvelopeInvalid,
            ErrorCode::EnvelopeTruncationUnrecoverable => {
                wit::ErrorCode::EnvelopeTruncationUnrecoverable
            }
            ErrorCode::EnvelopeRefusal => wit::ErrorCode::EnvelopeRefusal,
            ErrorCode::ProviderUnavailable => wit::ErrorCode::ProviderUnavailable,
            ErrorCode::ProviderRejected => wit::ErrorCode::ProviderRejected,
            ErrorCode::LimitExceeded => wit::ErrorCode::LimitExceeded,
        },
        message: e.message.clone(),
        details: e
            .details
            .as_ref()
            .map(|d| serde_json::Value::Object(d.clone()).to_string()),
    }
}
