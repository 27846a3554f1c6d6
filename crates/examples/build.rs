//! Builds every example pack into a WebAssembly component and writes
//! `examples.rs`, which bundles them into the `callai` binary: Rust packs
//! (`Cargo.toml` with `[package.metadata.callai]`) with a nested cargo,
//! TypeScript packs (`package.json` with a `callai` key) with the TS SDK's
//! build tool, Python packs (`pyproject.toml` with `[tool.callai]`) with the
//! Python SDK's. The JS and Python engines make components of 12 to 18 MB,
//! so those are stored compressed with zstd: the first pack of a language
//! alone, each other one with the first as its dictionary (they share their
//! engine, so the second costs a few hundred KB where alone it would cost
//! megabytes). A missing node or python3 skips that
//! language's packs with one line (under CI it fails). A missing
//! `wasm32-wasip2` target fails the build with the one command that adds it.

use callai_guest_build::{
    Node, Python, build, ensure_target, shared_target_dir, toolchain_missing, workspace_root,
};
use serde::Deserialize;
use sha2::Digest as _;
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

#[derive(Deserialize)]
struct Manifest {
    package: Package,
}

#[derive(Deserialize)]
struct Package {
    name: String,
    description: Option<String>,
    metadata: Option<Metadata>,
}

#[derive(Deserialize)]
struct Metadata {
    callai: Option<ExampleMeta>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct ExampleMeta {
    node_id: String,
    description: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PackageJson {
    name: String,
    description: String,
    callai: Option<ForeignMeta>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ForeignMeta {
    node_id: String,
    entry: String,
}

#[derive(Deserialize)]
struct PyProject {
    project: PyProjectProject,
    tool: Option<PyTools>,
}

#[derive(Deserialize)]
struct PyProjectProject {
    name: String,
    description: String,
}

#[derive(Deserialize)]
struct PyTools {
    callai: Option<PyMeta>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct PyMeta {
    node_id: String,
    entry: String,
}

#[derive(Clone, Copy, PartialEq)]
enum Language {
    Rust,
    TypeScript,
    Python,
}

struct Example {
    name: String,
    dir: PathBuf,
    node_id: String,
    description: String,
    language: Language,
    /// The TS or Python entry file.
    entry: PathBuf,
}

fn main() {
    let root = workspace_root();
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    let work = shared_target_dir();
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", root.join("examples").display());
    ensure_target();

    let examples = examples(&root);
    let rust: Vec<&str> = examples
        .iter()
        .filter(|e| e.language == Language::Rust)
        .map(|e| e.name.as_str())
        .collect();
    let mut built = build(&root, &rust, &work);
    let node = wanted(&examples, Language::TypeScript)
        .then(|| {
            Node::install(&root, &work)
                .map_err(|why| toolchain_missing("TypeScript", &why))
                .ok()
        })
        .flatten();
    let python = wanted(&examples, Language::Python)
        .then(|| {
            Python::install(&root, &work)
                .map_err(|why| toolchain_missing("Python", &why))
                .ok()
        })
        .flatten();

    let mut code = String::from(
        "/// The example packs this build bundles (a static, so that each component is in\n/// the binary once).\npub static EXAMPLES: &[Example] = &[\n",
    );
    let mut bases = Bases::default();
    for e in &examples {
        let (component, language, sha256) = match e.language {
            Language::Rust => {
                let wasm = built.component(&e.name);
                let bytes = fs::read(&wasm).unwrap_or_else(|e| panic!("{}: {e}", wasm.display()));
                (
                    format!("Component::Raw(include_bytes!({wasm:?}))"),
                    "Rust",
                    sha256_hex(&bytes),
                )
            }
            Language::TypeScript => {
                let Some(node) = &node else { continue };
                let wasm = foreign(e, &work, &out_dir, node.fingerprint(), |wasm| {
                    node.build(&e.entry, wasm)
                });
                let stored = bases.store(e, "TypeScript", wasm, &work);
                (stored.code, "TypeScript", stored.sha256)
            }
            Language::Python => {
                let Some(python) = &python else { continue };
                let wasm = foreign(e, &work, &out_dir, python.fingerprint(), |wasm| {
                    python.build(&e.entry, wasm)
                });
                let stored = bases.store(e, "Python", wasm, &work);
                (stored.code, "Python", stored.sha256)
            }
        };
        let script = required(&e.dir.join("mock.json"));
        let input = required(&e.dir.join("input.json"));
        writeln!(
            code,
            "    Example {{ name: {:?}, node_id: {:?}, description: {:?}, language: {language:?}, component: {component}, sha256: {sha256:?}, default_script: include_str!({:?}), default_input: include_str!({:?}) }},",
            e.name, e.node_id, e.description, script, input
        )
        .unwrap();
    }
    code.push_str("];\n");
    sdk_statics(&mut code, &root, &out_dir, node.as_ref(), python.as_ref());
    fs::write(out_dir.join("examples.rs"), code).unwrap();
}

/// The statics of the SDKs `callai new` writes beside a new pack, and the
/// Python the build used.
fn sdk_statics(
    code: &mut String,
    root: &Path,
    out_dir: &Path,
    node: Option<&Node>,
    python: Option<&Python>,
) {
    let ts_sdk = node.map(|node| node.pack_sdk(out_dir).unwrap_or_else(|why| panic!("{why}")));
    let py_sdk = python.map(|python| {
        python
            .wheel(root, &out_dir.join("py-sdk"))
            .unwrap_or_else(|why| panic!("{why}"))
    });
    for (name, file) in [("TS_SDK", &ts_sdk), ("PY_SDK", &py_sdk)] {
        let value = match file {
            Some(path) => format!(
                "Some(SdkPackage {{ file_name: {:?}, bytes: include_bytes!({path:?}) }})",
                path.file_name().unwrap().to_string_lossy()
            ),
            None => "None".into(),
        };
        writeln!(
            code,
            "#[doc(hidden)]\npub static {name}: Option<SdkPackage> = {value};"
        )
        .unwrap();
    }
    let python = python.map(|p| p.interpreter());
    writeln!(
        code,
        "#[doc(hidden)]\npub const BUILD_PYTHON: Option<&str> = {:?};",
        python.as_ref().map(|p| p.display().to_string())
    )
    .unwrap();
}

fn wanted(examples: &[Example], language: Language) -> bool {
    examples.iter().any(|e| e.language == language)
}

/// A TypeScript or Python pack, built by `build` (into the path it is given);
/// the component's path. Kept under `work/packs/NAME/built` by the
/// fingerprint of the pack's folder and of its toolchain (`tool`), so that
/// the test build after a release build (the README's two commands) does
/// not run componentize-js or componentize-py again for the same sources.
fn foreign(
    e: &Example,
    work: &Path,
    out_dir: &Path,
    tool: Result<String, String>,
    build: impl FnOnce(&Path) -> Result<(), String>,
) -> Stored {
    println!("cargo:rerun-if-changed={}", e.dir.display());
    let key = tool
        .and_then(|tool| callai_guest_build::fingerprint(&[&e.dir], &tool))
        .unwrap_or_else(|why| panic!("{why}"));
    let dir = work.join("packs").join(&e.name).join("built");
    let made = callai_guest_build::cached(&dir, &key, "wasm", |wasm| {
        let at = out_dir.join(format!("{}.wasm", e.name));
        build(&at)?;
        fs::rename(&at, wasm).map_err(|e| format!("{}: {e}", wasm.display()))
    });
    Stored {
        path: made.unwrap_or_else(|why| panic!("{why}")),
        key,
    }
}

/// A built component and the key it was cached by.
struct Stored {
    path: PathBuf,
    key: String,
}

/// A component as the generated code names it.
struct Bundled {
    /// `Component::Zstd { .. }`.
    code: String,
    /// The SHA-256 of its bytes as built.
    sha256: String,
}

/// The first pack of each language: the dictionary the others of that
/// language are compressed with.
#[derive(Default)]
struct Bases {
    by_language: Vec<(&'static str, String, Stored)>,
}

/// How hard zstd works (19 of 22: the larger levels gain under 0.1% on
/// these components and take longer) and the window it may reach back,
/// 2^27 bytes, more than a component: what the reader must allow too.
const ZSTD_LEVEL: i32 = 19;
const ZSTD_WINDOW_LOG: u32 = 27;

impl Bases {
    /// `wasm`, compressed: alone when it is its language's first pack,
    /// else with that pack as the dictionary. Cached under
    /// `work/packs/NAME/zstd` by its key and the base's.
    fn store(&mut self, e: &Example, language: &'static str, wasm: Stored, work: &Path) -> Bundled {
        let bytes = fs::read(&wasm.path).unwrap_or_else(|e| panic!("{}: {e}", wasm.path.display()));
        let sha256 = sha256_hex(&bytes);
        let base = self.by_language.iter().find(|(l, _, _)| *l == language);
        let (key, dictionary, base_name) = match base {
            Some((_, name, stored)) => {
                let dictionary = fs::read(&stored.path)
                    .unwrap_or_else(|e| panic!("{}: {e}", stored.path.display()));
                (
                    format!("{}-{}", wasm.key, stored.key),
                    dictionary,
                    Some(name.clone()),
                )
            }
            None => (wasm.key.clone(), Vec::new(), None),
        };
        let dir = work.join("packs").join(&e.name).join("zstd");
        let compressed = callai_guest_build::cached(&dir, &key, "wasm.zst", |out| {
            fs::write(out, compress(&bytes, &dictionary)?)
                .map_err(|e| format!("{}: {e}", out.display()))
        })
        .unwrap_or_else(|why| panic!("{why}"));
        let code = format!(
            "Component::Zstd {{ bytes: include_bytes!({compressed:?}), len: {}, dictionary: {base_name:?} }}",
            bytes.len()
        );
        if base_name.is_none() {
            self.by_language.push((language, e.name.clone(), wasm));
        }
        Bundled { code, sha256 }
    }
}

/// `bytes` compressed with zstd, `dictionary` (empty: none) taken as
/// content that precedes them; checked by decompressing it.
fn compress(bytes: &[u8], dictionary: &[u8]) -> Result<Vec<u8>, String> {
    use zstd::zstd_safe::{CParameter, DParameter};
    let mut compressor = zstd::bulk::Compressor::with_dictionary(ZSTD_LEVEL, dictionary)
        .map_err(|e| e.to_string())?;
    compressor
        .set_parameter(CParameter::WindowLog(ZSTD_WINDOW_LOG))
        .and_then(|()| compressor.set_parameter(CParameter::EnableLongDistanceMatching(true)))
        .map_err(|e| e.to_string())?;
    let out = compressor.compress(bytes).map_err(|e| e.to_string())?;
    let mut check =
        zstd::bulk::Decompressor::with_dictionary(dictionary).map_err(|e| e.to_string())?;
    check
        .set_parameter(DParameter::WindowLogMax(ZSTD_WINDOW_LOG))
        .map_err(|e| e.to_string())?;
    let back = check
        .decompress(&out, bytes.len())
        .map_err(|e| e.to_string())?;
    if back != bytes {
        return Err("zstd gave back other bytes than it was given".into());
    }
    Ok(out)
}

/// The SHA-256 of `bytes`, in lowercase hex (what `callai_host::sha256_hex`
/// gives), so that a server names a bundled pack without inflating it.
fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

fn required(path: &Path) -> PathBuf {
    assert!(path.exists(), "{} is missing", path.display());
    println!("cargo:rerun-if-changed={}", path.display());
    path.to_path_buf()
}

/// Every example pack under `examples/`, of any language, by name.
fn examples(root: &Path) -> Vec<Example> {
    let mut found = Vec::new();
    for entry in fs::read_dir(root.join("examples")).unwrap() {
        let dir = entry.unwrap().path();
        let read = |file: &str| {
            let path = dir.join(file);
            let text = fs::read_to_string(&path).ok()?;
            println!("cargo:rerun-if-changed={}", path.display());
            Some((path, text))
        };
        if let Some((path, text)) = read("Cargo.toml") {
            let m: Manifest =
                toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if let Some(meta) = m.package.metadata.and_then(|m| m.callai) {
                let description = meta
                    .description
                    .or(m.package.description)
                    .unwrap_or_default();
                found.push(Example {
                    name: m.package.name,
                    node_id: meta.node_id,
                    description,
                    language: Language::Rust,
                    entry: PathBuf::new(),
                    dir: dir.clone(),
                });
            }
        } else if let Some((path, text)) = read("package.json") {
            let p: PackageJson =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if let Some(meta) = p.callai {
                found.push(Example {
                    name: p.name,
                    node_id: meta.node_id,
                    description: p.description,
                    language: Language::TypeScript,
                    entry: dir.join(meta.entry),
                    dir: dir.clone(),
                });
            }
        } else if let Some((path, text)) = read("pyproject.toml") {
            let p: PyProject =
                toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if let Some(meta) = p.tool.and_then(|t| t.callai) {
                found.push(Example {
                    name: p.project.name,
                    node_id: meta.node_id,
                    description: p.project.description,
                    language: Language::Python,
                    entry: dir.join(meta.entry),
                    dir: dir.clone(),
                });
            }
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}
