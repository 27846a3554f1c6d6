//! The table of packs by namespace and name, and of their compiled forms
//! by content hash; listing, lookup and the `--packs` folder.

use super::source::{BundledPack, PackSource};
use crate::error::GatewayError;
use callai_host::{Pack, PackRuntime};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::{OnceCell, Semaphore};

/// At most this many uploaded packs are kept in all; past it an upload must
/// replace one (same name).
pub const MAX_UPLOADS: usize = 256;
/// At most this many of them are one tenant's, so that no tenant can take
/// every place.
pub const MAX_UPLOADS_PER_TENANT: usize = 64;

/// Whether what can be refused of a component without compiling it has
/// been looked at already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Precheck {
    /// Yes: an upload checks before it waits for its turn.
    Done,
    /// No: look before compiling.
    Needed,
}

/// One pack the server knows.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackInfo {
    /// The name runs use.
    pub name: String,
    /// The tenant whose own it is; absent for a shared pack (bundled,
    /// `--packs`, or the admin's upload).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The node id its events carry.
    pub node_id: String,
    /// SHA-256 of the component, hex.
    pub sha256: String,
    /// The mock script a run uses when it brings none.
    #[serde(skip)]
    pub default_script: Option<String>,
    /// Its bytes.
    #[serde(skip)]
    pub source: PackSource,
}

/// A pack's name in its namespace: the tenant that owns it (`None`:
/// shared) and the name.
pub(super) type Named = (Option<String>, String);

/// The namespace of what `tenant` uploads: its own, or, for the admin, the
/// shared one.
pub(super) fn namespace(tenant: &str) -> Option<String> {
    (tenant != crate::tenants::ADMIN).then(|| tenant.to_owned())
}

/// The packs, by namespace and name, and their compiled forms, by content
/// hash.
#[derive(Debug)]
pub struct PackStore {
    pub(super) runtime: PackRuntime,
    pub(super) by_name: RwLock<BTreeMap<Named, PackInfo>>,
    pub(super) compiled: Mutex<HashMap<String, Arc<OnceCell<Pack>>>>,
    pub(super) uploads: Mutex<usize>,
    pub(super) compile_turns: Semaphore,
    /// Each namespace's turn to queue for a compile: one upload of a
    /// tenant at a time waits for [`PackStore::compile_turns`].
    pub(super) upload_turns: Mutex<HashMap<Option<String>, Arc<tokio::sync::Mutex<()>>>>,
    pub(super) compiles: CompileLoad,
}

/// How many compilations run and wait, for `/metrics`.
#[derive(Debug, Default)]
pub struct CompileLoad {
    pub(super) running: AtomicUsize,
    pub(super) waiting: AtomicUsize,
}

impl CompileLoad {
    /// Compilations running now.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }

    /// Compilations waiting for a turn.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }
}

/// Whether `name` may name a pack: 1 to 128 of `A-Z a-z 0-9 . _ -`, not
/// starting with a dot.
pub fn valid_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

impl PackStore {
    /// A store over `runtime` holding `bundled`, compiling at most
    /// `max_compiles` components at once.
    pub fn new(runtime: PackRuntime, bundled: Vec<BundledPack>, max_compiles: usize) -> Self {
        let by_name = bundled
            .into_iter()
            .map(|b| {
                let sha256 = b
                    .sha256
                    .unwrap_or_else(|| callai_host::sha256_hex(&(b.bytes)()));
                let info = PackInfo {
                    name: b.name.clone(),
                    tenant: None,
                    node_id: b.node_id,
                    sha256,
                    default_script: b.default_script,
                    source: PackSource::Bundled(b.bytes),
                };
                ((None, b.name), info)
            })
            .collect();
        Self {
            runtime,
            by_name: RwLock::new(by_name),
            compiled: Mutex::new(HashMap::new()),
            uploads: Mutex::new(0),
            compile_turns: Semaphore::new(max_compiles.max(1)),
            upload_turns: Mutex::new(HashMap::new()),
            compiles: CompileLoad::default(),
        }
    }

    /// How many compilations run and wait.
    pub fn compile_load(&self) -> &CompileLoad {
        &self.compiles
    }

    /// Adds every `*.wasm` of `dir`, named by file stem, and compiles each
    /// now: a file that is no component stops the server at start-up,
    /// named, rather than failing its first run.
    pub async fn add_dir(&self, dir: &Path) -> Result<usize, String> {
        let entries =
            std::fs::read_dir(dir).map_err(|e| format!("--packs {}: {e}", dir.display()))?;
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
            .collect();
        paths.sort();
        for path in &paths {
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            if !valid_name(&stem) {
                return Err(format!(
                    "--packs: {} cannot name a pack (use letters, digits, '.', '_', '-')",
                    path.display()
                ));
            }
            let source = PackSource::File(path.clone());
            let bytes = source.bytes()?;
            let sha256 = callai_host::sha256_hex(&bytes);
            self.compile(&sha256, bytes, Precheck::Needed)
                .await
                .map_err(|e| format!("--packs: {}: {}", path.display(), e.message()))?;
            let info = PackInfo {
                name: stem.clone(),
                tenant: None,
                node_id: stem.clone(),
                sha256,
                default_script: None,
                source,
            };
            self.by_name
                .write()
                .expect("pack table")
                .insert((None, stem), info);
        }
        Ok(paths.len())
    }

    /// The packs `tenant` may run, by name: its own, and the shared ones
    /// whose names it has none of. `None` (the admin listing everything):
    /// every pack of every namespace.
    pub fn list(&self, tenant: Option<&str>) -> Vec<PackInfo> {
        let table = self.by_name.read().expect("pack table");
        let Some(tenant) = tenant else {
            return table.values().cloned().collect();
        };
        let own = namespace(tenant);
        let mut packs: BTreeMap<&str, &PackInfo> = BTreeMap::new();
        for ((ns, name), info) in table.iter() {
            if ns.is_none() {
                packs.entry(name).or_insert(info);
            } else if *ns == own {
                packs.insert(name, info);
            }
        }
        packs.into_values().cloned().collect()
    }

    /// The pack `tenant` runs under `name`: its own, else a shared one.
    pub fn get(&self, tenant: &str, name: &str) -> Option<PackInfo> {
        let table = self.by_name.read().expect("pack table");
        let key = |ns: Option<String>| (ns, name.to_owned());
        table
            .get(&key(namespace(tenant)))
            .or_else(|| table.get(&key(None)))
            .cloned()
    }

    /// The pack whose component hashes to `sha256`, under any name.
    pub fn by_hash(&self, sha256: &str) -> Option<PackInfo> {
        let table = self.by_name.read().expect("pack table");
        table.values().find(|p| p.sha256 == sha256).cloned()
    }

    /// Compiles `bytes` (whose hash is `sha256`) without naming a pack:
    /// the pack of a run taken over from another host.
    pub async fn compile_bytes(
        &self,
        sha256: &str,
        bytes: Arc<[u8]>,
    ) -> Result<Pack, GatewayError> {
        if callai_host::sha256_hex(&bytes) != sha256 {
            return Err(GatewayError::internal(format!(
                "the run log's pack {sha256} does not hash to its name"
            )));
        }
        self.compile(sha256, bytes, Precheck::Needed).await
    }

    /// Compiles `info`'s component, or returns the compiled one.
    pub async fn pack(&self, info: &PackInfo) -> Result<Pack, GatewayError> {
        let source = info.source.clone();
        let cell = self.cell(&info.sha256);
        cell.get_or_try_init(|| async {
            let bytes = source.bytes().map_err(GatewayError::internal)?;
            // A bundled pack's hash came with it (`with_sha256`): the
            // table's key for it must be its bytes' own.
            if matches!(source, PackSource::Bundled(_))
                && callai_host::sha256_hex(&bytes) != info.sha256
            {
                return Err(GatewayError::internal(format!(
                    "the bundled pack {} does not hash to the sha256 it was given ({})",
                    info.name, info.sha256
                )));
            }
            self.compile_now(bytes, Precheck::Needed).await
        })
        .await
        .cloned()
    }

    /// How many compiled packs the table holds.
    pub fn compiled_count(&self) -> usize {
        self.compiled.lock().expect("compiled table").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packs::BundledPack;
    use std::sync::atomic::AtomicUsize;

    /// A bundled pack of `bytes` that counts how often they were produced.
    fn counted(bytes: &'static [u8], loads: &Arc<AtomicUsize>) -> BundledPack {
        let loads = loads.clone();
        BundledPack::new("b", "b.node", None, move || {
            loads.fetch_add(1, Ordering::Relaxed);
            bytes.to_vec()
        })
    }

    #[tokio::test]
    async fn a_bundled_pack_with_its_hash_is_listed_without_its_bytes_and_checked_on_load() {
        let bytes: &[u8] = b"\0asm not really";
        let loads = Arc::new(AtomicUsize::new(0));
        let runtime = || PackRuntime::new().unwrap();
        // Without a hash: produced at start to hash them.
        let store = PackStore::new(runtime(), vec![counted(bytes, &loads)], 1);
        assert_eq!(loads.load(Ordering::Relaxed), 1);
        assert_eq!(store.list(None)[0].sha256, callai_host::sha256_hex(bytes));
        // With one: listed as given, nothing produced till a run loads it.
        let wrong = "0".repeat(64);
        let declared = counted(bytes, &loads).with_sha256(wrong.clone());
        let store = PackStore::new(runtime(), vec![declared], 1);
        assert_eq!(loads.load(Ordering::Relaxed), 1, "listed without its bytes");
        let info = store.list(None).remove(0);
        assert_eq!(info.sha256, wrong);
        // A hash that is not the bytes' own is refused, named, before any
        // compile could file the pack under it.
        let Err(err) = store.pack(&info).await else {
            panic!("a pack whose hash is not its bytes' own was loaded");
        };
        assert!(
            err.message()
                .contains("does not hash to the sha256 it was given"),
            "{}",
            err.message()
        );
        assert_eq!(loads.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn names_are_plain() {
        for ok in ["echo-attempts", "a", "pack_v1.2", &"x".repeat(128)] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", ".hidden", "a/b", "../x", "a b", "é", &"x".repeat(129)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
