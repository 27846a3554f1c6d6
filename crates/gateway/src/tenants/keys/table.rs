//! The API keys this host knows, in memory: looked up by the keyed hash of
//! the token a request carries, with no database round trip per call. The
//! table is read again whenever the run log's key generation moves on
//! (every change to a key moves it), which each host asks every
//! [`REFRESH`], so a key made, changed or revoked on any host holds on
//! every host within that and a database read.

use super::settings::KeySettings;
use crate::tenants::caller::Tenant;
use callai_engine::RunLog;
use callai_engine::events::now_ms;
use callai_engine::runlog::{ApiKey, RunLogError};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

/// How often a host that holds a live key asks whether any key changed:
/// a key revoked on one host is refused on every other within this and a
/// database read.
pub const REFRESH: Duration = Duration::from_millis(500);

/// How often a host that holds no live key asks (an idle host without
/// keys spends next to nothing); a token of the key shape it does not know
/// makes it ask at once.
pub const IDLE_REFRESH: Duration = Duration::from_secs(5);

/// What a secret begins with: only such tokens are looked up here.
pub const PREFIX: &str = "ck-";

/// One key as this host holds it.
#[derive(Debug)]
pub struct KeyEntry {
    /// As the run log keeps it.
    pub record: ApiKey,
    /// Its settings, read.
    pub settings: KeySettings,
    /// The caller its requests are: its tenant, narrowed, with its limits.
    pub tenant: Arc<Tenant>,
    /// When a call last used it here (ms), and what of that is written.
    used: AtomicU64,
    written: AtomicU64,
}

impl KeyEntry {
    /// The entry of `record`, whose requests are `tenant`.
    pub fn new(record: ApiKey, settings: KeySettings, tenant: Arc<Tenant>) -> Self {
        Self {
            used: AtomicU64::new(0),
            written: AtomicU64::new(record.last_used_ms.unwrap_or(0)),
            record,
            settings,
            tenant,
        }
    }
}

#[derive(Debug, Default)]
struct Loaded {
    generation: Option<u64>,
    pepper: Vec<u8>,
    by_hash: HashMap<[u8; 32], Arc<KeyEntry>>,
    by_id: HashMap<String, Arc<KeyEntry>>,
}

/// What building a key's caller needs: the run log its limits are kept in,
/// and how this host holds them.
pub struct KeySetup {
    /// Where the keys and their limits are kept.
    pub log: Arc<dyn RunLog>,
    /// The host holding their allotments.
    pub owner: String,
    /// How long a call may run (see [`Holder`](crate::tenants::Holder)).
    pub ttl: Duration,
    /// Where the budget counters are.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// How long a call may wait for room in its limits.
    pub queue: Duration,
}

impl std::fmt::Debug for KeySetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySetup")
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

/// Every API key this host knows.
#[derive(Default)]
pub struct KeyTable {
    loaded: RwLock<Arc<Loaded>>,
    /// Told when a request carried a key this host does not know: it may
    /// have been made on another host since the last read.
    pub unknown: tokio::sync::Notify,
    /// Set once the host has a run log to keep keys in.
    pub setup: OnceLock<KeySetup>,
}

impl std::fmt::Debug for KeyTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyTable")
            .field("keys", &self.now().by_id.len())
            .finish_non_exhaustive()
    }
}

/// The keyed hash a secret is known by.
pub fn hash(pepper: &[u8], secret: &[u8]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(pepper).expect("HMAC takes any key");
    mac.update(secret);
    mac.finalize().into_bytes().into()
}

impl KeyTable {
    fn now(&self) -> Arc<Loaded> {
        self.loaded
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The caller whose key `token` is: a key this host knows, neither
    /// revoked nor expired.
    pub fn resolve(&self, token: &[u8]) -> Option<Arc<Tenant>> {
        if !token.starts_with(PREFIX.as_bytes()) {
            return None;
        }
        let loaded = self.now();
        if loaded.pepper.is_empty() {
            return None;
        }
        let Some(entry) = loaded.by_hash.get(&hash(&loaded.pepper, token)) else {
            self.unknown.notify_one();
            return None;
        };
        let now = now_ms();
        if !entry.live(now) {
            return None;
        }
        entry.used.fetch_max(now, Ordering::Relaxed);
        Some(entry.tenant.clone())
    }

    /// How long to wait before asking the run log again: [`REFRESH`]
    /// while this host holds a live key, else [`IDLE_REFRESH`].
    pub fn next_refresh(&self) -> Duration {
        let now = now_ms();
        match self.now().by_id.values().any(|e| e.live(now)) {
            true => REFRESH,
            false => IDLE_REFRESH,
        }
    }

    /// Key `id` as this host last read it.
    pub fn get(&self, id: &str) -> Option<Arc<KeyEntry>> {
        self.now().by_id.get(id).cloned()
    }

    /// Every key, as this host last read them, the oldest first.
    pub fn all(&self) -> Vec<Arc<KeyEntry>> {
        let mut all: Vec<_> = self.now().by_id.values().cloned().collect();
        all.sort_by(|a, b| {
            (a.record.created_ms, &a.record.id).cmp(&(b.record.created_ms, &b.record.id))
        });
        all
    }

    /// The pepper of the hashes, once read.
    pub fn pepper(&self) -> Vec<u8> {
        self.now().pepper.clone()
    }
}

impl KeyEntry {
    /// Whether it works at `now_ms`: not revoked, not expired.
    pub fn live(&self, now_ms: u64) -> bool {
        self.record.revoked_ms.is_none() && self.record.expires_ms.is_none_or(|at| now_ms < at)
    }

    /// When a call last used it: here, or as the run log says.
    pub fn last_used_ms(&self) -> Option<u64> {
        let here = self.used.load(Ordering::Relaxed);
        self.record.last_used_ms.max((here > 0).then_some(here))
    }
}

/// `a` and `b` alike but for when they were last used.
fn same(a: &ApiKey, b: &ApiKey) -> bool {
    ApiKey {
        last_used_ms: None,
        ..a.clone()
    } == ApiKey {
        last_used_ms: None,
        ..b.clone()
    }
}

impl KeyTable {
    /// Reads the keys again if the run log's generation moved on (or
    /// `force`), each changed one made into an entry by `build`, and
    /// writes when keys were last used here. Whether it read them.
    pub async fn refresh(
        &self,
        force: bool,
        build: impl Fn(ApiKey, &KeySetup) -> KeyEntry,
    ) -> Result<bool, RunLogError> {
        let Some(setup) = self.setup.get() else {
            return Ok(false);
        };
        let Some(log) = setup.log.api_keys() else {
            return Ok(false);
        };
        let old = self.now();
        write_used(&old, setup).await?;
        let mut fresh = [0u8; 32];
        rand::TryRng::try_fill_bytes(&mut rand::rngs::SysRng, &mut fresh)
            .map_err(|e| RunLogError::Storage(format!("no random bytes for a pepper: {e}")))?;
        let (generation, pepper) = log.api_key_state(&fresh).await?;
        if !force && old.generation == Some(generation) {
            return Ok(false);
        }
        let records = log.api_keys().await?;
        let mut loaded = Loaded {
            generation: Some(generation),
            pepper,
            ..Loaded::default()
        };
        for record in records {
            let entry = match old.by_id.get(&record.id) {
                Some(e) if same(&e.record, &record) => e.clone(),
                _ => Arc::new(build(record, setup)),
            };
            if let Some(hash) = hex::decode(&entry.record.hash)
                .ok()
                .and_then(|h| <[u8; 32]>::try_from(h).ok())
            {
                loaded.by_hash.insert(hash, entry.clone());
            }
            loaded.by_id.insert(entry.record.id.clone(), entry);
        }
        *self.loaded.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(loaded);
        Ok(true)
    }
}

/// Writes when each key used here since the last write was last used.
async fn write_used(loaded: &Loaded, setup: &KeySetup) -> Result<(), RunLogError> {
    let Some(log) = setup.log.api_keys() else {
        return Ok(());
    };
    let used: Vec<(String, u64)> = loaded
        .by_id
        .values()
        .filter_map(|e| {
            let at = e.used.load(Ordering::Relaxed);
            (at > e.written.load(Ordering::Relaxed)).then(|| (e.record.id.clone(), at))
        })
        .collect();
    if used.is_empty() {
        return Ok(());
    }
    log.touch_api_keys(&used).await?;
    for (id, at) in used {
        if let Some(e) = loaded.by_id.get(&id) {
            e.written.fetch_max(at, Ordering::Relaxed);
        }
    }
    Ok(())
}
