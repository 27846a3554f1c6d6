//! The compiled-component cache: a component compiled once is kept on disk
//! so the next process loads it instead of compiling it. Loading one runs
//! its native code, so an entry is trusted only when it proves where it came
//! from: each entry names the component it was compiled from (the SHA-256
//! of its bytes) and carries a MAC keyed by this installation's
//! `cache.key` (made on first use, readable by the owner alone), over that
//! name, this engine's compatibility hash and the artifact. An entry copied
//! from another component, another installation, or damaged on disk is
//! recompiled and replaced, never loaded. Files are created with exclusive
//! create under random names and renamed into place, and are never opened
//! through a symlink.

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use wasmtime::component::Component;

const MAGIC: &[u8; 8] = b"CALLAIc1";
const KEY_FILE: &str = "cache.key";
/// MAGIC, the component's SHA-256, the MAC.
const HEADER: usize = 8 + 32 + 32;

/// Where the entry of `source` (a component's SHA-256) compiled by an
/// engine of `compat` lives in `dir`.
fn entry_path(dir: &Path, source: &[u8], compat: &[u8; 32]) -> PathBuf {
    dir.join(format!(
        "{}.cwasm",
        hex::encode(Sha256::digest([&compat[..], source].concat()))
    ))
}

/// The name of a component in the cache: the SHA-256 of its bytes.
pub fn source_of(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Whether `dir` holds an entry for `source` (not yet checked: a damaged
/// one is recompiled on load).
pub fn contains(engine: &wasmtime::Engine, source: &[u8; 32], dir: &Path) -> bool {
    entry_path(dir, source, &compatibility(engine)).exists()
}

/// The cached component compiled from `source`, when `dir` holds a genuine
/// entry for it; a hit counts as a use for the least-recently-used order.
pub fn lookup(engine: &wasmtime::Engine, source: &[u8; 32], dir: &Path) -> Option<Component> {
    let key = existing_key(dir)?;
    let compat = compatibility(engine);
    let path = entry_path(dir, source, &compat);
    let component = read(engine, &path, &key, source, &compat)?;
    // The modification time is the entry's last use.
    if let Ok(file) = open_nofollow(&path) {
        let _ = file.set_modified(std::time::SystemTime::now());
    }
    Some(component)
}

/// Stores `component`, compiled from `source`, then evicts the least
/// recently used entries until the cache is within `max_bytes`: half of
/// it for components, half for the functions they were compiled from
/// (`function_cache.rs`). Only a component that loaded as a pack is
/// stored: a refused one never is.
pub fn store(
    engine: &wasmtime::Engine,
    component: &Component,
    source: &[u8; 32],
    dir: &Path,
    max_bytes: u64,
) -> std::io::Result<()> {
    let key = install_key(dir)?;
    let compat = compatibility(engine);
    let path = entry_path(dir, source, &compat);
    write(component, dir, &path, &key, source, &compat)?;
    evict(dir, "cwasm", max_bytes / 2)?;
    let functions = crate::function_cache::FunctionCache::dir_of(dir);
    match evict(&functions, crate::function_cache::EXTENSION, max_bytes / 2) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        done => done,
    }
}

/// Removes the least recently used entries of `dir` named `*.extension`
/// (oldest modification time first) until they weigh at most `max_bytes`.
pub fn evict(dir: &Path, extension: &str, max_bytes: u64) -> std::io::Result<()> {
    let mut entries: Vec<(std::time::SystemTime, u64, PathBuf)> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == extension))
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            Some((meta.modified().ok()?, meta.len(), e.path()))
        })
        .collect();
    let mut total: u64 = entries.iter().map(|e| e.1).sum();
    entries.sort();
    for (_, len, path) in entries {
        if total <= max_bytes {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            total -= len;
        }
    }
    Ok(())
}

/// This installation's key, when it has one already.
fn existing_key(dir: &Path) -> Option<[u8; 32]> {
    let mut key = [0u8; 32];
    open_nofollow(&dir.join(KEY_FILE))
        .ok()?
        .read_exact(&mut key)
        .ok()?;
    Some(key)
}

/// This engine's compatibility hash, with this build's version.
fn compatibility(engine: &wasmtime::Engine) -> [u8; 32] {
    struct Sink(Sha256);
    impl Hasher for Sink {
        fn finish(&self) -> u64 {
            0
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
    }
    let mut sink = Sink(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut sink);
    sink.0.update(env!("CARGO_PKG_VERSION").as_bytes());
    sink.0.finalize().into()
}

/// HMAC-SHA256 of `parts`, one message, under `key`.
pub(crate) fn mac(key: &[u8; 32], parts: &[&[u8]]) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
    parts.iter().for_each(|p| mac.update(p));
    mac
}

/// Opens an existing file for reading, refusing a symlink.
pub(crate) fn open_nofollow(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW);
    }
    options.open(path)
}

/// Creates `dir` (owner-only where it is made).
pub(crate) fn make_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// This installation's key: `dir/cache.key`, made on first use with
/// exclusive create, owner-only.
pub(crate) fn install_key(dir: &Path) -> std::io::Result<[u8; 32]> {
    let path = dir.join(KEY_FILE);
    let read = |path: &Path| -> std::io::Result<[u8; 32]> {
        let mut key = [0u8; 32];
        open_nofollow(path)?.read_exact(&mut key)?;
        Ok(key)
    };
    if let Ok(key) = read(&path) {
        return Ok(key);
    }
    make_dir(dir)?;
    let mut key = [0u8; 32];
    rand::TryRng::try_fill_bytes(&mut rand::rngs::SysRng, &mut key)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(&path) {
        Ok(mut file) => {
            file.write_all(&key)?;
            file.sync_all()?;
            Ok(key)
        }
        // Another process made it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read(&path),
        Err(e) => Err(e),
    }
}

/// The entry at `path`, if it proves it was compiled from `source` by this
/// installation with a compatible engine.
fn read(
    engine: &wasmtime::Engine,
    path: &Path,
    key: &[u8; 32],
    source: &[u8],
    compat: &[u8; 32],
) -> Option<Component> {
    let data = read_nofollow(path)?;
    let (header, artifact) = data.split_at_checked(HEADER)?;
    let (magic, rest) = header.split_at(8);
    let (named, tag) = rest.split_at(32);
    // verify_slice compares in constant time.
    let genuine = mac(key, &[named, compat, artifact])
        .verify_slice(tag)
        .is_ok();
    if magic != MAGIC || named != source || !genuine {
        return None;
    }
    // SAFETY: the MAC proves the artifact was written by `write` of this
    // installation, for this component, by an engine of this compatibility
    // hash (which wasmtime checks again). Whoever can read `cache.key` can
    // forge entries: the cache directory must be the host's own (see the
    // README's threat model).
    #[allow(unsafe_code)]
    let component = unsafe { Component::deserialize(engine, artifact) };
    component.ok()
}

/// Writes the entry: to a new file of a random name (exclusive create,
/// owner-only), then renamed into place, which replaces a symlink there
/// rather than following it. A crash leaves the old entry or none.
fn write(
    component: &Component,
    dir: &Path,
    path: &Path,
    key: &[u8; 32],
    source: &[u8],
    compat: &[u8; 32],
) -> std::io::Result<()> {
    let artifact = component.serialize().map_err(std::io::Error::other)?;
    make_dir(dir)?;
    let tag = mac(key, &[source, compat, &artifact])
        .finalize()
        .into_bytes();
    persist(
        dir,
        path,
        &[MAGIC, source, &tag, &artifact],
        Durability::Synced,
    )
}

/// Whether an entry is synced to disk before it is renamed into place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// Synced: a crash leaves the old entry or the whole new one.
    Synced,
    /// Not synced: a crash may leave it damaged, which its MAC catches.
    Unsynced,
}

/// Writes `parts` as the file at `path`: to a new file of a random name in
/// `dir` (exclusive create, owner-only), then renamed into place, which
/// replaces a symlink there rather than following it.
pub(crate) fn persist(
    dir: &Path,
    path: &Path,
    parts: &[&[u8]],
    durability: Durability,
) -> std::io::Result<()> {
    let mut file = tempfile::Builder::new()
        .prefix(".entry-")
        .tempfile_in(dir)?;
    for part in parts {
        file.write_all(part)?;
    }
    if durability == Durability::Synced {
        file.as_file().sync_all()?;
    }
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// The whole file at `path`, not read through a symlink.
pub(crate) fn read_nofollow(path: &Path) -> Option<Vec<u8>> {
    let mut data = Vec::new();
    open_nofollow(path).ok()?.read_to_end(&mut data).ok()?;
    Some(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(key: &[u8; 32], parts: &[&[u8]]) -> String {
        hex::encode(mac(key, parts).finalize().into_bytes())
    }

    #[test]
    fn the_mac_is_hmac_sha256_over_the_parts_as_one_message() {
        let key = [0x0bu8; 32];
        assert_eq!(tag(&key, &[b"Hi ", b"There"]), tag(&key, &[b"Hi There"]));
        assert_ne!(tag(&[0u8; 32], &[b"Hi There"]), tag(&key, &[b"Hi There"]));
        assert_eq!(
            tag(&[0u8; 32], &[b""]),
            "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad",
            "HMAC-SHA256 with a zero key over nothing, as any implementation gives"
        );
    }
}
