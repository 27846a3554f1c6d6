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
    /// More code in all than the runtime compiles: compiling costs time
    /// and memory in proportion to the code, whatever its functions' sizes.
    #[error(
        "the component holds {total} bytes of code, over the {limit}-byte limit ({key}); \
         build a smaller pack or raise the limit"
    )]
    CodeTooLarge {
        /// Every function body of every module in it, in bytes.
        total: u64,
        /// The limit.
        limit: u64,
        /// The config key that sets the limit.
        key: &'static str,
    },
    /// The bytes are not a well-formed component (as far as their sections
    /// go).
    #[error("the component is malformed: {0}")]
    Malformed(String),
    /// A component that cannot be a pack node, seen before compiling it:
    /// it imports what no pack host provides, or exports no `run`.
    #[error("not a pack node of openwop:callai (world pack-node, exporting run): {0}")]
    NotAPackShape(String),
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

/// What a pack host provides to a component: WASI and this package.
const PROVIDED: [&str; 2] = ["wasi:", "openwop:callai/"];

/// What a compile of a component would take, read without compiling, and
/// whether it has a pack node's shape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Code {
    /// The largest function body, in bytes.
    pub largest: u64,
    /// Every function body of every core module, nested ones too.
    pub total: u64,
    /// Why it is no pack node, if it is not.
    pub not_a_pack: Option<String>,
}

/// Reads `bytes` as a pack node would be, without compiling anything: its
/// code, from the code sections' own entry sizes, over every core module
/// it holds, nested ones too; and whether the outer component imports only
/// what a pack host provides and exports `run`. Linear in the bytes.
pub(crate) fn pack_code(bytes: &[u8]) -> Result<Code, LoadError> {
    let mut code = Code::default();
    // Nested modules and components each open with a version and close
    // with an end: the outer component is depth 1.
    let mut depth = 0u32;
    let mut exports_run = false;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(|e| LoadError::Malformed(e.to_string()))?;
        match payload {
            wasmparser::Payload::Version { .. } => depth += 1,
            wasmparser::Payload::End(_) => depth = depth.saturating_sub(1),
            wasmparser::Payload::CodeSectionEntry(body) => {
                let len = body.range().len() as u64;
                code.largest = code.largest.max(len);
                code.total = code.total.saturating_add(len);
            }
            wasmparser::Payload::ComponentImportSection(imports) if depth == 1 => {
                for import in imports {
                    let import = import.map_err(|e| LoadError::Malformed(e.to_string()))?;
                    let name = import.name.name;
                    if code.not_a_pack.is_none() && !PROVIDED.iter().any(|p| name.starts_with(p)) {
                        code.not_a_pack = Some(format!(
                            "it imports {name:?}, which a pack host does not provide \
                             (only wasi:* and openwop:callai/*)"
                        ));
                    }
                }
            }
            wasmparser::Payload::ComponentExportSection(exports) if depth == 1 => {
                for export in exports {
                    let export = export.map_err(|e| LoadError::Malformed(e.to_string()))?;
                    exports_run |= export.name.name == "run";
                }
            }
            _ => {}
        }
    }
    if !exports_run {
        code.not_a_pack
            .get_or_insert_with(|| "it exports no `run` function".into());
    }
    Ok(code)
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
            pack_code(b"\0asm\x0d\0\x01\0\x01\xff"),
            Err(LoadError::Malformed(_))
        ));
    }

    #[test]
    fn a_component_without_run_is_no_pack() {
        // The empty component: a preamble and nothing else.
        let code = pack_code(b"\0asm\x0d\0\x01\0").unwrap();
        let why = code.not_a_pack.unwrap();
        assert!(why.contains("exports no `run`"), "{why}");
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
