//! The provider request for each attempt: the caller's request, with the
//! corrective instruction of a schema retry, the fallback's conversion
//! prompt, or the schema written into the prompt in prompt mode.

use crate::budget::MAX_COMPLAINT_BYTES;
use crate::provider::{ProviderRequest, StructuredRequest, ToolsRequest};
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
    /// A corrective instruction after an unusable tool call, quoting the
    /// complaint that names the tool.
    ToolCorrective(String),
    /// The natural-language fallback, turning this prose into JSON.
    Fallback(String),
}

/// At most [`MAX_COMPLAINT_BYTES`] of a complaint, cut at a character
/// boundary: what a corrective retry quotes is bounded before the call
/// starts, so that a budget can reserve it.
fn quoted(complaint: &str) -> &str {
    if complaint.len() <= MAX_COMPLAINT_BYTES {
        return complaint;
    }
    let cut = (0..=MAX_COMPLAINT_BYTES)
        .rev()
        .find(|i| complaint.is_char_boundary(*i))
        .unwrap_or(0);
    &complaint[..cut]
}

/// Builds one attempt's request; `structured` is the mode and the compiled
/// schema of a structured call.
pub(super) fn build(
    r: &CallRequest,
    model: &str,
    max_tokens: u32,
    structured: Option<(StructuredOutput, &Arc<Value>)>,
    tools: Option<&ToolsRequest>,
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
            "Your previous reply could not be used: {}. Reply again with only \
             a JSON value that satisfies the required JSON Schema, and nothing else.",
            quoted(complaint)
        ))),
        Extra::ToolCorrective(complaint) => messages.push(Message::user(format!(
            "Your previous tool call could not be used: {}. Call the tool again with \
             arguments that satisfy its parameters schema.",
            quoted(complaint)
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
        token_limit_field: r.token_limit_field,
        stop_sequences: r.stop_sequences.clone().unwrap_or_default(),
        structured: structured.map(|(mode, schema)| StructuredRequest {
            mode,
            schema: schema.clone(),
        }),
        tools: tools.cloned(),
        prompt_cache: match extra {
            Extra::Fallback(_) => None,
            _ => r.prompt_cache.clone(),
        },
        thinking: r.thinking.clone(),
        embedding: r.embedding.clone(),
        reasoning_effort: r.reasoning_effort.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::request_bound;
    use callai_wire::RetryField;

    /// Every fixed text a retry carries fits the bound a budget reserves
    /// for it, whatever it quotes.
    #[test]
    fn retries_carry_no_more_than_the_worst_case_reserves() {
        let r = CallRequest::from_json(
            r#"{"messages": [{"role": "user", "content": "a scene"}], "systemPrompt": "be brief"}"#,
            RetryField::Honoured,
        )
        .unwrap();
        let schema = Arc::new(serde_json::json!({"type": "object", "required": ["scene"]}));
        let schema_bytes = schema.to_string().len() as u64;
        let bare = request_bound(&build(&r, "m", 10, None, None, &Extra::Nothing), 0);
        let fixed = crate::budget::worst_case::FIXED_TEXT_BYTES;
        for mode in [StructuredOutput::Native, StructuredOutput::Prompt] {
            let s = Some((mode, &schema));
            let first = request_bound(&build(&r, "m", 10, s, None, &Extra::Nothing), schema_bytes);
            assert!(first <= bare + 2 * schema_bytes + fixed, "{mode:?}");
            let long = "é".repeat(5000);
            let corrective = build(&r, "m", 10, s, None, &Extra::Corrective(long.clone()));
            let bound = request_bound(&corrective, schema_bytes);
            let tool = build(&r, "m", 10, s, None, &Extra::ToolCorrective(long));
            assert!(request_bound(&tool, schema_bytes) <= bound, "{mode:?}");
            assert!(
                bound <= bare + 2 * schema_bytes + 2 * fixed + MAX_COMPLAINT_BYTES as u64 + 16,
                "{mode:?}: {bound}"
            );
            let prose = "p".repeat(80);
            let fallback = build(&r, "m", 10, s, None, &Extra::Fallback(prose));
            let bound = request_bound(&fallback, schema_bytes);
            assert!(
                bound <= 80 + 3 * schema_bytes + 2 * fixed + 16 + 64,
                "{mode:?}: {bound}"
            );
        }
    }
}
