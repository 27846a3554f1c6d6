//! Builds every example pack (`examples/*` with `[package.metadata.callai]`)
//! into a WebAssembly component and writes `examples.rs`, which bundles them
//! into the `callai` binary. The only build script that builds examples, and
//! the only one that adds the wasm target when it is missing.

use callai_guest_build::{MissingTarget, build, ensure_target, shared_target_dir, workspace_root};
use serde::Deserialize;
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
    description: String,
}

struct Example {
    package: String,
    dir: PathBuf,
    meta: ExampleMeta,
}

fn main() {
    let root = workspace_root();
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", root.join("examples").display());
    ensure_target(MissingTarget::Install);

    let examples = examples(&root);
    let packages: Vec<&str> = examples.iter().map(|e| e.package.as_str()).collect();
    let mut built = build(&root, &packages, &shared_target_dir());

    let mut code = String::from(
        "/// The example packs this build bundles.\npub const EXAMPLES: &[Example] = &[\n",
    );
    for e in &examples {
        let wasm = built.component(&e.package);
        let script = required(&e.dir.join("mock.json"));
        let input = required(&e.dir.join("input.json"));
        writeln!(
            code,
            "    Example {{ name: {:?}, node_id: {:?}, description: {:?}, component: include_bytes!({:?}), default_script: include_str!({:?}), default_input: include_str!({:?}) }},",
            e.package, e.meta.node_id, e.meta.description, wasm, script, input
        )
        .unwrap();
    }
    code.push_str("];\n");
    fs::write(out_dir.join("examples.rs"), code).unwrap();
}

fn required(path: &Path) -> PathBuf {
    assert!(path.exists(), "{} is missing", path.display());
    println!("cargo:rerun-if-changed={}", path.display());
    path.to_path_buf()
}

/// Every `examples/*` crate with `[package.metadata.callai]`.
fn examples(root: &Path) -> Vec<Example> {
    let mut found = Vec::new();
    for entry in fs::read_dir(root.join("examples")).unwrap() {
        let dir = entry.unwrap().path();
        let manifest = dir.join("Cargo.toml");
        let Ok(text) = fs::read_to_string(&manifest) else {
            continue;
        };
        println!("cargo:rerun-if-changed={}", manifest.display());
        let m: Manifest =
            toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
        if let Some(meta) = m.package.metadata.and_then(|m| m.callai) {
            found.push(Example {
                package: m.package.name,
                dir,
                meta,
            });
        }
    }
    found.sort_by(|a, b| a.package.cmp(&b.package));
    found
}
