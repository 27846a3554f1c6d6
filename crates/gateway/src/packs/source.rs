//! Where a pack's bytes come from: built into the binary (inflated on
//! demand), a file of `--packs DIR`, or an upload.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

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
    /// The SHA-256 of those bytes (lowercase hex) when the binary knows it
    /// ([`BundledPack::with_sha256`]); when not, the server produces the
    /// bytes at start-up to hash them.
    pub sha256: Option<String>,
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
            sha256: None,
        }
    }

    /// The same pack, whose bytes hash to `sha256` (lowercase hex, as the
    /// examples' build computes it): the server lists it without producing
    /// its bytes (inflating 12 to 18 MB per TypeScript or Python pack at
    /// every start), and checks the hash when a run first loads them.
    pub fn with_sha256(mut self, sha256: impl Into<String>) -> Self {
        self.sha256 = Some(sha256.into());
        self
    }
}

impl fmt::Debug for BundledPack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BundledPack")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}
