//! The function cache: Cranelift's incremental compilation cache on disk,
//! beside the compiled-component cache. A pack built again after an edit
//! is mostly the same code (a TypeScript pack is the JavaScript engine
//! and a little script, a Python pack the interpreter and a little
//! module), so each function compiled once is kept under the SHA-256 of
//! its compiler input and reused by the next compile of any component
//! that holds it: a TypeScript pack that took 10.8 s to compile takes
//! about 3 s once another has filled the cache (the performance page).
//!
//! An entry is compiled code that is loaded and run, so it is trusted as a
//! compiled component is: it carries a MAC keyed by this installation's
//! `cache.key` over its key and its bytes, and one that does not prove
//! itself is compiled again. Entries are written to random names and
//! renamed into place, never through a symlink, and without a sync each:
//! a damaged one fails its MAC and is only recompiled. The directory is
//! bounded with the components (half of `[cache] maxBytes`), least
//! recently written first.

use crate::cache::{self, Durability, mac};
use hmac::Mac;
use std::borrow::Cow;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"CALLAIf1";
/// MAGIC, then the MAC.
const HEADER: usize = 8 + 32;
/// The extension of an entry's file.
pub(crate) const EXTENSION: &str = "fn";

/// The function cache in `dir/functions`, keyed by `dir`'s `cache.key`.
pub(crate) struct FunctionCache {
    dir: PathBuf,
    key: [u8; 32],
}

impl std::fmt::Debug for FunctionCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FunctionCache")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl FunctionCache {
    /// The function cache of the component cache in `dir` (its key made
    /// if it has none yet).
    pub(crate) fn open(dir: &Path) -> std::io::Result<Self> {
        let key = cache::install_key(dir)?;
        let dir = Self::dir_of(dir);
        cache::make_dir(&dir)?;
        Ok(Self { dir, key })
    }

    /// Where the function cache of the component cache in `dir` lives.
    pub(crate) fn dir_of(dir: &Path) -> PathBuf {
        dir.join("functions")
    }

    fn path(&self, key: &[u8]) -> PathBuf {
        self.dir.join(format!(
            "{}.{EXTENSION}",
            hex::encode(cache::source_of(key))
        ))
    }
}

impl wasmtime::CacheStore for FunctionCache {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        let data = cache::read_nofollow(&self.path(key))?;
        let (header, value) = data.split_at_checked(HEADER)?;
        let (magic, tag) = header.split_at(8);
        // verify_slice compares in constant time.
        let genuine = mac(&self.key, &[key, value]).verify_slice(tag).is_ok();
        if magic != MAGIC || !genuine {
            return None;
        }
        Some(Cow::Owned(value.to_vec()))
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        let tag = mac(&self.key, &[key, &value]).finalize().into_bytes();
        let parts: [&[u8]; 3] = [MAGIC, &tag, &value];
        cache::persist(&self.dir, &self.path(key), &parts, Durability::Unsynced).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::CacheStore;

    #[test]
    fn an_entry_is_used_only_when_it_proves_itself() {
        let dir = tempfile::tempdir().unwrap();
        let store = FunctionCache::open(dir.path()).unwrap();
        assert!(store.get(b"f1").is_none(), "nothing yet");
        assert!(store.insert(b"f1", b"code of f1".to_vec()));
        assert_eq!(store.get(b"f1").as_deref(), Some(&b"code of f1"[..]));
        assert!(store.get(b"f2").is_none());

        // A changed byte of the code, or the entry of another key put in
        // its place, is not used.
        let path = store.path(b"f1");
        let mut bytes = std::fs::read(&path).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(store.get(b"f1").is_none(), "a damaged entry");
        assert!(store.insert(b"f2", b"code of f2".to_vec()));
        std::fs::copy(store.path(b"f2"), &path).unwrap();
        assert!(store.get(b"f1").is_none(), "another key's entry");

        // Another installation's key does not prove it either.
        assert!(store.insert(b"f3", b"code of f3".to_vec()));
        let other = tempfile::tempdir().unwrap();
        let theirs = FunctionCache::open(other.path()).unwrap();
        std::fs::create_dir_all(&theirs.dir).unwrap();
        std::fs::copy(store.path(b"f3"), theirs.path(b"f3")).unwrap();
        assert!(theirs.get(b"f3").is_none(), "an entry of another key");
        assert!(store.get(b"f3").is_some());
    }

    #[cfg(unix)]
    #[test]
    fn an_entry_is_never_read_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let store = FunctionCache::open(dir.path()).unwrap();
        assert!(store.insert(b"real", b"code".to_vec()));
        std::os::unix::fs::symlink(store.path(b"real"), store.path(b"link")).unwrap();
        assert!(store.get(b"link").is_none());
    }
}
