//! Compiled schemas kept for reuse: packs send the same few schemas on
//! every call, and compiling one costs far more than a call. Bounded by the
//! bytes of schema text kept (`limits.schemaCacheBytes`), least recently
//! used out first; a schema larger than the whole budget is not kept.

use super::CompiledSchema;
use callai_wire::CallError;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;

/// One host's compiled schemas.
#[derive(Debug)]
pub(crate) struct SchemaCache {
    budget: u64,
    max_work: u64,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<String, (CompiledSchema, u64)>,
    bytes: u64,
    clock: u64,
}

impl SchemaCache {
    /// A cache keeping up to `budget` bytes of schema text, compiling with
    /// `max_work` as the cost bound.
    pub(crate) fn new(budget: u64, max_work: u64) -> Self {
        Self {
            budget,
            max_work,
            inner: Mutex::default(),
        }
    }

    /// The compiled `schema`, from the cache or compiled now.
    pub(crate) fn compile(&self, schema: &Value) -> Result<CompiledSchema, CallError> {
        let key = schema.to_string();
        {
            let mut inner = self.lock();
            inner.clock += 1;
            let now = inner.clock;
            if let Some((hit, used)) = inner.entries.get_mut(&key) {
                *used = now;
                return Ok(hit.clone());
            }
        }
        let compiled = CompiledSchema::compile(schema, self.max_work)?;
        let size = key.len() as u64;
        if size <= self.budget {
            let mut inner = self.lock();
            while inner.bytes + size > self.budget {
                let oldest = inner
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, used))| *used)
                    .map(|(k, _)| k.clone());
                let Some(oldest) = oldest else { break };
                inner.entries.remove(&oldest);
                inner.bytes -= oldest.len() as u64;
            }
            let now = inner.clock;
            if inner.entries.insert(key, (compiled.clone(), now)).is_none() {
                inner.bytes += size;
            }
        }
        Ok(compiled)
    }

    /// The bytes of schema text kept.
    #[cfg(test)]
    fn bytes(&self) -> u64 {
        self.lock().bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(i: usize, pad: usize) -> Value {
        json!({"type": "object", "description": format!("{i}{}", "x".repeat(pad))})
    }

    #[test]
    fn the_cache_stays_within_its_byte_budget_and_keeps_what_is_used() {
        let cache = SchemaCache::new(10_000, 1_000_000);
        for i in 0..250 {
            cache.compile(&schema(i, 1000)).unwrap();
            assert!(cache.bytes() <= 10_000, "{} bytes kept", cache.bytes());
        }
        // A schema used again stays while newer ones push older ones out.
        cache.compile(&schema(1000, 100)).unwrap();
        let kept = cache.bytes();
        for i in 0..5 {
            cache.compile(&schema(2000 + i, 1000)).unwrap();
            cache.compile(&schema(1000, 100)).unwrap();
        }
        assert!(
            cache
                .lock()
                .entries
                .contains_key(&schema(1000, 100).to_string())
        );
        assert!(kept <= 10_000);
        // Larger than the whole budget: compiled, not kept.
        cache.compile(&schema(3000, 20_000)).unwrap();
        assert!(cache.bytes() <= 10_000);
        assert!(
            !cache
                .lock()
                .entries
                .contains_key(&schema(3000, 20_000).to_string())
        );
    }
}
