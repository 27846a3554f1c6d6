use super::instance;
use serde_json::{Value, json};

fn accepted(schema: &Value) -> Value {
    let made = instance(schema);
    let validator = jsonschema::validator_for(schema).expect("a usable schema");
    let errors: Vec<String> = validator
        .iter_errors(&made)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{schema} refused {made}: {errors:?}");
    made
}

#[test]
fn every_keyword_a_response_schema_uses_gets_a_value_it_accepts() {
    let schemas = [
        json!({"type": "object", "properties": {"scene": {"type": "string"}}, "required": ["scene"]}),
        json!({"type": "object", "additionalProperties": false,
               "properties": {"a": {"type": "integer", "minimum": 3, "maximum": 9},
                              "b": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                              "c": {"type": "boolean"}, "d": {"type": "null"},
                              "e": {"type": ["null", "string"], "minLength": 4},
                              "f": {"enum": ["red", "green"]}, "g": {"const": {"k": [1]}},
                              "optional": {"type": "string"}},
               "required": ["a", "b", "c", "d", "e", "f", "g"]}),
        json!({"type": "array", "minItems": 2, "maxItems": 3,
               "items": {"type": "object", "properties": {"id": {"type": "integer", "multipleOf": 7, "minimum": 1}},
                         "required": ["id"]}}),
        json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "minItems": 2}),
        json!({"$defs": {"node": {"type": "object", "properties": {"name": {"type": "string", "minLength": 1},
                                                                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                                  "required": ["name", "children"]}},
               "$ref": "#/$defs/node"}),
        json!({"definitions": {"id": {"type": "string", "format": "uuid"}},
               "type": "object", "properties": {"id": {"$ref": "#/definitions/id"}}, "required": ["id"]}),
        json!({"anyOf": [{"type": "integer", "maximum": -3}, {"type": "string"}]}),
        json!({"oneOf": [{"type": "string", "format": "email"}, {"type": "integer"}]}),
        json!({"allOf": [{"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
                         {"properties": {"y": {"type": "string", "format": "date-time"}}, "required": ["y"]}]}),
        json!({"type": "object", "required": ["free"], "additionalProperties": {"type": "integer", "minimum": 10}}),
        json!({"type": "number", "minimum": -5.5, "maximum": -1.25}),
        json!({"type": "integer", "exclusiveMaximum": 0}),
        json!({"type": "string", "format": "date"}),
        json!(true),
        json!({}),
    ];
    for schema in &schemas {
        accepted(schema);
    }
}

#[test]
fn the_instance_is_small() {
    let schema = json!({"type": "object",
        "properties": {"scene": {"type": "string"}, "mood": {"type": "string"}},
        "required": ["scene"]});
    assert_eq!(accepted(&schema), json!({"scene": ""}));
    let deep = json!({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"});
    assert_eq!(instance(&deep), Value::Null, "a loop of refs ends");
}
