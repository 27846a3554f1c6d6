//! What a call's trace keeps of its text. By default only the SHA-256 of
//! its prompt and of each answer: two traces can be told alike or not, and
//! neither can be read. With `[runlog] keepText = true`, the text itself,
//! each piece cut at [`MAX_KEPT_BYTES`]. Both are the JSON text of the
//! wire's shapes: a prompt `{"system", "messages"}`, an answer `{"content",
//! "toolCalls"}`; the hash is of the whole, even when the text is cut.

use callai_engine::ProviderReply;
use callai_engine::wire::{CallRequest, Message, ToolCall};
use serde::{Serialize, Serializer};
use sha2::{Digest, Sha256};

/// The most of one prompt or answer a trace keeps; past it the text is
/// cut (at a character boundary) and marked so.
pub const MAX_KEPT_BYTES: usize = 64 << 10;

/// Whether traces keep their calls' text or only its hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TraceText {
    /// Only the SHA-256 (the default: a trace is safe to show).
    #[default]
    Hashed,
    /// The text too (`[runlog] keepText = true`).
    Kept,
    /// Nothing, not even the hash: no trace is kept (`[server] keepCalls =
    /// 0`), so nothing is serialized or hashed for one.
    Unkept,
}

/// A prompt or an answer, as a trace keeps it.
#[derive(Debug, Clone, Serialize)]
pub struct TracedText {
    /// The SHA-256 of its JSON text, hex.
    #[serde(serialize_with = "as_hex")]
    pub sha256: [u8; 32],
    /// The text, with `keepText`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The text was longer than [`MAX_KEPT_BYTES`] and is cut.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
}

fn as_hex<S: Serializer>(sha: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex::encode(sha))
}

#[derive(Serialize)]
struct Prompt<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<&'a str>,
    messages: &'a [Message],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Answer<'a> {
    content: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tool_calls: &'a [ToolCall],
}

impl TraceText {
    /// The mode `[runlog] keepText` asks for.
    pub fn of(keep_text: bool) -> Self {
        if keep_text { Self::Kept } else { Self::Hashed }
    }

    /// The call's prompt: its system instruction and messages, each inline
    /// image as its media type, SHA-256 and length, never its bytes.
    pub fn prompt(self, request: &CallRequest) -> Option<TracedText> {
        let prompt = Prompt {
            system: request.system_prompt.as_deref(),
            messages: &request.messages,
        };
        if self != Self::Unkept && request.messages.iter().any(|m| !m.images.is_empty()) {
            let mut value = serde_json::to_value(&prompt).expect("the wire's types serialize");
            callai_engine::images::without_image_bytes(&mut value);
            return self.trace(&value);
        }
        self.trace(&prompt)
    }

    /// A reply's answer: its text and tool calls.
    pub fn answer(self, reply: &ProviderReply) -> Option<TracedText> {
        self.trace(&Answer {
            content: &reply.content,
            tool_calls: &reply.tool_calls,
        })
    }

    fn trace(self, value: &impl Serialize) -> Option<TracedText> {
        Some(match self {
            Self::Unkept => return None,
            Self::Hashed => {
                // Hashed as it is written, with no text in between: sha2's
                // hashers are no `io::Write` of their own.
                let mut hashing = Hashing(Sha256::new());
                serde_json::to_writer(&mut hashing, value).expect("the wire's types serialize");
                TracedText {
                    sha256: hashing.0.finalize().into(),
                    text: None,
                    cut: false,
                }
            }
            Self::Kept => {
                let mut text = serde_json::to_string(value).expect("the wire's types serialize");
                let sha256 = Sha256::digest(text.as_bytes()).into();
                let cut = text.len() > MAX_KEPT_BYTES;
                if cut {
                    let end = text.floor_char_boundary(MAX_KEPT_BYTES);
                    text.truncate(end);
                }
                TracedText {
                    sha256,
                    text: Some(text),
                    cut,
                }
            }
        })
    }
}

/// Feeds what is written to a SHA-256.
struct Hashing(Sha256);

impl std::io::Write for Hashing {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use callai_engine::StopReason;
    use serde_json::json;

    fn request(text: &str) -> CallRequest {
        serde_json::from_value(json!({"systemPrompt": "be brief",
                                      "messages": [{"role": "user", "content": text}]}))
        .unwrap()
    }

    fn reply(content: &str) -> ProviderReply {
        ProviderReply {
            content: content.into(),
            tool_calls: Vec::new(),
            stop: StopReason::Stop,
            input_tokens: None,
            cached_input_tokens: None,
            cache_write_input_tokens: None,
            reasoning_tokens: None,
            output_tokens: None,
            model: None,
            status: None,
            thinking: Vec::new(),
        }
    }

    #[test]
    fn by_default_only_the_hash_is_kept_and_it_is_the_kept_texts_own() {
        let hashed = TraceText::Hashed.prompt(&request("a scene")).unwrap();
        assert!(hashed.text.is_none());
        let kept = TraceText::Kept.prompt(&request("a scene")).unwrap();
        assert_eq!(kept.sha256, hashed.sha256, "one hash, kept or not");
        let text = kept.text.unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            json!({"system": "be brief", "messages": [{"role": "user", "content": "a scene"}]})
        );
        assert_eq!(
            <[u8; 32]>::from(Sha256::digest(text.as_bytes())),
            kept.sha256
        );
        assert_ne!(
            TraceText::Hashed
                .prompt(&request("another"))
                .unwrap()
                .sha256,
            hashed.sha256
        );
        let answer = TraceText::Kept.answer(&reply("ok")).unwrap();
        assert_eq!(answer.text.as_deref(), Some(r#"{"content":"ok"}"#));
        let shown = serde_json::to_value(TraceText::Hashed.answer(&reply("ok")).unwrap()).unwrap();
        assert_eq!(shown, json!({"sha256": hex::encode(answer.sha256)}));
    }

    #[test]
    fn a_long_text_is_cut_at_a_character_and_marked_and_hashed_whole() {
        let long = "é".repeat(MAX_KEPT_BYTES);
        let kept = TraceText::Kept.answer(&reply(&long)).unwrap();
        let text = kept.text.as_deref().unwrap();
        assert!(kept.cut && text.len() <= MAX_KEPT_BYTES && text.len() > MAX_KEPT_BYTES - 4);
        assert_eq!(
            kept.sha256,
            TraceText::Hashed.answer(&reply(&long)).unwrap().sha256
        );
        assert!(!TraceText::Kept.answer(&reply("short")).unwrap().cut);
    }

    #[test]
    fn a_store_that_keeps_no_trace_hashes_nothing_for_one() {
        assert!(TraceText::Unkept.answer(&reply("short")).is_none());
        let unkept = crate::traces::CallStore::new(0, TraceText::Kept);
        assert_eq!(unkept.text(), TraceText::Unkept);
        assert_eq!(
            crate::traces::CallStore::new(1, TraceText::Kept).text(),
            TraceText::Kept
        );
    }

    #[test]
    fn a_prompts_images_are_kept_as_their_digest_never_their_bytes() {
        let data = format!("data:image/png;base64,{}", "QUJD".repeat(1000));
        let request: CallRequest = serde_json::from_value(json!({"messages": [
            {"role": "user", "content": "look", "images": [{"url": data}]}]}))
        .unwrap();
        let kept = TraceText::Kept.prompt(&request).unwrap();
        let text = kept.text.as_deref().unwrap();
        assert!(
            !text.contains("QUJD") && text.contains("image/png"),
            "{text}"
        );
        assert_eq!(
            TraceText::Hashed.prompt(&request).unwrap().sha256,
            kept.sha256,
            "one hash, kept or not"
        );
    }
}
