//! Schema checks for structured calls, with the `jsonschema` crate.
//!
//! The complaint a validator produces is quoted back to the model in the
//! corrective instruction and in `envelope.retry.attempted.previousError`,
//! so it is made of the schema alone (RFC 0032 §G): where in the schema the
//! rule sits, and the rule. Never the reply's keys, values or paths.

mod cache;
mod cost;

pub(crate) use cache::SchemaCache;

use callai_wire::CallError;
use jsonschema::PatternOptions;
use serde_json::Value;
use std::sync::Arc;

/// At most this many violations are quoted in one complaint.
const MAX_QUOTED: usize = 3;

/// The longest piece of the schema quoted in a complaint.
const MAX_QUOTE: usize = 120;

/// What a compiled schema holds, at most: a validator's fixed part, and
/// per byte of the schema's JSON text (the validator's nodes, and the
/// schema's tree kept for the complaints). Measured by
/// `a_compiled_schema_holds_what_the_cache_charges_for_it_at_most` (tool
/// schemas of 2 to 32 properties held 16 to 96 KiB each: 31 to 65 times
/// their text, far more than the text a cache counting text alone saw).
const MEMORY_FIXED: u64 = 10 << 10;
const MEMORY_PER_TEXT_BYTE: u64 = 32;

/// A caller's `responseSchema`, compiled (once per distinct schema).
#[derive(Clone)]
pub struct CompiledSchema {
    validator: Arc<jsonschema::Validator>,
    schema: Arc<Value>,
    /// Rule applications one value costs, at most (from [`cost::check`]):
    /// with the reply's size, how long a check can take.
    cost: u64,
    /// The length of the schema's JSON text, as a request carries it.
    text_bytes: u64,
}

impl std::fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledSchema").finish_non_exhaustive()
    }
}

impl CompiledSchema {
    /// Compiles a schema, refusing with a `validation_error` on
    /// `responseSchema` one that is not a usable JSON Schema, or whose check
    /// of a reply could cost more than `max_work` rule applications. Its
    /// `pattern`s run on a linear-time regex engine (no backtracking).
    pub fn compile(schema: &Value, max_work: u64) -> Result<Self, CallError> {
        let refuse = |why: String| CallError::validation("responseSchema", why);
        let cost =
            cost::check(schema, max_work).map_err(|why| refuse(format!("is refused: {why}")))?;
        let validator = jsonschema::options()
            .with_pattern_options(
                PatternOptions::regex()
                    .size_limit(1 << 20)
                    .dfa_size_limit(1 << 20),
            )
            .build(schema)
            .map_err(|e| refuse(format!("is not a usable JSON Schema: {}", e.masked())))?;
        Ok(Self {
            validator: Arc::new(validator),
            text_bytes: schema.to_string().len() as u64,
            schema: Arc::new(schema.clone()),
            cost,
        })
    }

    /// The schema as the caller sent it.
    pub fn schema(&self) -> &Arc<Value> {
        &self.schema
    }

    /// The length of the schema's JSON text.
    pub fn text_bytes(&self) -> u64 {
        self.text_bytes
    }

    /// What it holds in memory, compiled (its validator and its schema's
    /// tree), as the cache charges it: measured, not its text's length.
    pub fn memory_bytes(&self) -> u64 {
        MEMORY_FIXED.saturating_add(self.text_bytes.saturating_mul(MEMORY_PER_TEXT_BYTE))
    }

    /// An estimate of the rule applications checking `bytes` of reply takes.
    pub fn work_for(&self, bytes: usize) -> u64 {
        self.cost.saturating_mul(bytes as u64)
    }

    /// `Ok` when `value` satisfies the schema; otherwise the complaint,
    /// made of the schema alone: each broken rule's location in the schema
    /// and the rule.
    pub fn check(&self, value: &Value) -> Result<(), String> {
        if self.validator.is_valid(value) {
            return Ok(());
        }
        let errors: Vec<String> = self
            .validator
            .iter_errors(value)
            .take(MAX_QUOTED)
            .map(|e| self.describe(e.schema_path().as_str(), e.kind()))
            .collect();
        Err(errors.join("; "))
    }

    /// One broken rule, told from the schema's side.
    fn describe(&self, at: &str, kind: &jsonschema::error::ValidationErrorKind) -> String {
        use jsonschema::error::ValidationErrorKind as K;
        let at = if at.is_empty() { "/" } else { at };
        if let K::Required { property } = kind {
            return format!(
                "at schema {at}: the required property {} is missing",
                quote(property)
            );
        }
        match (self.schema.pointer(at), at.rsplit_once('/')) {
            // The rule as the schema states it: its key and its value.
            (Some(rule), Some((_, key))) if !key.is_empty() => {
                format!(
                    "at schema {at}: the value breaks \"{key}\": {}",
                    quote(rule)
                )
            }
            _ => format!("at schema {at}: the value breaks \"{}\"", kind.keyword()),
        }
    }
}

/// A piece of the schema as JSON, cut short when long.
fn quote(v: &Value) -> String {
    let mut text = v.to_string();
    if text.len() > MAX_QUOTE {
        let cut = (0..=MAX_QUOTE)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn valid_and_invalid_instances() {
        let s = CompiledSchema::compile(
            &json!({
                "type": "object", "required": ["scene"],
                "properties": {"scene": {"type": "string"}}
            }),
            1_000_000,
        )
        .unwrap();
        assert!(s.check(&json!({"scene": "x"})).is_ok());
        let complaint = s.check(&json!({"scene": 42})).unwrap_err();
        assert!(complaint.contains("/scene"), "{complaint}");
        assert!(s.check(&json!({})).unwrap_err().contains("scene"));
    }

    #[test]
    fn complaints_never_quote_the_reply() {
        let s = CompiledSchema::compile(
            &json!({"type": "object", "additionalProperties": false,
            "required": ["scene"],
            "properties": {"n": {"type": "integer"}, "m": {"enum": ["a", "b"]}}}),
            1_000_000,
        )
        .unwrap();
        let reply = json!({"n": "SECRET_MODEL_TEXT", "m": "SECRET_ENUM_VALUE",
                           "IGNORE_ALL_PREVIOUS_INSTRUCTIONS": 1});
        let complaint = s.check(&reply).unwrap_err();
        for leaked in [
            "SECRET_MODEL_TEXT",
            "SECRET_ENUM_VALUE",
            "IGNORE_ALL_PREVIOUS_INSTRUCTIONS",
        ] {
            assert!(!complaint.contains(leaked), "{complaint}");
        }
        // It says where in the schema, and which rule (three rules at most).
        assert!(
            complaint.contains("/properties/n/type") && complaint.contains("\"integer\""),
            "{complaint}"
        );
        assert_eq!(complaint.matches("at schema").count(), 3, "{complaint}");
        let missing = s.check(&json!({})).unwrap_err();
        assert_eq!(
            missing,
            "at schema /required: the required property \"scene\" is missing"
        );
        let closed =
            CompiledSchema::compile(&json!({"additionalProperties": false}), 1_000_000).unwrap();
        let complaint = closed.check(&json!({"SECRET_MODEL_KEY": 1})).unwrap_err();
        assert_eq!(
            complaint,
            "at schema /additionalProperties: the value breaks \"additionalProperties\": false"
        );
    }

    #[test]
    fn an_invalid_schema_is_a_validation_error() {
        let err = CompiledSchema::compile(&json!({"type": "objekt"}), 1_000_000).unwrap_err();
        assert_eq!(err.field(), Some("responseSchema"));
    }
}

#[cfg(test)]
mod measure;
#[cfg(test)]
mod measure_tests {
    use super::CompiledSchema;
    use super::measure::held;
    use serde_json::{Value, json};

    /// A function tool's parameters as agents send them: `n` properties,
    /// each typed and described, some enums, a nested object.
    fn tool_schema(seed: usize, n: usize) -> Value {
        let mut properties = serde_json::Map::new();
        for i in 0..n {
            let name = format!("field_{seed}_{i}");
            let property = match i % 4 {
                0 => {
                    json!({"type": "string", "description": format!("the {i}th thing to look up, in words")})
                }
                1 => {
                    json!({"type": "integer", "minimum": 0, "maximum": 1000, "description": "how many"})
                }
                2 => {
                    json!({"type": "string", "enum": ["low", "medium", "high", format!("v{seed}")]})
                }
                _ => {
                    json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "boolean"}},
                            "required": ["a"], "additionalProperties": false})
                }
            };
            properties.insert(name, property);
        }
        json!({"type": "object", "properties": properties, "required": ["field_0_0"],
               "additionalProperties": false})
    }

    #[test]
    fn a_compiled_schema_holds_what_the_cache_charges_for_it_at_most() {
        for n in [2, 8, 32] {
            let schemas: Vec<Value> = (0..50).map(|s| tool_schema(s, n)).collect();
            let text: u64 = schemas.iter().map(|s| s.to_string().len() as u64).sum();
            let before = held();
            let compiled: Vec<CompiledSchema> = schemas
                .iter()
                .map(|s| CompiledSchema::compile(s, 1_000_000).unwrap())
                .collect();
            let holds = (held() - before).max(0) as u64;
            let charged: u64 = compiled.iter().map(CompiledSchema::memory_bytes).sum();
            eprintln!(
                "{n} properties: text {text}, held {holds} ({:.1}x), charged {charged}",
                holds as f64 / text as f64
            );
            assert!(
                charged >= holds,
                "{n} properties: charged {charged} for {holds} held"
            );
            assert!(
                charged <= holds * 3,
                "{n} properties: charged {charged} for {holds} held"
            );
        }
    }
}
