//! The compiled-component cache: a component compiled once is kept on disk,
//! keyed by its bytes and the engine's settings, so a changed wasmtime or
//! config never loads a stale one.

use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::component::Component;

/// Loads `bytes` as a component through the cache in `dir`, compiling (and
/// storing) it on a miss. A cache entry that is unreadable, damaged or made
/// by another engine is recompiled and replaced, never trusted.
pub fn load(engine: &wasmtime::Engine, bytes: &[u8], dir: &Path) -> wasmtime::Result<Component> {
    let path = entry(engine, bytes, dir);
    if let Some(component) = read(engine, &path) {
        return Ok(component);
    }
    let component = Component::new(engine, bytes)?;
    // A cache that cannot be written only costs the next load its speed.
    let _ = write(&component, &path);
    Ok(component)
}

/// `dir/<sha256 of the component and the engine's compatibility hash>.cwasm`.
fn entry(engine: &wasmtime::Engine, bytes: &[u8], dir: &Path) -> PathBuf {
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
    sink.0.update(bytes);
    dir.join(format!("{}.cwasm", hex(&sink.0.finalize())))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An entry is `sha256(artifact) ++ artifact`; the checksum guards against
/// a file damaged on disk, which deserialising must never see.
fn read(engine: &wasmtime::Engine, path: &Path) -> Option<Component> {
    let data = std::fs::read(path).ok()?;
    let (sum, artifact) = data.split_at_checked(32)?;
    if Sha256::digest(artifact).as_slice() != sum {
        return None;
    }
    // SAFETY: wasmtime checks that the artifact was compiled by a compatible
    // engine, and the checksum that it was not damaged on disk; neither is
    // proof of where it came from. Whoever can write the cache directory can
    // make this process run native code of their choosing: the directory
    // must be the host's own (see the README's threat model).
    #[allow(unsafe_code)]
    let component = unsafe { Component::deserialize(engine, artifact) };
    component.ok()
}

/// Writes the entry atomically: a crash leaves the old entry or none.
fn write(component: &Component, path: &Path) -> std::io::Result<()> {
    let artifact = component.serialize().map_err(std::io::Error::other)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut data = Sha256::digest(&artifact).to_vec();
    data.extend_from_slice(&artifact);
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, &data)?;
    std::fs::rename(&tmp, path)
}
