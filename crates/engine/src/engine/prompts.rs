//! The provider request for each attempt: the caller's request, with the
//! corrective instruction of a schema retry, the fallback's conversion
//! prompt, or the schema written into the prompt in prompt mode.

use crate::provider::{ProviderRequest, StructuredRequest};
use callai_wire::{CallRequest, Message, StructuredOutput};
use serde_json::Value;
use std::sync::Arc;

/// What the next request carries beyond the caller's own, decided by the
/// previous reply.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Extra {
    /// Nothing: the first attempt, or after a transport failure or a
    /// truncation (a truncation retry carries no corrective text).
    Nothing,
    /// A corrective instruction quoting the validator (never the reply).
    Corrective(String),
    /// The natural-language fallback, turning this prose into JSON.
    Fallback(String),
}

/// Builds one attempt's request; `structured` is the mode and the compiled
/// schema of a structured call.
pub(super) fn build(
    r: &CallRequest,
    model: &str,
    max_tokens: u32,
    structured: Option<(StructuredOutput, &Arc<Value>)>,
    extra: &Extra,
) -> ProviderRequest {
    let mode = structured.map(|(mode, _)| mode);
    // The schema's text goes into a prompt only in prompt mode and in the
    // fallback; a native attempt never renders it.
    let schema_text = || structured.map(|(_, s)| s.to_string());
    let mut system_prompt = r.system_prompt.clone();
    let mut messages = r.messages.clone();
    match extra {
        Extra::Nothing => {}
        Extra::Corrective(complaint) => messages.push(Message::user(format!(
            "Your previous reply could not be used: {complaint}. Reply again with only \
             a JSON value that satisfies the required JSON Schema, and nothing else."
        ))),
        Extra::Fallback(prose) => {
            system_prompt =
                Some("You convert text into JSON. Reply with only the JSON value.".to_owned());
            messages = vec![Message::user(format!(
                "Turn the following text into a JSON value that satisfies the JSON \
                 Schema below.\n\nSchema:\n{}\n\nText:\n{prose}",
                schema_text().as_deref().unwrap_or("{}")
            ))];
        }
    }
    if mode == Some(StructuredOutput::Prompt)
        && let Some(schema_text) = schema_text()
    {
        let instruction = format!(
            "Reply with only a JSON value that satisfies this JSON Schema, with no \
             prose and no markdown fence:\n{schema_text}"
        );
        system_prompt = Some(match system_prompt {
            Some(s) => format!("{s}\n\n{instruction}"),
            None => instruction,
        });
    }
    ProviderRequest {
        model: Some(model.to_owned()),
        system_prompt,
        messages,
        temperature: r.temperature,
        max_tokens,
        stop_sequences: r.stop_sequences.clone().unwrap_or_default(),
        structured: structured.map(|(mode, schema)| StructuredRequest {
            mode,
            schema: schema.clone(),
        }),
    }
}
