//! Compiled schemas kept for reuse: packs and agents send the same few
//! schemas on every call, and compiling one costs far more than a call.
//! Bounded by what the compiled schemas hold in memory
//! (`limits.schemaCacheBytes`, each charged [`CompiledSchema::memory_bytes`],
//! measured), least recently used out first, and taken first from the owner
//! (a tenant of `serve`) that holds the most: one caller sending new
//! schemas without end evicts its own, not everyone's. A schema larger than
//! the whole budget is not kept.

use super::CompiledSchema;
use callai_wire::CallError;
use serde_json::Value;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

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
    /// Whose call compiled it.
    owner: Arc<str>,
    /// What it holds: what it costs against the budget.
    size: u64,
    used: u64,
}

#[derive(Debug, Default)]
struct Inner {
    /// By the hash of the schema; schemas compared for equality.
    entries: HashMap<u64, Vec<Entry>>,
    bytes: u64,
    /// The bytes each owner's entries hold.
    by_owner: HashMap<Arc<str>, u64>,
    clock: u64,
}

/// The schema's hash, by its structure (`Value`'s `Hash` agrees with its
/// `==`): nothing is written out, no string escaped.
fn fingerprint(schema: &Value) -> u64 {
    let mut hasher = DefaultHasher::new();
    schema.hash(&mut hasher);
    hasher.finish()
}

impl SchemaCache {
    /// A cache keeping compiled schemas holding up to `budget` bytes,
    /// compiling with `max_work` as the cost bound.
    pub(crate) fn new(budget: u64, max_work: u64) -> Self {
        Self {
            budget,
            max_work,
            inner: Mutex::default(),
        }
    }

    /// The compiled `schema`, from the cache or compiled now (and kept,
    /// charged to `owner`).
    pub(crate) fn compile(
        &self,
        schema: &Value,
        owner: &Arc<str>,
    ) -> Result<CompiledSchema, CallError> {
        let hash = fingerprint(schema);
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
        let size = compiled.memory_bytes();
        if size <= self.budget {
            let mut inner = self.lock();
            if !inner.holds(hash, schema) {
                while inner.bytes + size > self.budget && inner.evict(owner, size) {}
                let used = inner.clock;
                inner.entries.entry(hash).or_default().push(Entry {
                    compiled: compiled.clone(),
                    owner: owner.clone(),
                    size,
                    used,
                });
                inner.bytes += size;
                *inner.by_owner.entry(owner.clone()).or_default() += size;
            }
        }
        Ok(compiled)
    }

    /// The bytes the kept schemas hold, in all and of `owner`.
    #[cfg(test)]
    fn bytes(&self, owner: &str) -> (u64, u64) {
        let inner = self.lock();
        (inner.bytes, inner.by_owner.get(owner).copied().unwrap_or(0))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Inner {
    /// Whether `schema` (of hash `hash`) is kept.
    fn holds(&self, hash: u64, schema: &Value) -> bool {
        self.entries
            .get(&hash)
            .is_some_and(|b| b.iter().any(|e| **e.compiled.schema() == *schema))
    }

    /// Drops the least recently used entry of the owner holding the most
    /// (`adding` bytes more for `owner`, whose entry is about to go in);
    /// false when there is none to drop.
    fn evict(&mut self, owner: &Arc<str>, adding: u64) -> bool {
        let largest = self
            .by_owner
            .iter()
            .map(|(o, bytes)| (if o == owner { bytes + adding } else { *bytes }, o))
            .filter(|(_, o)| self.owns_any(o))
            .max_by_key(|(bytes, _)| *bytes)
            .map(|(_, o)| o.clone());
        let Some(largest) = largest else {
            return false;
        };
        let oldest = self
            .entries
            .iter()
            .flat_map(|(hash, bucket)| {
                bucket
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| e.owner == largest)
                    .map(move |(i, e)| (e.used, *hash, i))
            })
            .min();
        let Some((_, hash, i)) = oldest else {
            return false;
        };
        let bucket = self.entries.get_mut(&hash).expect("found above");
        let gone = bucket.swap_remove(i);
        if bucket.is_empty() {
            self.entries.remove(&hash);
        }
        self.bytes -= gone.size;
        if let Some(held) = self.by_owner.get_mut(&gone.owner) {
            *held -= gone.size;
            if *held == 0 {
                self.by_owner.remove(&gone.owner);
            }
        }
        true
    }

    /// Whether `owner` holds an entry.
    fn owns_any(&self, owner: &Arc<str>) -> bool {
        self.by_owner.get(owner).is_some_and(|b| *b > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(i: usize, pad: usize) -> Value {
        json!({"type": "object", "description": format!("{i}{}", "x".repeat(pad))})
    }

    /// What `schema(_, pad)` is charged.
    fn size(pad: usize) -> u64 {
        CompiledSchema::compile(&schema(0, pad), 1_000_000)
            .unwrap()
            .memory_bytes()
    }

    #[test]
    fn the_cache_stays_within_its_budget_and_keeps_what_is_used() {
        let budget = 10 * size(1000);
        let cache = SchemaCache::new(budget, 1_000_000);
        let me: Arc<str> = "a".into();
        for i in 0..250 {
            cache.compile(&schema(i, 1000), &me).unwrap();
            assert!(cache.bytes("a").0 <= budget, "{:?} kept", cache.bytes("a"));
        }
        // A schema used again stays while newer ones push older ones out.
        cache.compile(&schema(1000, 100), &me).unwrap();
        for i in 0..5 {
            cache.compile(&schema(2000 + i, 1000), &me).unwrap();
            cache.compile(&schema(1000, 100), &me).unwrap();
        }
        let inner = cache.lock();
        assert!(inner.holds(fingerprint(&schema(1000, 100)), &schema(1000, 100)));
        drop(inner);
        // Larger than the whole budget: compiled, not kept.
        let huge = schema(3000, 400_000);
        cache.compile(&huge, &me).unwrap();
        assert!(cache.bytes("a").0 <= budget);
        assert!(!cache.lock().holds(fingerprint(&huge), &huge));
    }

    #[test]
    fn a_caller_flooding_new_schemas_evicts_its_own_not_anothers() {
        let budget = 10 * size(1000);
        let cache = SchemaCache::new(budget, 1_000_000);
        let (quiet, flood): (Arc<str>, Arc<str>) = ("quiet".into(), "flood".into());
        let kept = schema(1, 1000);
        cache.compile(&kept, &quiet).unwrap();
        for i in 0..500 {
            cache.compile(&schema(10_000 + i, 1000), &flood).unwrap();
        }
        let (all, mine) = cache.bytes("quiet");
        assert!(all <= budget, "{all} over {budget}");
        assert!(mine > 0, "the flood evicted the quiet caller's schema");
        assert!(cache.lock().holds(fingerprint(&kept), &kept));
    }
}
