//! A small value that a JSON Schema accepts: what the mock answers a
//! structured call with when its caller brought no script. No crate makes
//! one (the schema-faking crates build random, large values and pull in a
//! generator each); this one walks the keywords a response schema uses and
//! takes the smallest choice each allows: `const`, the first of an `enum`,
//! the required properties only, `minItems` items, `minLength` characters,
//! the lowest number in range. The engine checks it as any reply; a schema
//! this cannot satisfy (a `pattern`, a `not`) gets a reply the engine
//! refuses, naming the rule, as it would a provider's.

use serde_json::{Map, Value, json};

/// Nested `$ref`s and subschemas followed at most: past it, `null`.
const MAX_DEPTH: usize = 32;

/// The instance of `schema` (whose local `$ref`s point into it).
pub fn instance(schema: &Value) -> Value {
    Walker { root: schema }.value(schema, 0)
}

struct Walker<'a> {
    root: &'a Value,
}

impl Walker<'_> {
    fn value(&self, schema: &Value, depth: usize) -> Value {
        let Some(rules) = schema.as_object() else {
            // `true` (anything), `false` (nothing) alike.
            return Value::Null;
        };
        if depth > MAX_DEPTH {
            return Value::Null;
        }
        if let Some(fixed) = rules.get("const") {
            return fixed.clone();
        }
        if let Some(first) = rules
            .get("enum")
            .and_then(Value::as_array)
            .and_then(|e| e.first())
        {
            return first.clone();
        }
        if let Some(target) = rules
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| self.resolve(r))
        {
            return self.value(target, depth + 1);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(first) = rules
                .get(key)
                .and_then(Value::as_array)
                .and_then(|a| a.first())
            {
                return self.value(first, depth + 1);
            }
        }
        if let Some(all) = rules.get("allOf").and_then(Value::as_array) {
            return self.value(&merged(rules, all), depth + 1);
        }
        match kind(rules) {
            "object" => self.object(rules, depth),
            "array" => self.array(rules, depth),
            "string" => string(rules),
            "integer" => number(rules, true),
            "number" => number(rules, false),
            "boolean" => Value::Bool(false),
            _ => Value::Null,
        }
    }

    /// A local `$ref` (`#`, `#/$defs/x`, `#/definitions/x`); others are not
    /// followed.
    fn resolve(&self, reference: &str) -> Option<&Value> {
        let pointer = reference.strip_prefix('#')?;
        self.root.pointer(pointer)
    }

    fn object(&self, rules: &Map<String, Value>, depth: usize) -> Value {
        let properties = rules.get("properties").and_then(Value::as_object);
        let required = rules.get("required").and_then(Value::as_array);
        let mut out = Map::new();
        for name in required.into_iter().flatten().filter_map(Value::as_str) {
            let schema = properties
                .and_then(|p| p.get(name))
                .or_else(|| rules.get("additionalProperties").filter(|a| a.is_object()));
            let value = schema.map_or(Value::Null, |s| self.value(s, depth + 1));
            out.insert(name.to_owned(), value);
        }
        Value::Object(out)
    }

    fn array(&self, rules: &Map<String, Value>, depth: usize) -> Value {
        let min = rules.get("minItems").and_then(Value::as_u64).unwrap_or(0);
        let prefix = rules.get("prefixItems").and_then(Value::as_array);
        let items = rules.get("items");
        let made =
            (0..min.min(64) as usize).map(|i| match prefix.and_then(|p| p.get(i)).or(items) {
                Some(schema) => self.value(schema, depth + 1),
                None => Value::Null,
            });
        Value::Array(made.collect())
    }
}

/// The type a schema asks for: its `type` (the first that is not `null`,
/// of a list; `null` when there is none), or the one its keywords imply.
fn kind(rules: &Map<String, Value>) -> &str {
    match rules.get("type") {
        Some(Value::String(t)) => t,
        Some(Value::Array(types)) => {
            let mut names = types.iter().filter_map(Value::as_str);
            names.find(|t| *t != "null").unwrap_or("null")
        }
        _ if rules.contains_key("properties") || rules.contains_key("required") => "object",
        _ if rules.contains_key("items") || rules.contains_key("prefixItems") => "array",
        _ => "null",
    }
}

/// `allOf`'s parts and the schema around them as one object schema: their
/// properties and required names together.
fn merged(rules: &Map<String, Value>, all: &[Value]) -> Value {
    let mut out = rules.clone();
    out.remove("allOf");
    let mut properties = Map::new();
    let mut required = Vec::new();
    for part in std::iter::once(&Value::Object(rules.clone())).chain(all) {
        if let Some(p) = part.get("properties").and_then(Value::as_object) {
            properties.extend(p.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        if let Some(r) = part.get("required").and_then(Value::as_array) {
            required.extend(r.iter().cloned());
        }
        if let (Some(t), false) = (part.get("type"), out.contains_key("type")) {
            out.insert("type".into(), t.clone());
        }
    }
    if !properties.is_empty() {
        out.insert("properties".into(), Value::Object(properties));
    }
    if !required.is_empty() {
        out.insert("required".into(), Value::Array(required));
    }
    Value::Object(out)
}

fn string(rules: &Map<String, Value>) -> Value {
    let by_format = match rules.get("format").and_then(Value::as_str) {
        Some("date-time") => Some("2026-01-01T00:00:00Z"),
        Some("date") => Some("2026-01-01"),
        Some("time") => Some("00:00:00Z"),
        Some("email") => Some("mock@example.com"),
        Some("uri" | "url") => Some("https://example.com/"),
        Some("uuid") => Some("00000000-0000-4000-8000-000000000000"),
        Some("ipv4") => Some("127.0.0.1"),
        Some("ipv6") => Some("::1"),
        _ => None,
    };
    if let Some(text) = by_format {
        return json!(text);
    }
    let min = rules.get("minLength").and_then(Value::as_u64).unwrap_or(0);
    json!("x".repeat(min.min(4096) as usize))
}

/// The number closest to 0 in range, a multiple of `multipleOf` when one
/// is asked.
fn number(rules: &Map<String, Value>, integer: bool) -> Value {
    let get = |k: &str| rules.get(k).and_then(Value::as_f64);
    let step = get("multipleOf").filter(|s| *s > 0.0);
    let unit = step.unwrap_or(if integer { 1.0 } else { 0.5 });
    let mut low = get("minimum");
    if let Some(x) = get("exclusiveMinimum") {
        low = Some(low.map_or(x, |l| l.max(x)));
        // Above it: the next multiple of the step.
        low = low.map(|l| {
            if l == x {
                ((x / unit).floor() + 1.0) * unit
            } else {
                l
            }
        });
    }
    let mut value = low.map_or(0.0, |l| {
        if l > 0.0 {
            (l / unit).ceil() * unit
        } else {
            0.0
        }
    });
    let mut high = get("maximum");
    if let Some(x) = get("exclusiveMaximum") {
        let below = ((x / unit).ceil() - 1.0) * unit;
        high = Some(high.map_or(below, |h| h.min(below)));
    }
    if let Some(h) = high.filter(|h| value > *h) {
        value = (h / unit).floor() * unit;
    }
    if integer || value.fract() == 0.0 && value.abs() < 9e15 {
        json!(value as i64)
    } else {
        json!(value)
    }
}

#[cfg(test)]
mod tests;
