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
    fn each_error_says_what_to_do() {
        assert!(LoadError::CoreModule.to_string().contains("wasm32-wasip2"));
        let missing = LoadError::Read {
            path: "pack.wasm".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert!(missing.to_string().contains("pack.wasm"), "{missing}");
    }
}
