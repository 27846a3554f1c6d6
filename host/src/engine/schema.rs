//! Schema checks for structured calls, with the `jsonschema` crate.
//!
//! The complaint a validator produces is quoted back to the model in the
//! corrective instruction, so it is always rendered *masked*: it names the
//! location and the rule, never the model's own text.

use crate::error::CallError;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// At most this many violations are quoted in one complaint.
const MAX_QUOTED: usize = 3;

/// How many compiled schemas the process keeps: packs send the same few
/// schemas on every call, and compiling one costs far more than a call.
const CACHED_SCHEMAS: usize = 256;

/// A caller's `responseSchema`, compiled (once per distinct schema).
#[derive(Clone)]
pub struct CompiledSchema {
    validator: Arc<jsonschema::Validator>,
}

impl std::fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledSchema").finish_non_exhaustive()
    }
}

/// Refuses a `responseSchema` that is not a usable JSON Schema.
pub fn check_schema(schema: &Value) -> Result<(), CallError> {
    CompiledSchema::compile(schema).map(drop)
}

impl CompiledSchema {
    /// Compiles a schema, or finds it compiled; an invalid one is a
    /// `validation_error` on `responseSchema`.
    pub fn compile(schema: &Value) -> Result<Self, CallError> {
        static CACHE: OnceLock<Mutex<HashMap<String, CompiledSchema>>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        let key = schema.to_string();
        if let Some(hit) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(hit.clone());
        }
        let compiled = Self::compile_uncached(schema)?;
        let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CACHED_SCHEMAS {
            cache.clear();
        }
        cache.insert(key, compiled.clone());
        Ok(compiled)
    }

    fn compile_uncached(schema: &Value) -> Result<Self, CallError> {
        jsonschema::validator_for(schema)
            .map(|validator| Self {
                validator: Arc::new(validator),
            })
            .map_err(|e| {
                CallError::validation(
                    "responseSchema",
                    format!("is not a valid JSON Schema: {}", e.masked()),
                )
            })
    }

    /// `Ok` when `value` satisfies the schema; otherwise the masked complaint.
    pub fn check(&self, value: &Value) -> Result<(), String> {
        if self.validator.is_valid(value) {
            return Ok(());
        }
        let errors: Vec<String> = self
            .validator
            .iter_errors(value)
            .take(MAX_QUOTED)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "/".to_owned() } else { at };
                format!("at {at}: {}", e.masked())
            })
            .collect();
        Err(errors.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn valid_and_invalid_instances() {
        let s = CompiledSchema::compile(&json!({
            "type": "object", "required": ["scene"],
            "properties": {"scene": {"type": "string"}}
        }))
        .unwrap();
        assert!(s.check(&json!({"scene": "x"})).is_ok());
        let complaint = s.check(&json!({"scene": 42})).unwrap_err();
        assert!(complaint.contains("/scene"), "{complaint}");
        assert!(s.check(&json!({})).unwrap_err().contains("scene"));
    }

    #[test]
    fn complaints_never_quote_the_instance() {
        let s = CompiledSchema::compile(&json!({"type": "object",
            "properties": {"n": {"type": "integer"}}}))
        .unwrap();
        let complaint = s.check(&json!({"n": "SECRET-MODEL-TEXT"})).unwrap_err();
        assert!(!complaint.contains("SECRET-MODEL-TEXT"), "{complaint}");
    }

    #[test]
    fn an_invalid_schema_is_a_validation_error() {
        let err = CompiledSchema::compile(&json!({"type": "objekt"})).unwrap_err();
        assert_eq!(err.field(), Some("responseSchema"));
    }
}
