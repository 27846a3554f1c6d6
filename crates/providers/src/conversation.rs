//! A request's conversation as the Messages and Converse APIs take it:
//! the system prompt apart (its parts, then each system-role message), the
//! other messages as `user` and `assistant` turns (a tool's result is the
//! user's), each with the thinking blocks that lead it and the client's
//! prompt-caching breakpoint that ends it.

use callai_engine::ProviderRequest;
use callai_wire::{Message, Role, ThinkingBlock};
use serde_json::Value;

/// One message of the conversation, with what goes around it.
pub(crate) struct Said<'a> {
    /// `user` or `assistant`.
    pub role: &'static str,
    pub message: &'a Message,
    /// The thinking blocks of an earlier answer, in front of it.
    pub thinking: &'a [ThinkingBlock],
    /// The client's `cache_control` at its end, if it set one.
    pub breakpoint: Option<&'a Value>,
}

/// `r`'s system prompt parts, and its other messages in order.
pub(crate) fn conversation(r: &ProviderRequest) -> (Vec<&str>, Vec<Said<'_>>) {
    let mut system: Vec<&str> = r.system_prompt.iter().map(String::as_str).collect();
    let mut said = Vec::with_capacity(r.messages.len());
    for (i, message) in r.messages.iter().enumerate() {
        let role = match message.role {
            Role::System => {
                system.push(&message.content);
                continue;
            }
            Role::User | Role::Tool => "user",
            Role::Assistant => "assistant",
        };
        said.push(Said {
            role,
            message,
            thinking: r.thinking.as_deref().map_or(&[][..], |t| t.blocks_of(i)),
            breakpoint: r.prompt_cache.as_deref().and_then(|c| c.message(i)),
        });
    }
    (system, said)
}
