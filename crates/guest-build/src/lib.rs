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
    Ok(format!("{:016x}", fnv1a(FNV_OFFSET, &bytes)))
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a, continued from `hash` over `bytes`. A build script's cache key
/// needs no more (nothing here is adversarial), and it keeps this crate
/// free of dependencies that every build script would compile first.
fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Folders a fingerprint skips: installed dependencies and build output,
/// which are made from what is fingerprinted.
const NOT_SOURCES: &[&str] = &["node_modules", "__pycache__", "target", "dist", ".venv"];

/// A fingerprint of the files under `paths` (each a file or a folder),
/// their names relative to it and their bytes, in a fixed order, and of
/// `extra` (a tool's version, say): the key under which [`cached`] keeps
/// what was built from them.
pub fn fingerprint(paths: &[&Path], extra: &str) -> Result<String, String> {
    let mut hash = fnv1a(FNV_OFFSET, extra.as_bytes());
    for path in paths {
        let mut files = Vec::new();
        list_files(path, &mut files).map_err(|e| format!("{}: {e}", path.display()))?;
        files.sort();
        for file in files {
            let bytes = fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            let name = file.strip_prefix(path).unwrap_or(&file);
            hash = fnv1a(hash, name.to_string_lossy().as_bytes());
            hash = fnv1a(hash, &(bytes.len() as u64).to_le_bytes());
            hash = fnv1a(hash, &bytes);
        }
    }
    Ok(format!("{hash:016x}"))
}

fn list_files(path: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if !path.is_dir() {
        files.push(path.to_path_buf());
        return Ok(());
    }
    for entry in fs::read_dir(path)? {
        let entry = entry?;
        let skipped = NOT_SOURCES.iter().any(|n| entry.file_name() == **n);
        if !skipped {
            list_files(&entry.path(), files)?;
        }
    }
    Ok(())
}

/// `dir/key.suffix`, made by `make` (given a temporary path to write) when
/// it is not there yet; its path. The one file kept in `dir`: an older key's
/// is removed. A release build and a test build of the workspace build the
/// same pack from the same sources, and the second finds the first's.
pub fn cached(
    dir: &Path,
    key: &str,
    suffix: &str,
    make: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<PathBuf, String> {
    let done = dir.join(format!("{key}.{suffix}"));
    if done.exists() {
        return Ok(done);
    }
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let partial = dir.join(format!("{key}.partial-{}", std::process::id()));
    make(&partial)?;
    // A rename, so that a build beside this one never reads half a file.
    fs::rename(&partial, &done).map_err(|e| format!("{}: {e}", done.display()))?;
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let older = !name.to_string_lossy().starts_with(key);
        if older {
            let _ = fs::remove_file(entry.path());
        }
    }
    Ok(done)
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
