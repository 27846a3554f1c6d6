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
use std::io::Read;

/// A bundled component's bytes.
#[derive(Debug, Clone, Copy)]
pub enum Component {
    /// As built (Rust packs, a few hundred KB).
    Raw(&'static [u8]),
    /// Deflated (TypeScript and Python packs carry their language's engine,
    /// 12 to 18 MB as built).
    Deflated(&'static [u8]),
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
    /// The SHA-256 of the component's bytes (inflated), in lowercase hex,
    /// computed when this crate was built: a server names a bundled pack by
    /// it without inflating the pack.
    pub sha256: &'static str,
    /// The mock script `run` uses when given none.
    pub default_script: &'static str,
    /// The input `run` uses when given none.
    pub default_input: &'static str,
}

impl Example {
    /// A function giving [`Example::component`]'s bytes when a run first
    /// needs them (`callai serve` keeps bundled packs deflated till then).
    pub fn loader(&'static self) -> impl Fn() -> Vec<u8> + Send + Sync + 'static {
        move || self.component().into_owned()
    }

    /// The component's bytes, inflated when stored deflated.
    pub fn component(&self) -> Cow<'static, [u8]> {
        match self.component {
            Component::Raw(bytes) => Cow::Borrowed(bytes),
            Component::Deflated(bytes) => {
                let mut out = Vec::with_capacity(bytes.len() * 4);
                flate2::read::DeflateDecoder::new(bytes)
                    .read_to_end(&mut out)
                    .expect("the build wrote this stream");
                Cow::Owned(out)
            }
        }
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
