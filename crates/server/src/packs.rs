//! The packs a server runs: the bundled examples, every component of
//! `--packs DIR` (named by file stem), and uploads. Each is compiled once
//! per content hash, off the async workers, at most `[server] maxCompiles`
//! at once, and kept pre-instantiated while a name holds it: a replaced
//! upload's compiled code is dropped from the table, and freed once the
//! last run holding it ends.

use crate::error::{ApiCode, ApiError};
use callai_host::{LoadError, Pack, PackRuntime};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::{OnceCell, Semaphore};

/// At most this many uploaded packs are kept; past it an upload must
/// replace one (same name).
pub const MAX_UPLOADS: usize = 256;

/// Where a pack's bytes come from.
#[derive(Clone)]
pub enum PackSource {
    /// Built into the binary; inflated on demand.
    Bundled(Arc<dyn Fn() -> Vec<u8> + Send + Sync>),
    /// A file of the `--packs` folder.
    File(PathBuf),
    /// Uploaded with `PUT /v1/packs/{name}`.
    Upload(Arc<[u8]>),
}

impl fmt::Debug for PackSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bundled(_) => f.write_str("Bundled"),
            Self::File(p) => write!(f, "File({})", p.display()),
            Self::Upload(b) => write!(f, "Upload({} bytes)", b.len()),
        }
    }
}

impl PackSource {
    /// The component's bytes.
    pub fn bytes(&self) -> Result<Arc<[u8]>, String> {
        match self {
            Self::Bundled(load) => Ok(load().into()),
            Self::File(path) => std::fs::read(path)
                .map(Into::into)
                .map_err(|e| format!("cannot read {}: {e}", path.display())),
            Self::Upload(bytes) => Ok(bytes.clone()),
        }
    }
}

/// A bundled example, as the binary hands it to the server.
#[derive(Clone)]
pub struct BundledPack {
    /// The name runs use.
    pub name: String,
    /// Its node id.
    pub node_id: String,
    /// The mock script a run uses when it brings none.
    pub default_script: Option<String>,
    /// Produces the component's bytes.
    pub bytes: Arc<dyn Fn() -> Vec<u8> + Send + Sync>,
}

impl BundledPack {
    /// A bundled pack whose bytes `bytes` produces when a run first needs
    /// them (a binary may keep them compressed).
    pub fn new(
        name: impl Into<String>,
        node_id: impl Into<String>,
        default_script: Option<String>,
        bytes: impl Fn() -> Vec<u8> + Send + Sync + 'static,
    ) -> Self {
        Self {
            name: name.into(),
            node_id: node_id.into(),
            default_script,
            bytes: Arc::new(bytes),
        }
    }
}

impl fmt::Debug for BundledPack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BundledPack")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// One pack the server knows.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackInfo {
    /// The name runs use.
    pub name: String,
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

/// The packs, by name, and their compiled forms, by content hash.
#[derive(Debug)]
pub struct PackStore {
    runtime: PackRuntime,
    by_name: RwLock<BTreeMap<String, PackInfo>>,
    compiled: Mutex<HashMap<String, Arc<OnceCell<Pack>>>>,
    uploads: Mutex<usize>,
    compile_turns: Semaphore,
    compiles: CompileLoad,
}

/// How many compilations run and wait, for `/metrics`.
#[derive(Debug, Default)]
pub struct CompileLoad {
    running: AtomicUsize,
    waiting: AtomicUsize,
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

/// SHA-256, hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
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
                let bytes = (b.bytes)();
                let info = PackInfo {
                    name: b.name.clone(),
                    node_id: b.node_id,
                    sha256: sha256_hex(&bytes),
                    default_script: b.default_script,
                    source: PackSource::Bundled(b.bytes),
                };
                (b.name, info)
            })
            .collect();
        Self {
            runtime,
            by_name: RwLock::new(by_name),
            compiled: Mutex::new(HashMap::new()),
            uploads: Mutex::new(0),
            compile_turns: Semaphore::new(max_compiles.max(1)),
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
            let sha256 = sha256_hex(&bytes);
            self.compile(&sha256, bytes)
                .await
                .map_err(|e| format!("--packs: {}: {}", path.display(), e.message))?;
            let info = PackInfo {
                name: stem.clone(),
                node_id: stem.clone(),
                sha256,
                default_script: None,
                source,
            };
            self.by_name.write().expect("pack table").insert(stem, info);
        }
        Ok(paths.len())
    }

    /// Every pack, by name.
    pub fn list(&self) -> Vec<PackInfo> {
        self.by_name
            .read()
            .expect("pack table")
            .values()
            .cloned()
            .collect()
    }

    /// The pack called `name`.
    pub fn get(&self, name: &str) -> Option<PackInfo> {
        self.by_name.read().expect("pack table").get(name).cloned()
    }

    /// The pack whose component hashes to `sha256`, under any name.
    pub fn by_hash(&self, sha256: &str) -> Option<PackInfo> {
        let table = self.by_name.read().expect("pack table");
        table.values().find(|p| p.sha256 == sha256).cloned()
    }

    /// Compiles `bytes` (whose hash is `sha256`) without naming a pack:
    /// the pack of a run taken over from another host.
    pub async fn compile_bytes(&self, sha256: &str, bytes: Arc<[u8]>) -> Result<Pack, ApiError> {
        if sha256_hex(&bytes) != sha256 {
            return Err(ApiError::internal(format!(
                "the run log's pack {sha256} does not hash to its name"
            )));
        }
        self.compile(sha256, bytes).await
    }

    /// Compiles `info`'s component, or returns the compiled one.
    pub async fn pack(&self, info: &PackInfo) -> Result<Pack, ApiError> {
        let source = info.source.clone();
        let cell = self.cell(&info.sha256);
        cell.get_or_try_init(|| async {
            let bytes = source.bytes().map_err(ApiError::internal)?;
            self.compile_now(bytes).await
        })
        .await
        .cloned()
    }

    /// Stores an upload: refused when `name` is not a valid name, is a
    /// bundled or `--packs` pack, or `bytes` is no component.
    pub async fn upload(
        &self,
        name: &str,
        node_id: Option<String>,
        bytes: Vec<u8>,
    ) -> Result<PackInfo, ApiError> {
        if !valid_name(name) {
            return Err(ApiError::invalid(
                "name",
                format!("{name:?} cannot name a pack: use 1 to 128 letters, digits, '.', '_', '-'"),
            ));
        }
        if let Some(node_id) = &node_id
            && !crate::body::valid_node_id(node_id)
        {
            return Err(ApiError::invalid("nodeId", crate::body::NODE_ID_RULE));
        }
        let replacing = match self.get(name).map(|p| p.source) {
            Some(PackSource::Upload(_)) => true,
            Some(_) => {
                return Err(ApiError::conflict(format!(
                    "{name:?} is a pack of this server's own (bundled or --packs); upload under another name"
                )));
            }
            None => false,
        };
        if !replacing && *self.uploads.lock().expect("upload count") >= MAX_UPLOADS {
            return Err(too_many_packs());
        }
        let bytes: Arc<[u8]> = bytes.into();
        let sha256 = sha256_hex(&bytes);
        self.compile(&sha256, bytes.clone()).await?;
        let info = PackInfo {
            name: name.to_owned(),
            node_id: node_id.unwrap_or_else(|| name.to_owned()),
            sha256,
            default_script: None,
            source: PackSource::Upload(bytes),
        };
        let mut uploads = self.uploads.lock().expect("upload count");
        let mut table = self.by_name.write().expect("pack table");
        let is_new = !table.contains_key(name);
        if is_new {
            if *uploads >= MAX_UPLOADS {
                drop(table);
                self.forget_unnamed(&info.sha256);
                return Err(too_many_packs());
            }
            *uploads += 1;
        }
        let replaced = table.insert(name.to_owned(), info.clone());
        drop(table);
        drop(uploads);
        if let Some(old) = replaced
            && old.sha256 != info.sha256
        {
            self.forget_unnamed(&old.sha256);
        }
        Ok(info)
    }

    /// Drops the compiled pack of `sha256` from the table when no name
    /// holds it any more; runs holding it keep it until they end.
    fn forget_unnamed(&self, sha256: &str) {
        let named = self
            .by_name
            .read()
            .expect("pack table")
            .values()
            .any(|p| p.sha256 == sha256);
        if !named {
            self.compiled.lock().expect("compiled table").remove(sha256);
        }
    }

    /// How many compiled packs the table holds.
    pub fn compiled_count(&self) -> usize {
        self.compiled.lock().expect("compiled table").len()
    }

    fn cell(&self, sha256: &str) -> Arc<OnceCell<Pack>> {
        self.compiled
            .lock()
            .expect("compiled table")
            .entry(sha256.to_owned())
            .or_default()
            .clone()
    }

    async fn compile(&self, sha256: &str, bytes: Arc<[u8]>) -> Result<Pack, ApiError> {
        let cell = self.cell(sha256);
        let result = cell
            .get_or_try_init(|| self.compile_now(bytes))
            .await
            .cloned();
        if result.is_err() {
            // A failed compile leaves nothing behind under that hash.
            self.compiled.lock().expect("compiled table").remove(sha256);
        }
        result
    }

    /// Compiles on the blocking pool (a large component takes seconds),
    /// once it has a turn: at most `maxCompiles` at once. What can be
    /// refused without compiling (too large a function) is refused before
    /// waiting for a turn.
    async fn compile_now(&self, bytes: Arc<[u8]>) -> Result<Pack, ApiError> {
        let checked = bytes.clone();
        let runtime = self.runtime.clone();
        tokio::task::spawn_blocking(move || runtime.check(&checked))
            .await
            .map_err(|e| ApiError::internal(format!("the check task failed: {e}")))?
            .map_err(refusal)?;
        self.compiles.waiting.fetch_add(1, Ordering::Relaxed);
        let turn = self.compile_turns.acquire().await;
        self.compiles.waiting.fetch_sub(1, Ordering::Relaxed);
        let _turn = turn.expect("the compile semaphore is never closed");
        self.compiles.running.fetch_add(1, Ordering::Relaxed);
        let runtime = self.runtime.clone();
        let task = tokio::task::spawn_blocking(move || runtime.load(&bytes));
        let result = task.await;
        self.compiles.running.fetch_sub(1, Ordering::Relaxed);
        match result {
            Ok(Ok(pack)) => Ok(pack),
            Ok(Err(e)) => Err(refusal(e)),
            Err(e) => Err(ApiError::internal(format!("the compile task failed: {e}"))),
        }
    }
}

/// Why a component was refused, as the API says it.
fn refusal(error: LoadError) -> ApiError {
    match error {
        LoadError::FunctionTooLarge { key, .. } => {
            ApiError::over_limit(ApiCode::PayloadTooLarge, key, error.to_string())
        }
        e => ApiError::invalid(
            "body",
            format!("not a pack component this host can run: {e:#}"),
        ),
    }
}

fn too_many_packs() -> ApiError {
    ApiError::new(
        ApiCode::TooManyPacks,
        format!("this server keeps at most {MAX_UPLOADS} uploaded packs"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain() {
        for ok in ["echo-attempts", "a", "pack_v1.2", &"x".repeat(128)] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", ".hidden", "a/b", "../x", "a b", "é", &"x".repeat(129)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn the_hash_is_sha256_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
