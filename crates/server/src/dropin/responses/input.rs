//! A Responses request's `input`: a string, or items (messages with
//! `input_text` / `input_image` parts, an assistant's `output_text`, its
//! `function_call`s and their `function_call_output`s), read into the
//! engine's conversation. Each item is read as far as this host reads it;
//! what it cannot take is refused naming the item's field.

use crate::dropin::images;
use crate::error::ApiError;
use callai_engine::wire::{Image, Message, Role, ToolCall};
use serde::Deserialize;
use serde::de::IgnoredAny;

/// `input`: a string (one user message), or items.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum Input {
    Text(String),
    Items(Vec<Item>),
}

/// One input item, as far as this host reads it; its `type` says which
/// fields matter (a message may leave it out).
#[derive(Debug, Deserialize)]
pub(super) struct Item {
    #[serde(rename = "type")]
    kind: Option<String>,
    role: Option<String>,
    content: Option<Content>,
    call_id: Option<String>,
    name: Option<String>,
    arguments: Option<String>,
    output: Option<Content>,
    #[serde(rename = "id")]
    _id: Option<IgnoredAny>,
    #[serde(rename = "status")]
    _status: Option<IgnoredAny>,
}

/// A message's content, or a tool's output: a string or parts.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

/// One part of a message's content.
#[derive(Debug, Deserialize)]
pub(super) struct ContentPart {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
    /// An `input_image`'s URL (`https://…` or a `data:` URL).
    image_url: Option<String>,
    detail: Option<String>,
    file_id: Option<String>,
    /// A `refusal` part's text.
    refusal: Option<String>,
}

/// The leading system and developer messages' texts, and the rest of the
/// conversation in the engine's terms.
pub(super) fn conversation(input: Input) -> Result<(Vec<String>, Vec<Message>), ApiError> {
    let items = match input {
        Input::Text(text) => return Ok((Vec::new(), vec![Message::user(text)])),
        Input::Items(items) => items,
    };
    let mut system = Vec::new();
    let mut messages: Vec<Message> = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let at = format!("input[{i}]");
        match item.kind.as_deref().unwrap_or("message") {
            "message" => {
                let role = item.role.as_deref().unwrap_or("");
                let Some(content) = item.content else {
                    return Err(ApiError::invalid(&format!("{at}.content"), "is required"));
                };
                let (text, images) = message_content(&format!("{at}.content"), role, content)?;
                let role = match role {
                    "system" | "developer" if messages.is_empty() => {
                        system.push(text);
                        continue;
                    }
                    "system" | "developer" => Role::System,
                    "user" => Role::User,
                    "assistant" => Role::Assistant,
                    other => {
                        return Err(ApiError::invalid(
                            &format!("{at}.role"),
                            format!(
                                "{other:?}: this host takes system, developer, user and assistant messages"
                            ),
                        ));
                    }
                };
                messages.push(Message {
                    images,
                    ..Message::new(role, text)
                });
            }
            "function_call" => {
                let field = |name: &str| ApiError::invalid(&format!("{at}.{name}"), "is required");
                let call = ToolCall {
                    id: item.call_id.ok_or_else(|| field("call_id"))?,
                    name: item.name.ok_or_else(|| field("name"))?,
                    arguments: item.arguments.ok_or_else(|| field("arguments"))?,
                };
                // Calls the model made together are one assistant turn,
                // after the text it said with them.
                match messages.last_mut() {
                    Some(last) if last.role == Role::Assistant && last.tool_call_id.is_none() => {
                        last.tool_calls.push(call);
                    }
                    _ => messages.push(Message::tool_calls("", vec![call])),
                }
            }
            "function_call_output" => {
                let Some(id) = item.call_id else {
                    let param = format!("{at}.call_id");
                    return Err(ApiError::invalid(&param, "is required"));
                };
                let output = match item.output {
                    Some(output) => text_only(&format!("{at}.output"), output)?,
                    None => return Err(ApiError::invalid(&format!("{at}.output"), "is required")),
                };
                messages.push(Message::tool_result(id, output));
            }
            // A reasoning model's own summary of its reasoning, handed back
            // from an earlier response: no provider of this host reads
            // another's reasoning, so it is left out of the conversation.
            "reasoning" => {}
            other => {
                return Err(ApiError::invalid(
                    &format!("{at}.type"),
                    format!(
                        "{other:?}: this host takes message, function_call, function_call_output and reasoning items"
                    ),
                ));
            }
        }
    }
    Ok((system, messages))
}

/// A message's text and images: a user's `input_text` and `input_image`
/// parts, an assistant's `output_text` and `refusal` parts, a system or
/// developer message's `input_text` parts.
fn message_content(
    param: &str,
    role: &str,
    content: Content,
) -> Result<(String, Vec<Image>), ApiError> {
    let parts = match content {
        Content::Text(text) => return Ok((text, Vec::new())),
        Content::Parts(parts) => parts,
    };
    let (mut text, mut images) = (String::new(), Vec::new());
    for (j, part) in parts.into_iter().enumerate() {
        let at = format!("{param}[{j}]");
        match (part.kind.as_str(), role) {
            ("input_text", _) | ("output_text", "assistant") => {
                let Some(t) = part.text else {
                    return Err(ApiError::invalid(&format!("{at}.text"), "is required"));
                };
                text.push_str(&t);
            }
            ("refusal", "assistant") => text.push_str(part.refusal.as_deref().unwrap_or("")),
            ("input_image", "user") => {
                if part.file_id.is_some() {
                    return Err(ApiError::invalid(
                        &format!("{at}.file_id"),
                        "this host keeps no files: send the image as `image_url` (a URL or a data: URL)",
                    ));
                }
                let Some(url) = part.image_url else {
                    return Err(ApiError::invalid(&format!("{at}.image_url"), "is required"));
                };
                images.push(images::from_url(
                    &format!("{at}.image_url"),
                    url,
                    part.detail,
                )?);
            }
            (kind, role) => {
                return Err(ApiError::invalid(
                    &format!("{at}.type"),
                    format!(
                        "{kind:?} in a {role} message: this host takes input_text and input_image (a user's), output_text and refusal (an assistant's)"
                    ),
                ));
            }
        }
    }
    Ok((text, images))
}

/// A tool's output: a string, or `input_text` parts joined.
fn text_only(param: &str, content: Content) -> Result<String, ApiError> {
    match content {
        Content::Text(text) => Ok(text),
        Content::Parts(parts) => {
            let mut text = String::new();
            for (j, part) in parts.into_iter().enumerate() {
                match (part.kind.as_str(), part.text) {
                    ("input_text" | "output_text", Some(t)) => text.push_str(&t),
                    (kind, _) => {
                        return Err(ApiError::invalid(
                            &format!("{param}[{j}]"),
                            format!("a part of type {kind:?}: a tool's output here is text"),
                        ));
                    }
                }
            }
            Ok(text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Result<(Vec<String>, Vec<Message>), ApiError> {
        conversation(serde_json::from_str(json).unwrap())
    }

    #[test]
    fn a_string_is_one_user_message() {
        let (system, messages) = read(r#""hi""#).unwrap();
        assert!(system.is_empty());
        assert_eq!(messages, vec![Message::user("hi")]);
    }

    #[test]
    fn a_function_call_loop_reads_into_turns() {
        let (system, messages) = read(
            r#"[{"role": "developer", "content": "be brief"},
                {"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
                {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
                 "content": [{"type": "output_text", "text": "Looking.", "annotations": []}]},
                {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "w", "arguments": "{}"},
                {"type": "function_call", "call_id": "c2", "name": "w", "arguments": "{\"a\":1}"},
                {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
                {"type": "reasoning", "id": "rs_1", "summary": []}]"#,
        )
        .unwrap();
        assert_eq!(system, vec!["be brief".to_owned()]);
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[1].content, "Looking.");
        let ids: Vec<&str> = messages[1]
            .tool_calls
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        assert_eq!(ids, ["c1", "c2"]);
        assert_eq!(messages[2], Message::tool_result("c1", "sunny"));
    }

    #[test]
    fn what_it_cannot_take_is_refused_by_name() {
        let cases = [
            (
                r#"[{"type": "item_reference", "id": "x"}]"#,
                "input[0].type",
            ),
            (
                r#"[{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]"#,
                "input[0].content[0].type",
            ),
            (
                r#"[{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]"#,
                "input[0].content[0].file_id",
            ),
            (
                r#"[{"type": "function_call", "name": "w", "arguments": "{}"}]"#,
                "input[0].call_id",
            ),
            (r#"[{"role": "tool", "content": "x"}]"#, "input[0].role"),
        ];
        for (json, field) in cases {
            let e = read(json).unwrap_err();
            assert!(
                e.message.starts_with(&format!("{field}:")),
                "{json}: {}",
                e.message
            );
        }
    }
}
