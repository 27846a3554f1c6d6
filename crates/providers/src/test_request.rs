//! The provider request the wire formats' unit tests start from.

use callai_engine::ProviderRequest;
use callai_wire::Message;

/// A request of `messages` with a system prompt, a temperature, a 64-token
/// budget and a stop sequence, and nothing else set.
pub(crate) fn request(messages: Vec<Message>) -> ProviderRequest {
    ProviderRequest {
        model: None,
        system_prompt: Some("Be brief.".into()),
        messages,
        temperature: Some(0.5),
        max_tokens: 64,
        stop_sequences: vec!["END".into()],
        structured: None,
        tools: None,
        token_limit_field: None,
        prompt_cache: None,
        thinking: None,
        embedding: None,
        reasoning_effort: None,
    }
}
