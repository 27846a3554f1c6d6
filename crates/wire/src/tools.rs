//! Tool calls: the tools a request offers the model, how it may choose
//! among them, and the calls it makes. Additive and optional: a request
//! that offers none serialises exactly as it did before tools existed.

use crate::error::CallError;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The longest tool name (the bound OpenAI and Anthropic both set).
pub const MAX_TOOL_NAME: usize = 64;

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tool {
    /// `^[A-Za-z0-9_-]{1,64}$`, unique within the request.
    pub name: String,
    /// What the tool does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A JSON Schema of the call's arguments (an object schema); the host
    /// validates every call against it.
    pub parameters: Value,
    /// Asks the provider to constrain the arguments to the schema where it
    /// can (OpenAI's `strict`); the host validates them either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

impl Tool {
    /// A tool called `name`, taking arguments valid against `parameters`.
    pub fn new(name: impl Into<String>, parameters: Value) -> Self {
        Self {
            name: name.into(),
            description: None,
            parameters,
            strict: None,
        }
    }

    /// With a description.
    pub fn describe(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ToolChoice {
    /// The model decides (the default when tools are offered).
    Auto,
    /// The model must not call a tool.
    None,
    /// The model must call one of the tools.
    Required,
    /// The model must call this tool.
    Tool(String),
}

impl ToolChoice {
    /// Whether the answer must be a tool call (a forced tool call is
    /// structured output, RFC 0248 §A.3's `native`).
    pub fn forces_a_call(&self) -> bool {
        matches!(self, Self::Required | Self::Tool(_))
    }

    fn keyword(&self) -> Option<&'static str> {
        match self {
            Self::Auto => Some("auto"),
            Self::None => Some("none"),
            Self::Required => Some("required"),
            Self::Tool(_) => None,
        }
    }
}

/// `"auto"`, `"none"`, `"required"`, a tool's name, or `{"name": NAME}`
/// (for a tool whose name is one of the three words).
impl Serialize for ToolChoice {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match (self.keyword(), self) {
            (Some(word), _) => s.serialize_str(word),
            (None, Self::Tool(name)) if ["auto", "none", "required"].contains(&name.as_str()) => {
                use serde::ser::SerializeMap;
                let mut map = s.serialize_map(Some(1))?;
                map.serialize_entry("name", name)?;
                map.end()
            }
            (None, Self::Tool(name)) => s.serialize_str(name),
            (None, _) => unreachable!("every other choice is a keyword"),
        }
    }
}

impl<'de> Deserialize<'de> for ToolChoice {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Shape {
            Word(String),
            Named { name: String },
        }
        Ok(match Shape::deserialize(d)? {
            Shape::Word(w) => match w.as_str() {
                "auto" => Self::Auto,
                "none" => Self::None,
                "required" => Self::Required,
                _ => Self::Tool(w),
            },
            Shape::Named { name } => Self::Tool(name),
        })
    }
}

/// A tool call the model made.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolCall {
    /// The call's id, which the tool's result names.
    pub id: String,
    /// The tool called.
    pub name: String,
    /// The arguments, as JSON text (an object).
    pub arguments: String,
}

/// Whether `name` is a usable tool name.
fn valid_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Checks the tools a request offers and its choice among them.
pub(crate) fn check(tools: Option<&[Tool]>, choice: Option<&ToolChoice>) -> Result<(), CallError> {
    let tools = tools.unwrap_or_default();
    for (i, tool) in tools.iter().enumerate() {
        if !valid_name(&tool.name) {
            return Err(CallError::validation(
                format!("tools[{i}].name"),
                format!(
                    "must be 1..{MAX_TOOL_NAME} letters, digits, '_' or '-', got {:?}",
                    tool.name
                ),
            ));
        }
        if tools[..i].iter().any(|t| t.name == tool.name) {
            return Err(CallError::validation(
                format!("tools[{i}].name"),
                format!("{:?} is offered twice", tool.name),
            ));
        }
        if !(tool.parameters.is_object() || tool.parameters.is_boolean()) {
            return Err(CallError::validation(
                format!("tools[{i}].parameters"),
                "must be a JSON Schema (an object)",
            ));
        }
    }
    match choice {
        Some(choice @ (ToolChoice::Required | ToolChoice::Tool(_))) if tools.is_empty() => {
            Err(CallError::validation(
                "toolChoice",
                format!("{choice:?} needs `tools`, and the request offers none"),
            ))
        }
        Some(ToolChoice::Tool(name)) if !tools.iter().any(|t| &t.name == name) => {
            Err(CallError::validation(
                "toolChoice",
                format!("names {name:?}, which is not among the request's tools"),
            ))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_choice_reads_and_writes_as_the_wire_spells_it() {
        for (text, choice) in [
            (json!("auto"), ToolChoice::Auto),
            (json!("none"), ToolChoice::None),
            (json!("required"), ToolChoice::Required),
            (json!("lookup"), ToolChoice::Tool("lookup".into())),
            (json!({"name": "auto"}), ToolChoice::Tool("auto".into())),
        ] {
            assert_eq!(
                serde_json::from_value::<ToolChoice>(text.clone()).unwrap(),
                choice
            );
            assert_eq!(serde_json::to_value(&choice).unwrap(), text);
        }
    }

    #[test]
    fn tools_are_checked_naming_the_field() {
        let t = |name: &str| Tool::new(name, json!({"type": "object"}));
        let field = |tools: &[Tool], choice: Option<ToolChoice>| {
            check(Some(tools), choice.as_ref())
                .unwrap_err()
                .field()
                .map(str::to_owned)
        };
        assert_eq!(field(&[t("a b")], None).as_deref(), Some("tools[0].name"));
        assert_eq!(
            field(&[t("a"), t("a")], None).as_deref(),
            Some("tools[1].name")
        );
        let mut bad = t("a");
        bad.parameters = json!("x");
        assert_eq!(field(&[bad], None).as_deref(), Some("tools[0].parameters"));
        assert_eq!(
            field(&[t("a")], Some(ToolChoice::Tool("b".into()))).as_deref(),
            Some("toolChoice")
        );
        assert_eq!(
            field(&[], Some(ToolChoice::Required)).as_deref(),
            Some("toolChoice")
        );
        assert!(check(Some(&[t("a")]), Some(&ToolChoice::Tool("a".into()))).is_ok());
        assert!(check(None, Some(&ToolChoice::None)).is_ok());
    }
}
