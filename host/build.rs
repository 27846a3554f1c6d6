//! Builds the example packs and the test programs into WebAssembly
//! components, the way wasmtime's `test-programs` do: a nested
//! `cargo build --target wasm32-wasip2` with its own target directory under
//! `OUT_DIR`. The paths become constants in `components.rs`, and the example
//! components are bundled into the `callai` binary.

use serde::Deserialize;
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";
const PROFILE: &str = "guest";

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
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap().to_path_buf();
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    let out_file = out_dir.join("components.rs");
    println!("cargo:rerun-if-changed=build.rs");
    if env::var_os("CARGO_FEATURE_BUNDLED_EXAMPLES").is_none() {
        fs::write(&out_file, "").unwrap();
        return;
    }
    for watched in [
        "wit",
        "guest-sdk",
        "examples",
        "tests/programs",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }

    let examples = examples(&root);
    let programs = test_programs(&root);
    ensure_target();

    let guest_target = out_dir.join("guest-target");
    let mut cmd = cargo();
    cmd.current_dir(&root)
        .args([
            "build",
            "--target",
            TARGET,
            "--profile",
            PROFILE,
            "--locked",
        ])
        .env("CARGO_TARGET_DIR", &guest_target);
    for e in &examples {
        cmd.args(["-p", &e.package]);
    }
    cmd.args(["-p", "callai-test-programs"]);
    let status = cmd
        .status()
        .expect("failed to run cargo for the guest components");
    assert!(status.success(), "building the guest components failed");

    let built = guest_target.join(TARGET).join(PROFILE);
    let mut code = String::new();
    writeln!(code, "/// One bundled example pack.").unwrap();
    writeln!(code, "#[derive(Debug, Clone, Copy)]").unwrap();
    writeln!(code, "pub struct Example {{").unwrap();
    writeln!(
        code,
        "    /// The name `callai run` takes.\n    pub name: &'static str,"
    )
    .unwrap();
    writeln!(code, "    /// The node id.\n    pub node_id: &'static str,").unwrap();
    writeln!(
        code,
        "    /// One line about it.\n    pub description: &'static str,"
    )
    .unwrap();
    writeln!(
        code,
        "    /// The component.\n    pub component: &'static [u8],"
    )
    .unwrap();
    writeln!(
        code,
        "    /// The mock script `run` uses when given none.\n    pub default_script: &'static str,"
    )
    .unwrap();
    writeln!(
        code,
        "    /// The input `run` uses when given none.\n    pub default_input: &'static str,"
    )
    .unwrap();
    writeln!(code, "}}\n").unwrap();
    writeln!(code, "/// The example packs this build bundles.").unwrap();
    writeln!(code, "pub const EXAMPLES: &[Example] = &[").unwrap();
    for e in &examples {
        let wasm = built.join(format!("{}.wasm", e.package.replace('-', "_")));
        assert!(wasm.exists(), "{} was not built", wasm.display());
        let script = required(&e.dir.join("mock.json"));
        let input = required(&e.dir.join("input.json"));
        writeln!(
            code,
            "    Example {{ name: {:?}, node_id: {:?}, description: {:?}, component: include_bytes!({:?}), default_script: include_str!({:?}), default_input: include_str!({:?}) }},",
            e.package, e.meta.node_id, e.meta.description, wasm, script, input
        )
        .unwrap();
    }
    writeln!(code, "];\n").unwrap();
    writeln!(code, "/// Paths of the packs that only the tests use.").unwrap();
    writeln!(code, "#[doc(hidden)]\npub mod test_programs {{").unwrap();
    for p in &programs {
        let wasm = built.join(format!("{p}.wasm"));
        assert!(wasm.exists(), "{} was not built", wasm.display());
        writeln!(code, "    /// `tests/programs/src/bin/{p}.rs`").unwrap();
        writeln!(
            code,
            "    pub const {}: &str = {:?};",
            p.to_uppercase(),
            wasm
        )
        .unwrap();
    }
    writeln!(code, "}}").unwrap();
    fs::write(&out_file, code).unwrap();
}

fn required(path: &Path) -> PathBuf {
    assert!(path.exists(), "{} is missing", path.display());
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

fn test_programs(root: &Path) -> Vec<String> {
    let mut found: Vec<String> = fs::read_dir(root.join("tests/programs/src/bin"))
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            (path.extension()? == "rs").then(|| path.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    found.sort();
    found
}

/// A cargo for the nested build, free of the outer build's flags.
fn cargo() -> Command {
    let mut cmd = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_PROFILE_RELEASE_DEBUG",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// The wasm32-wasip2 standard library must be installed; rustup does not
/// add a `rust-toolchain.toml` target to a toolchain that already exists.
fn ensure_target() {
    if target_installed() {
        return;
    }
    println!("cargo:warning=installing the {TARGET} target: rustup target add {TARGET}");
    let mut cmd = Command::new("rustup");
    cmd.args(["target", "add", TARGET]);
    if let Ok(toolchain) = env::var("RUSTUP_TOOLCHAIN") {
        cmd.args(["--toolchain", &toolchain]);
    }
    let ok = cmd.status().map(|s| s.success()).unwrap_or(false);
    assert!(
        ok && target_installed(),
        "the {TARGET} target is missing and could not be installed; run: rustup target add {TARGET}"
    );
}

fn target_installed() -> bool {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    Command::new(rustc)
        .args(["--print", "target-libdir", "--target", TARGET])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .is_some_and(|dir| dir.join("libstd").exists() || has_std(&dir))
}

fn has_std(dir: &Path) -> bool {
    fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().starts_with("libstd-"))
    })
}
