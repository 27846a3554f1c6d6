//! Why a component cannot be loaded as a pack, said so that the one who
//! built it knows what to do: the bytes are not wasm at all, are a core
//! module rather than a component, do not compile, or are a component of
//! another world.

use std::path::PathBuf;

/// A component that cannot be loaded as a pack node.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error (no such file, permission denied, ...).
        source: std::io::Error,
    },
    /// The bytes do not start with the wasm magic number.
    #[error("not a WebAssembly file (it does not start with \\0asm)")]
    NotWasm,
    /// A core wasm module, not a component.
    #[error(
        "a core WebAssembly module, not a component: build the pack for the wasm32-wasip2 target \
         (cargo build --target wasm32-wasip2), or turn the module into a component \
         (wasm-tools component new)"
    )]
    CoreModule,
    /// A function body larger than the runtime compiles (a compile bomb:
    /// one 3.6 MB function cost 12 s of CPU and 818 MB to compile).
    #[error(
        "a function body of {largest} bytes is over the {limit}-byte limit on one function \
         ({key}); split the function or raise the limit"
    )]
    FunctionTooLarge {
        /// The largest function body, in bytes.
        largest: u64,
        /// The limit.
        limit: u64,
        /// The config key that sets the limit.
        key: &'static str,
    },
    /// The bytes are not a well-formed component (as far as their sections
    /// go).
    #[error("the component is malformed: {0}")]
    Malformed(String),
    /// A component wasmtime refuses to compile (malformed, or using a
    /// feature this host does not enable).
    #[error("the component does not compile: {0:#}")]
    Compile(wasmtime::Error),
    /// A component that is not a pack node: it imports what the host does
    /// not provide, or does not export `run`.
    #[error("not a pack node of openwop:callai (world pack-node, exporting run): {0:#}")]
    NotAPack(wasmtime::Error),
}

/// What the preamble of `bytes` says they are: the wasm magic, then a
/// version and layer (`01 00 00 00`: a core module; `0d 00 01 00`: a
/// component).
pub(crate) fn check_preamble(bytes: &[u8]) -> Result<(), LoadError> {
    let Some(rest) = bytes.strip_prefix(b"\0asm") else {
        return Err(LoadError::NotWasm);
    };
    match rest.get(2..4) {
        Some([0, 0]) => Err(LoadError::CoreModule),
        _ => Ok(()),
    }
}

/// The size of the largest function body in `bytes`, over every core
/// module the component holds, nested ones too: read from the code
/// sections' own entry sizes, without compiling anything.
pub(crate) fn largest_function_body(bytes: &[u8]) -> Result<u64, LoadError> {
    let mut largest = 0u64;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload {
            Ok(wasmparser::Payload::CodeSectionEntry(body)) => {
                largest = largest.max(body.range().len() as u64);
            }
            Ok(_) => {}
            Err(e) => return Err(LoadError::Malformed(e.to_string())),
        }
    }
    Ok(largest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preamble_tells_modules_components_and_other_files_apart() {
        assert!(matches!(
            check_preamble(b"ELF\x02..."),
            Err(LoadError::NotWasm)
        ));
        assert!(matches!(check_preamble(b""), Err(LoadError::NotWasm)));
        assert!(matches!(
            check_preamble(b"\0asm\x01\0\0\0"),
            Err(LoadError::CoreModule)
        ));
        assert!(check_preamble(b"\0asm\x0d\0\x01\0").is_ok());
    }

    #[test]
    fn a_malformed_section_is_named_not_compiled() {
        assert!(matches!(
            largest_function_body(b"\0asm\x0d\0\x01\0\x01\xff"),
            Err(LoadError::Malformed(_))
        ));
    }

    #[test]
    fn each_error_says_what_to_do() {
        assert!(LoadError::CoreModule.to_string().contains("wasm32-wasip2"));
        let missing = LoadError::Read {
            path: "pack.wasm".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert!(missing.to_string().contains("pack.wasm"), "{missing}");
    }
}
