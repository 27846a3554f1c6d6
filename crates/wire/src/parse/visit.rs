//! The request's visitor: each field read once, straight into its type,
//! its refusal kept in the field's place so the first in the fields' order
//! is the one reported (the order the spec lists them in; before this
//! reader, the order they were checked in).

use super::parsed::{Field, ParsedRequest};
use super::retry::RetryShape;
use super::shape::{Discard, Kind, Scalar, Shape, Shaped};
use crate::error::CallError;
use crate::request::{Message, Role};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;

/// A key of the request object.
enum Key {
    Field(Field),
    Retry,
    Unknown(String),
}

impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(match v {
                    "provider" => Key::Field(Field::Provider),
                    "model" => Key::Field(Field::Model),
                    "systemPrompt" => Key::Field(Field::SystemPrompt),
                    "messages" => Key::Field(Field::Messages),
                    "temperature" => Key::Field(Field::Temperature),
                    "maxTokens" => Key::Field(Field::MaxTokens),
                    "stopSequences" => Key::Field(Field::StopSequences),
                    "responseSchema" => Key::Field(Field::ResponseSchema),
                    "tools" => Key::Field(Field::Tools),
                    "toolChoice" => Key::Field(Field::ToolChoice),
                    "parallelToolCalls" => Key::Field(Field::ParallelToolCalls),
                    "retry" => Key::Retry,
                    other => Key::Unknown(other.to_owned()),
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

impl<'de> serde::Deserialize<'de> for ParsedRequest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(RequestVisitor)
    }
}

struct RequestVisitor;

impl<'de> Visitor<'de> for RequestVisitor {
    type Value = ParsedRequest;

    // Not an object is a serde error (`invalid type: ..., expected a map`);
    // the entries that read a request alone say it their own way.
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ParsedRequest, A::Error> {
        let mut parsed = ParsedRequest::default();
        let r = &mut parsed.request;
        while let Some(key) = map.next_key::<Key>()? {
            let field = match key {
                Key::Field(field) => field,
                Key::Retry => {
                    parsed.retry = Some(map.next_value_seed(Shape(RetryShape))?);
                    continue;
                }
                Key::Unknown(name) => {
                    map.next_value::<Discard>()?;
                    parsed.unknown.push(name);
                    continue;
                }
            };
            // A key sent twice: the last one counts, its refusal too.
            let outcome = match field {
                Field::Provider => map
                    .next_value::<Scalar>()?
                    .string(|| "provider".into())
                    .map(|s| r.provider = Some(s)),
                Field::Model => map
                    .next_value::<Scalar>()?
                    .string(|| "model".into())
                    .map(|s| r.model = Some(s)),
                Field::SystemPrompt => map
                    .next_value::<Scalar>()?
                    .string(|| "systemPrompt".into())
                    .map(|s| r.system_prompt = Some(s)),
                Field::Messages => {
                    parsed.has_messages = true;
                    map.next_value_seed(Shape(MessagesShape))?
                        .map(|m| r.messages = m)
                }
                Field::Temperature => map
                    .next_value::<Scalar>()?
                    .number("temperature")
                    .map(|t| r.temperature = Some(t)),
                Field::MaxTokens => map
                    .next_value::<Scalar>()?
                    .integer("maxTokens", ">= 1")
                    .map(|n| r.max_tokens = Some(n)),
                Field::StopSequences => map
                    .next_value_seed(Shape(StringsShape("stopSequences")))?
                    .map(|s| r.stop_sequences = Some(s)),
                Field::ResponseSchema => match map.next_value::<Value>()? {
                    v @ (Value::Object(_) | Value::Bool(_)) => {
                        r.response_schema = Some(v);
                        Ok(())
                    }
                    v => Err(CallError::validation(
                        "responseSchema",
                        format!(
                            "must be a JSON Schema (an object), got {}",
                            Kind::of_value(&v)
                        ),
                    )),
                },
                // Tools are the caller's schemas, read as JSON and then
                // typed, naming the field that is wrong.
                Field::Tools => {
                    typed(map.next_value::<Value>()?, "tools").map(|t| r.tools = Some(t))
                }
                Field::ToolChoice => {
                    typed(map.next_value::<Value>()?, "toolChoice").map(|c| r.tool_choice = Some(c))
                }
                Field::ParallelToolCalls => map
                    .next_value::<Scalar>()?
                    .boolean("parallelToolCalls")
                    .map(|b| r.parallel_tool_calls = Some(b)),
            };
            parsed.refused.retain(|(f, _)| *f != field);
            if let Err(e) = outcome {
                parsed.refused.push((field, e));
            }
        }
        Ok(parsed)
    }
}

/// A field read as JSON, typed: a refusal names the field and the path
/// inside it (`tools[0].parameters`).
fn typed<T: de::DeserializeOwned>(value: Value, field: &str) -> Result<T, CallError> {
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let mut name = field.to_owned();
        for segment in e.path().iter() {
            match segment {
                serde_path_to_error::Segment::Seq { index } => name.push_str(&format!("[{index}]")),
                serde_path_to_error::Segment::Map { key } => {
                    name.push('.');
                    name.push_str(key);
                }
                _ => {}
            }
        }
        CallError::validation(name, e.into_inner().to_string())
    })
}

/// `messages`: an array of messages.
struct MessagesShape;

impl<'de> Shaped<'de> for MessagesShape {
    type Out = Vec<Message>;

    fn refuse(self, kind: Kind) -> CallError {
        CallError::validation("messages", format!("must be an array, got {kind}"))
    }

    fn seq<A: SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> Result<Result<Vec<Message>, CallError>, A::Error> {
        let mut messages = Vec::with_capacity(seq.size_hint().unwrap_or(2));
        let mut index = 0;
        while let Some(message) = seq.next_element_seed(Shape(MessageShape(index)))? {
            match message {
                Ok(m) => messages.push(m),
                Err(e) => {
                    // The first refusal is the one told: the rest is read through.
                    super::shape::drain_seq(seq)?;
                    return Ok(Err(e));
                }
            }
            index += 1;
        }
        Ok(Ok(messages))
    }
}

/// `messages[i]`: `{"role", "content"}`; other keys are ignored.
struct MessageShape(usize);

impl MessageShape {
    fn field(&self, key: &str) -> String {
        format!("messages[{}].{key}", self.0)
    }
}

impl<'de> Shaped<'de> for MessageShape {
    type Out = Message;

    fn refuse(self, kind: Kind) -> CallError {
        CallError::validation(
            format!("messages[{}]", self.0),
            format!("must be an object, got {kind}"),
        )
    }

    fn map<A: MapAccess<'de>>(self, mut map: A) -> Result<Result<Message, CallError>, A::Error> {
        let (mut role, mut content) = (None, None);
        let (mut calls, mut call_id, mut images) = (None, None, None);
        while let Some(key) = map.next_key::<MessageKey>()? {
            match key {
                MessageKey::Role => role = Some(map.next_value::<Scalar>()?),
                MessageKey::Content => content = Some(map.next_value::<Scalar>()?),
                MessageKey::ToolCalls => calls = Some(map.next_value::<Value>()?),
                MessageKey::ToolCallId => call_id = Some(map.next_value::<Scalar>()?),
                MessageKey::Images => images = Some(map.next_value::<Value>()?),
                MessageKey::Other => {
                    map.next_value::<Discard>()?;
                }
            }
        }
        let tool_calls = match calls
            .map(|c| typed::<Vec<crate::tools::ToolCall>>(c, &self.field("toolCalls")))
            .transpose()
        {
            Ok(calls) => calls.unwrap_or_default(),
            Err(e) => return Ok(Err(e)),
        };
        let images = match images
            .map(|i| typed::<Vec<crate::image::Image>>(i, &self.field("images")))
            .transpose()
        {
            Ok(images) => images.unwrap_or_default(),
            Err(e) => return Ok(Err(e)),
        };
        let tool_call_id = match call_id
            .map(|id| id.string(|| self.field("toolCallId")))
            .transpose()
        {
            Ok(id) => id,
            Err(e) => return Ok(Err(e)),
        };
        let required = |key| CallError::validation(self.field(key), "is required");
        let role = match role
            .ok_or_else(|| required("role"))
            .and_then(|r| r.string(|| self.field("role")))
        {
            Ok(role) => role,
            Err(e) => return Ok(Err(e)),
        };
        let role = match role.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "system" => Role::System,
            "tool" => Role::Tool,
            _ => {
                return Ok(Err(CallError::validation(
                    self.field("role"),
                    format!(
                        "must be user, assistant, system or tool, got {}",
                        Kind::of_str(&role)
                    ),
                )));
            }
        };
        // An assistant's turn that calls tools may have no text.
        let content = match content {
            None | Some(Scalar::Null) if !tool_calls.is_empty() => Ok(String::new()),
            content => content
                .ok_or_else(|| required("content"))
                .and_then(|c| c.string(|| self.field("content"))),
        };
        Ok(content.map(|content| Message {
            role,
            content,
            tool_calls,
            tool_call_id,
            images,
        }))
    }
}

enum MessageKey {
    Role,
    Content,
    ToolCalls,
    ToolCallId,
    Images,
    Other,
}

impl<'de> serde::Deserialize<'de> for MessageKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = MessageKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<MessageKey, E> {
                Ok(match v {
                    "role" => MessageKey::Role,
                    "content" => MessageKey::Content,
                    "toolCalls" => MessageKey::ToolCalls,
                    "toolCallId" => MessageKey::ToolCallId,
                    "images" => MessageKey::Images,
                    _ => MessageKey::Other,
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

/// An array of strings (`stopSequences`).
struct StringsShape(&'static str);

impl<'de> Shaped<'de> for StringsShape {
    type Out = Vec<String>;

    fn refuse(self, kind: Kind) -> CallError {
        CallError::validation(self.0, format!("must be an array of strings, got {kind}"))
    }

    fn seq<A: SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> Result<Result<Vec<String>, CallError>, A::Error> {
        let mut strings = Vec::new();
        while let Some(item) = seq.next_element::<Scalar>()? {
            let index = strings.len();
            match item.string(|| format!("{}[{index}]", self.0)) {
                Ok(s) => strings.push(s),
                Err(e) => {
                    super::shape::drain_seq(seq)?;
                    return Ok(Err(e));
                }
            }
        }
        Ok(Ok(strings))
    }
}
