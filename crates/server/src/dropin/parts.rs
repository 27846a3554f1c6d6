//! A message's content as the APIs send it, read in one pass: a string, or
//! a list of parts (OpenAI's content parts, Anthropic's content blocks),
//! each part read as far as this host reads it (text, images, and the
//! Messages API's `tool_use` and `tool_result` blocks); a part of another
//! type kept for its refusal to name.

use crate::error::ApiError;
use serde::Deserialize;
use serde_json::value::RawValue;

/// A message's content as the APIs send it: a string, or a list of parts
/// (OpenAI's content parts, Anthropic's content blocks).
#[derive(Debug)]
pub enum TextOrParts {
    /// A string.
    Text(String),
    /// Parts, each with its `type` and `text` when they are strings.
    Parts(Vec<Part>),
}

/// One part of a message's content: what this host reads of it (text, and
/// the Messages API's `tool_use` and `tool_result` blocks).
#[derive(Debug, Default, Deserialize)]
pub struct Part {
    /// `type`, when it is a string.
    #[serde(rename = "type", default, deserialize_with = "string_or_none")]
    pub kind: Option<String>,
    /// `text`, when it is a string.
    #[serde(default, deserialize_with = "string_or_none")]
    pub text: Option<String>,
    /// A `tool_use` block's id, when it is a string.
    #[serde(default, deserialize_with = "string_or_none")]
    pub id: Option<String>,
    /// A `tool_use` block's tool, when it is a string.
    #[serde(default, deserialize_with = "string_or_none")]
    pub name: Option<String>,
    /// A `tool_use` block's input, as the JSON text it came as.
    #[serde(default)]
    pub input: Option<Box<RawValue>>,
    /// A `tool_result` block's call id, when it is a string.
    #[serde(default, deserialize_with = "string_or_none")]
    pub tool_use_id: Option<String>,
    /// A `tool_result` block's content: a string or text blocks.
    #[serde(default, deserialize_with = "result_content")]
    pub content: Option<TextOrParts>,
    /// A `tool_result` block's `is_error`.
    #[serde(default)]
    pub is_error: Option<bool>,
    /// An OpenAI `image_url` part's image.
    #[serde(default)]
    pub image_url: Option<ImageUrlPart>,
    /// An Anthropic block's `source` (an `image`'s is read as
    /// [`ImageSourcePart`]; others are refused by their type).
    #[serde(default)]
    pub source: Option<Box<RawValue>>,
    /// A Messages API block's prompt-caching breakpoint, as sent.
    #[serde(default)]
    pub cache_control: Option<serde_json::Value>,
    /// A `thinking` block's thinking, when it is a string.
    #[serde(default, deserialize_with = "string_or_none")]
    pub thinking: Option<String>,
    /// A `thinking` block's signature, when it is a string.
    #[serde(default, deserialize_with = "string_or_none")]
    pub signature: Option<String>,
    /// A `redacted_thinking` block's data, when it is a string.
    #[serde(default, deserialize_with = "string_or_none")]
    pub data: Option<String>,
}

/// A string field read for its type only: a value that is not a string is
/// refused as a `String` field's is, and the text is not kept.
#[derive(Debug)]
pub struct AnyString;

impl<'de> Deserialize<'de> for AnyString {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = AnyString;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E>(self, _: &str) -> Result<AnyString, E> {
                Ok(AnyString)
            }
        }
        d.deserialize_str(V)
    }
}

/// An OpenAI `image_url` part's `image_url`.
#[derive(Debug, Deserialize)]
pub struct ImageUrlPart {
    /// `https://…` or a `data:` URL.
    pub url: String,
    /// `auto`, `low` or `high`.
    #[serde(default)]
    pub detail: Option<String>,
}

/// An Anthropic `image` block's `source`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ImageSourcePart {
    /// The bytes, base64.
    Base64 {
        /// `image/png`, …
        media_type: String,
        /// The base64 text.
        data: String,
    },
    /// A URL Anthropic fetches.
    Url {
        /// `https://…`.
        url: String,
    },
}

/// A `tool_result`'s content: a string or blocks (`null`: none).
fn result_content<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<TextOrParts>, D::Error> {
    text_or_parts(d, "Content")
}

/// A field kept when it is a string; any other value read through.
fn string_or_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any value")
        }
        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(v.to_owned()))
        }
        fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut s: A,
        ) -> Result<Self::Value, A::Error> {
            while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut m: A,
        ) -> Result<Self::Value, A::Error> {
            while m
                .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                .is_some()
            {}
            Ok(None)
        }
    }
    d.deserialize_any(V)
}

/// Reads content that is a string or a list of parts, in one pass (serde's
/// untagged enums buffer the whole value first); `null` is `None`. Any
/// other value is refused as an untagged enum `name` was.
pub fn text_or_parts<'de, D: serde::Deserializer<'de>>(
    d: D,
    name: &'static str,
) -> Result<Option<TextOrParts>, D::Error> {
    struct V(&'static str);
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Option<TextOrParts>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string or a list of parts")
        }
        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(TextOrParts::Text(v.to_owned())))
        }
        fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
            Ok(Some(TextOrParts::Text(v)))
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut s: A,
        ) -> Result<Self::Value, A::Error> {
            let mut parts = Vec::new();
            while let Some(part) = s.next_element::<PartOrNot>()? {
                match part.0 {
                    Some(part) => parts.push(part),
                    None => return Err(untagged(self.0)),
                }
            }
            Ok(Some(TextOrParts::Parts(parts)))
        }
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Err(untagged(self.0))
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Err(untagged(self.0))
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Err(untagged(self.0))
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Err(untagged(self.0))
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(untagged(self.0))
        }
    }
    d.deserialize_any(V(name))
}

/// The refusal serde's untagged enum `name` gave a value of neither shape.
fn untagged<E: serde::de::Error>(name: &str) -> E {
    E::custom(format_args!(
        "data did not match any variant of untagged enum {name}"
    ))
}

/// A list item that is an object (a part), or not.
struct PartOrNot(Option<Part>);

impl<'de> Deserialize<'de> for PartOrNot {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = PartOrNot;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a part")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, m: A) -> Result<PartOrNot, A::Error> {
                Part::deserialize(serde::de::value::MapAccessDeserializer::new(m))
                    .map(|p| PartOrNot(Some(p)))
            }
            fn visit_str<E>(self, _: &str) -> Result<PartOrNot, E> {
                Ok(PartOrNot(None))
            }
            fn visit_unit<E>(self) -> Result<PartOrNot, E> {
                Ok(PartOrNot(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<PartOrNot, E> {
                Ok(PartOrNot(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<PartOrNot, E> {
                Ok(PartOrNot(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<PartOrNot, E> {
                Ok(PartOrNot(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<PartOrNot, E> {
                Ok(PartOrNot(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<PartOrNot, A::Error> {
                while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(PartOrNot(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// The text of `content` (at `param`): text parts only, joined; a part of
/// another type is refused naming it (`{param}[{j}]`), as `noun`.
pub fn text_of(param: &str, noun: &str, content: TextOrParts) -> Result<String, ApiError> {
    match content {
        TextOrParts::Text(t) => Ok(t),
        TextOrParts::Parts(parts) => {
            let mut text = String::new();
            for (j, part) in parts.into_iter().enumerate() {
                match (part.kind.as_deref(), part.text) {
                    (Some("text"), Some(t)) => text.push_str(&t),
                    (kind, _) => {
                        return Err(ApiError::invalid(
                            &format!("{param}[{j}]"),
                            format!(
                                "a {noun} of type {:?}: this host takes text {noun}s only",
                                kind.unwrap_or("?")
                            ),
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
    use super::AnyString;

    #[test]
    fn any_string_takes_a_string_only() {
        assert!(serde_json::from_str::<AnyString>(r#""a \"quoted\" name""#).is_ok());
        let e = serde_json::from_str::<AnyString>("3").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("invalid type: integer `3`, expected a string"),
            "{e}"
        );
    }
}
