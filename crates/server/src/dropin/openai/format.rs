//! A Chat Completions request's `response_format`: text, any JSON object,
//! or a JSON schema, read in one pass.

use crate::dropin::parts::AnyString;
use serde::Deserialize;
use serde_json::{Value, json};

/// `response_format`. Read as a plain struct and checked after: serde's
/// internally tagged enums buffer the whole value (the schema with it)
/// before reading it again.
#[derive(Debug, Deserialize)]
#[serde(try_from = "FormatFields")]
pub(super) enum ResponseFormat {
    Text,
    JsonObject,
    JsonSchema { json_schema: JsonSchemaFormat },
}

/// `response_format`'s fields, in any order; others are ignored, as they
/// were by the tagged enum.
#[derive(Debug, Deserialize)]
struct FormatFields {
    #[serde(rename = "type")]
    kind: FormatType,
    json_schema: Option<JsonSchemaFormat>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
enum FormatType {
    Text,
    JsonObject,
    JsonSchema,
}

impl TryFrom<FormatFields> for ResponseFormat {
    type Error = String;

    fn try_from(fields: FormatFields) -> Result<Self, String> {
        Ok(match (fields.kind, fields.json_schema) {
            (FormatType::Text, _) => Self::Text,
            (FormatType::JsonObject, _) => Self::JsonObject,
            (FormatType::JsonSchema, Some(json_schema)) => Self::JsonSchema { json_schema },
            (FormatType::JsonSchema, None) => return Err("missing field `json_schema`".into()),
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct JsonSchemaFormat {
    #[serde(rename = "name")]
    _name: Option<AnyString>,
    #[serde(rename = "description")]
    _description: Option<AnyString>,
    schema: Option<Value>,
    #[serde(rename = "strict")]
    _strict: Option<bool>,
}

impl ResponseFormat {
    /// The schema the answer must meet: none for text, any object for
    /// `json_object`, and a `json_schema` without one is any JSON.
    pub(super) fn schema(self) -> Option<Value> {
        match self {
            Self::Text => None,
            Self::JsonObject => Some(json!({"type": "object"})),
            Self::JsonSchema { json_schema } => {
                Some(json_schema.schema.unwrap_or_else(|| json!({})))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ResponseFormat;
    use crate::body::{Naming, parse_naming};
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize)]
    struct Body {
        response_format: ResponseFormat,
    }

    fn read(format: serde_json::Value) -> Result<Option<serde_json::Value>, String> {
        let body = json!({ "response_format": format }).to_string();
        parse_naming::<Body>(body.as_bytes(), Naming::FullPath)
            .map(|b| b.response_format.schema())
            .map_err(|e| e.details.unwrap()["field"].as_str().unwrap().to_owned())
    }

    #[test]
    fn each_type_reads_whatever_the_order_of_its_fields() {
        let schema = json!({"type": "object", "required": ["a"]});
        assert_eq!(read(json!({"type": "text"})), Ok(None));
        assert_eq!(
            read(json!({"type": "json_object", "other": 1})),
            Ok(Some(json!({"type": "object"})))
        );
        let late_type =
            json!({"json_schema": {"name": "a", "schema": schema}, "type": "json_schema"});
        assert_eq!(read(late_type), Ok(Some(schema)));
        assert_eq!(
            read(json!({"type": "json_schema", "json_schema": {"name": "a"}})),
            Ok(Some(json!({})))
        );
    }

    #[test]
    fn a_refusal_names_the_field() {
        for (format, field) in [
            (json!({"json_schema": {}}), "response_format.type"),
            (json!({"type": "xml"}), "response_format.type"),
            (
                json!({"type": "json_schema"}),
                "response_format.json_schema",
            ),
            (
                json!({"type": "json_schema", "json_schema": {"name": 3}}),
                "response_format.json_schema.name",
            ),
            (
                json!({"type": "json_schema", "json_schema": {"schema": {}, "colour": 1}}),
                "response_format.json_schema.colour",
            ),
        ] {
            assert_eq!(read(format.clone()), Err(field.to_owned()), "{format}");
        }
    }
}
