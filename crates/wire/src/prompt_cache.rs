//! Prompt caching a client asked for: the Messages API's `cache_control`
//! breakpoints, which a drop-in keeps beside the request (never in its
//! JSON) for a provider that takes them (an Anthropic-kind one).

use serde_json::Value;

/// Where a request's `cache_control` breakpoints were, each with the value
/// the client sent (`{"type": "ephemeral"}`, with its `ttl` when it gave
/// one), passed on as it came.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptCache {
    /// The system prompt's blocks as the client sent them: their texts,
    /// joined, are the request's `systemPrompt`. Empty when the system
    /// prompt had no breakpoint (it is then sent as one text).
    pub system: Vec<SystemBlock>,
    /// The messages (indexes into the request's `messages`) whose last
    /// block carries a breakpoint.
    pub messages: Vec<(usize, Value)>,
    /// The tools (indexes into the request's `tools`) that carry one.
    pub tools: Vec<(usize, Value)>,
    /// The first field that set one (`system[1].cache_control`): what a
    /// refusal names when no target of the call takes it.
    pub field: String,
}

/// One block of a system prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct SystemBlock {
    /// Its text.
    pub text: String,
    /// Its breakpoint.
    pub cache_control: Option<Value>,
}

impl PromptCache {
    /// The breakpoint of message `i`, if it has one.
    pub fn message(&self, i: usize) -> Option<&Value> {
        self.messages
            .iter()
            .find(|(at, _)| *at == i)
            .map(|(_, v)| v)
    }

    /// The breakpoint of tool `i`, if it has one.
    pub fn tool(&self, i: usize) -> Option<&Value> {
        self.tools.iter().find(|(at, _)| *at == i).map(|(_, v)| v)
    }

    /// The system prompt `joined` (its parts joined by blank lines) as the
    /// client's blocks and the rest: `None` when no system block carries a
    /// breakpoint, or `joined` does not begin with their texts (the
    /// prompt was changed on the way); the rest (a prompt-mode
    /// instruction, a system message) is trimmed of the newlines joining
    /// it on, and may be empty.
    pub fn split_system<'j>(&self, joined: &'j str) -> Option<(&[SystemBlock], &'j str)> {
        if self.system.iter().all(|b| b.cache_control.is_none()) {
            return None;
        }
        let own: String = self.system.iter().map(|b| b.text.as_str()).collect();
        let rest = joined.strip_prefix(own.as_str())?;
        Some((&self.system, rest.trim_start_matches('\n')))
    }

    /// Whether it holds no breakpoint at all.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
            && self.tools.is_empty()
            && self.system.iter().all(|b| b.cache_control.is_none())
    }
}
