//! Schemas that cost a validator 2^depth rule applications on one value,
//! written in each form of reference that once walked around the host's
//! cost check (issue 22, item 2).

use serde_json::{Value, json};

/// The forms [`doubling_in_form`] writes.
pub const FORMS: [&str; 7] = [
    "pointer",
    "percent-encoded pointer",
    "$anchor",
    "urn $id",
    "relative $id",
    "draft-07 dependencies",
    "$dynamicRef",
];

/// `d_i` applies `d_{i+1}` twice to the same value, `depth` levels, each
/// reference written in `form` (one of [`FORMS`]).
pub fn doubling_in_form(form: &str, depth: usize) -> Value {
    let pair = |r: Value| json!({"allOf": [r.clone(), r]});
    let id = |n: usize| match form {
        "urn $id" => format!("urn:callai:d{n}"),
        _ => format!("d{n}.json"),
    };
    let mut defs = serde_json::Map::new();
    for i in 0..depth {
        let next = i + 1;
        let level = match form {
            "pointer" => pair(json!({"$ref": format!("#/$defs/d{next}")})),
            "percent-encoded pointer" => pair(json!({"$ref": format!("#/%24defs/d{next}")})),
            "$anchor" => {
                let mut l = pair(json!({"$ref": format!("#a{next}")}));
                l["$anchor"] = json!(format!("a{i}"));
                l
            }
            "urn $id" | "relative $id" => {
                let mut l = pair(json!({"$ref": id(next)}));
                l["$id"] = json!(id(i));
                l
            }
            "draft-07 dependencies" => {
                let r = format!("#/$defs/d{next}");
                json!({"dependencies": {"a": {"$ref": r}, "b": {"$ref": r}}})
            }
            "$dynamicRef" => pair(json!({"$dynamicRef": format!("#/$defs/d{next}")})),
            other => panic!("no form {other}"),
        };
        defs.insert(format!("d{i}"), level);
    }
    let mut last = json!({"type": "object"});
    if form == "$anchor" {
        last["$anchor"] = json!(format!("a{depth}"));
    }
    if form.ends_with("$id") {
        last["$id"] = json!(id(depth));
    }
    defs.insert(format!("d{depth}"), last);
    json!({"$defs": defs, "$ref": "#/$defs/d0"})
}
