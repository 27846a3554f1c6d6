//! Compiled schemas kept for reuse: packs send the same few schemas on
//! every call, and compiling one costs far more than a call. Bounded by the
//! bytes of schema text kept (`limits.schemaCacheBytes`), least recently
//! used out first; a schema larger than the whole budget is not kept.

use super::CompiledSchema;
use callai_wire::CallError;
use serde_json::Value;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hasher};
use std::io::Write;
use std::sync::Mutex;

/// One host's compiled schemas.
#[derive(Debug)]
pub(crate) struct SchemaCache {
    budget: u64,
    max_work: u64,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Entry {
    compiled: CompiledSchema,
    /// The schema's text length: what it costs against the budget.
    size: u64,
    used: u64,
}

#[derive(Debug, Default)]
struct Inner {
    /// By the hash of the schema's text; schemas compared for equality.
    entries: HashMap<u64, Vec<Entry>>,
    bytes: u64,
    clock: u64,
}

/// Hashes and measures a value's JSON text as it is written, without
/// keeping it.
struct Fingerprint(DefaultHasher, u64);

impl Write for Fingerprint {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf);
        self.1 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn fingerprint(schema: &Value) -> (u64, u64) {
    let mut f = Fingerprint(DefaultHasher::new(), 0);
    serde_json::to_writer(&mut f, schema).expect("hashing cannot fail");
    (f.0.finish(), f.1)
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
        let (hash, size) = fingerprint(schema);
        {
            let mut inner = self.lock();
            inner.clock += 1;
            let now = inner.clock;
            let bucket = inner.entries.get_mut(&hash).into_iter().flatten();
            if let Some(hit) = bucket
                .into_iter()
                .find(|e| **e.compiled.schema() == *schema)
            {
                hit.used = now;
                return Ok(hit.compiled.clone());
            }
        }
        let compiled = CompiledSchema::compile(schema, self.max_work)?;
        if size <= self.budget {
            let mut inner = self.lock();
            while inner.bytes + size > self.budget && inner.evict_oldest() {}
            let used = inner.clock;
            let bucket = inner.entries.entry(hash).or_default();
            if !bucket.iter().any(|e| **e.compiled.schema() == *schema) {
                bucket.push(Entry {
                    compiled: compiled.clone(),
                    size,
                    used,
                });
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

    /// Whether `schema` is kept.
    #[cfg(test)]
    fn holds(&self, schema: &Value) -> bool {
        let inner = self.lock();
        inner
            .entries
            .get(&fingerprint(schema).0)
            .is_some_and(|b| b.iter().any(|e| **e.compiled.schema() == *schema))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Inner {
    /// Drops the least recently used entry; false when there is none.
    fn evict_oldest(&mut self) -> bool {
        let oldest = self
            .entries
            .iter()
            .flat_map(|(hash, bucket)| {
                bucket
                    .iter()
                    .enumerate()
                    .map(move |(i, e)| (e.used, *hash, i))
            })
            .min();
        let Some((_, hash, i)) = oldest else {
            return false;
        };
        let bucket = self.entries.get_mut(&hash).expect("found above");
        self.bytes -= bucket.swap_remove(i).size;
        if bucket.is_empty() {
            self.entries.remove(&hash);
        }
        true
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
        assert!(cache.holds(&schema(1000, 100)));
        assert!(kept <= 10_000);
        // Larger than the whole budget: compiled, not kept.
        cache.compile(&schema(3000, 20_000)).unwrap();
        assert!(cache.bytes() <= 10_000);
        assert!(!cache.holds(&schema(3000, 20_000)));
    }
}
