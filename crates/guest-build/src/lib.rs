//! What the build scripts that turn guest crates into WebAssembly components
//! share, modelled on wasmtime's `test-programs/artifacts`: a nested
//! `cargo build --target wasm32-wasip2` that keeps cargo's jobserver (so the
//! outer build's `-j` bounds both), into its own target directory, with
//! `cargo:rerun-if-changed` for every source file the guests' dep-info
//! names.

#![warn(missing_docs)]

mod node;
mod python;

pub use node::Node;
pub use python::Python;

use std::collections::BTreeSet;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The guests' target.
pub const TARGET: &str = "wasm32-wasip2";
/// The guests' profile (`[profile.guest]` in the workspace).
pub const PROFILE: &str = "guest";

/// The workspace root: two levels above a crate under `crates/`.
pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("run from a build script"));
    manifest
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").exists())
        .expect("the crate sits inside the workspace")
        .to_path_buf()
}

/// Fails the build, naming the one command that fixes it, when the
/// target's standard library is missing. `rust-toolchain.toml` lists the
/// target, but rustup adds it only to a toolchain it installs, not to one
/// already there; a build script never runs rustup itself.
pub fn ensure_target() {
    assert!(
        target_installed(),
        "the {TARGET} target is not installed; run: rustup target add {TARGET}"
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
        .is_some_and(|dir| {
            fs::read_dir(dir).is_ok_and(|entries| {
                entries
                    .filter_map(Result::ok)
                    .any(|e| e.file_name().to_string_lossy().starts_with("libstd-"))
            })
        })
}

/// The guests built by one [`build`]: where their `.wasm` files are.
#[derive(Debug)]
pub struct Built {
    dir: PathBuf,
    deps: BTreeSet<String>,
}

impl Built {
    /// The component of binary or library target `name` (dashes as
    /// underscores, as cargo names wasm artifacts), with
    /// `cargo:rerun-if-changed` printed for every file its dep-info names.
    pub fn component(&mut self, name: &str) -> PathBuf {
        let wasm = self.dir.join(format!("{}.wasm", name.replace('-', "_")));
        assert!(wasm.exists(), "{} was not built", wasm.display());
        self.rerun_on_dep_info(&wasm);
        wasm
    }

    /// Reads the makefile-style `.d` file beside `artifact` and asks cargo
    /// to rerun the build script when any file it lists changes.
    fn rerun_on_dep_info(&mut self, artifact: &Path) {
        let deps_file = artifact.with_extension("d");
        let contents = fs::read_to_string(&deps_file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", deps_file.display()));
        for line in contents.lines() {
            let Some(pos) = line.find(": ") else {
                continue;
            };
            let mut parts = line[pos + 2..].split_whitespace();
            while let Some(part) = parts.next() {
                let mut file = part.to_string();
                // A path with a space is written `a\ b`.
                while file.ends_with('\\') {
                    file.pop();
                    file.push(' ');
                    file.push_str(parts.next().unwrap_or_default());
                }
                if self.deps.insert(file.clone()) {
                    println!("cargo:rerun-if-changed={file}");
                }
            }
        }
    }
}

/// Builds `packages` of the workspace at `root` for the guest target into
/// `target_dir`. Cargo's jobserver (`CARGO_MAKEFLAGS`) is passed on, so the
/// nested build takes its jobs from the outer build's pool; flags meant for
/// the host build are not.
pub fn build(root: &Path, packages: &[&str], target_dir: &Path) -> Built {
    let mut cmd = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root)
        .args([
            "build",
            "--locked",
            "--target",
            TARGET,
            "--profile",
            PROFILE,
        ])
        .env("CARGO_TARGET_DIR", target_dir);
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
    for p in packages {
        cmd.args(["-p", p]);
    }
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.lock").display()
    );
    let status = cmd
        .status()
        .expect("failed to run cargo for the guest components");
    assert!(
        status.success(),
        "building the guest components {packages:?} failed"
    );
    Built {
        dir: target_dir.join(TARGET).join(PROFILE),
        deps: BTreeSet::new(),
    }
}

/// A target directory for guests shared by every build script of the
/// workspace, so that the SDK and its dependencies compile once for all of
/// them: `<target>/guests`, found from `OUT_DIR`
/// (`<target>/<profile>/build/<crate>-<hash>/out`).
pub fn shared_target_dir() -> PathBuf {
    let out = PathBuf::from(env::var("OUT_DIR").expect("run from a build script"));
    out.ancestors()
        .nth(4)
        .map(|target| target.join("guests"))
        .unwrap_or_else(|| out.join("guests"))
}

/// `Ok` when `tool` runs (`--version`, say); else why not.
fn tool_version(tool: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(tool)
        .args(args)
        .output()
        .map_err(|_| format!("{tool} not found"))?;
    if !out.status.success() {
        return Err(format!("{tool} {} failed", args.join(" ")));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A short fingerprint of a file (FNV-1a over its bytes): enough to see
/// that a lockfile changed.
fn hash_file(path: &Path) -> Result<String, String> {
    let bytes = fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    });
    Ok(format!("{hash:016x}"))
}

/// Copies the files of `from` into `to`, recursively, replacing what is
/// there.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// What to do when a language's toolchain is missing: skip its packs with
/// one line, or, under CI (`CI` set), fail.
pub fn toolchain_missing(language: &str, why: &str) {
    println!("cargo:rerun-if-env-changed=CI");
    if env::var_os("CI").is_some() {
        panic!("the {language} packs cannot be built: {why} (CI builds every pack)");
    }
    println!("cargo:warning=skipping the {language} example packs: {why}");
}
