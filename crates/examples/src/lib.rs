//! The example packs of `examples/`, in any language, built by this crate's
//! build script into WebAssembly components and embedded as bytes, so that
//! `callai run echo-attempts` works on a fresh checkout and the tests and
//! benchmarks load the same components.
//!
//! ```
//! let echo = callai_examples::example("echo-attempts").expect("bundled");
//! assert_eq!(echo.node_id, "conformance.callai.echo-attempts");
//! assert_eq!(&echo.component()[..4], b"\0asm");
//! ```

#![warn(missing_docs)]

use std::borrow::Cow;

/// A bundled component's bytes.
#[derive(Debug, Clone, Copy)]
pub enum Component {
    /// As built (Rust packs, a few hundred KB).
    Raw(&'static [u8]),
    /// Compressed with zstd (TypeScript and Python packs carry their
    /// language's engine, 12 to 18 MB as built).
    Zstd {
        /// The compressed bytes.
        bytes: &'static [u8],
        /// The component's length as built.
        len: usize,
        /// The bundled example whose component (as built) is the
        /// dictionary these bytes were compressed with: the first pack of
        /// the same language, with which they share its engine.
        dictionary: Option<&'static str>,
    },
}

/// The window zstd reached back when the build compressed (2^27 bytes).
const ZSTD_WINDOW_LOG: u32 = 27;

impl Component {
    /// The bytes as built.
    fn bytes(self) -> Cow<'static, [u8]> {
        use zstd::zstd_safe::DParameter;
        match self {
            Self::Raw(bytes) => Cow::Borrowed(bytes),
            Self::Zstd {
                bytes,
                len,
                dictionary,
            } => {
                let dictionary = dictionary
                    .map(|name| example(name).expect("a bundled dictionary").component())
                    .unwrap_or_default();
                let mut decompressor = zstd::bulk::Decompressor::with_dictionary(&dictionary)
                    .expect("zstd takes the dictionary the build used");
                decompressor
                    .set_parameter(DParameter::WindowLogMax(ZSTD_WINDOW_LOG))
                    .expect("zstd takes its own window size");
                let out = decompressor
                    .decompress(bytes, len)
                    .expect("the build wrote and checked this frame");
                Cow::Owned(out)
            }
        }
    }
}

/// One bundled example pack.
#[derive(Debug, Clone, Copy)]
pub struct Example {
    /// The name `callai run` takes.
    pub name: &'static str,
    /// The node id.
    pub node_id: &'static str,
    /// One line about it.
    pub description: &'static str,
    /// The language it is written in.
    pub language: &'static str,
    /// The component, as stored.
    pub component: Component,
    /// The SHA-256 of the component's bytes (as built), in lowercase hex,
    /// computed when this crate was built: a server names a bundled pack by
    /// it without decompressing the pack.
    pub sha256: &'static str,
    /// The mock script `run` uses when given none.
    pub default_script: &'static str,
    /// The input `run` uses when given none.
    pub default_input: &'static str,
}

impl Example {
    /// A function giving [`Example::component`]'s bytes when a run first
    /// needs them (`callai serve` keeps bundled packs compressed till then).
    pub fn loader(&'static self) -> impl Fn() -> Vec<u8> + Send + Sync + 'static {
        move || self.component().into_owned()
    }

    /// The component's bytes, decompressed when stored compressed.
    pub fn component(&self) -> Cow<'static, [u8]> {
        self.component.bytes()
    }
}

/// A guest SDK packaged for a pack outside this repository (`callai new`):
/// the TypeScript SDK as an npm tarball, the Python SDK as a wheel.
#[derive(Debug, Clone, Copy)]
pub struct SdkPackage {
    /// Its file name (`openwop-callai-sdk-0.1.0.tgz`).
    pub file_name: &'static str,
    /// The file.
    pub bytes: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/examples.rs"));

/// The bundled example called `name` (e.g. `echo-attempts`).
pub fn example(name: &str) -> Option<&'static Example> {
    EXAMPLES.iter().find(|e| e.name == name)
}

#[cfg(test)]
mod tests {
    use super::{Component, EXAMPLES};
    use sha2::Digest as _;

    /// Every bundled component decompresses to the bytes the build hashed,
    /// and a pack compressed against its language's first costs a fraction
    /// of that first pack (they share their engine).
    #[test]
    fn every_component_is_the_one_built() {
        for e in EXAMPLES {
            let bytes = e.component();
            assert_eq!(&bytes[..4], b"\0asm", "{}", e.name);
            assert_eq!(
                hex::encode(sha2::Sha256::digest(&bytes)),
                e.sha256,
                "{}",
                e.name
            );
            if let Component::Zstd {
                bytes: stored,
                dictionary: Some(base),
                ..
            } = e.component
            {
                let Component::Zstd { bytes: alone, .. } = super::example(base).unwrap().component
                else {
                    panic!("{base} is stored compressed");
                };
                assert!(
                    stored.len() * 2 < alone.len(),
                    "{}: {} bytes",
                    e.name,
                    stored.len()
                );
            }
        }
    }
}
