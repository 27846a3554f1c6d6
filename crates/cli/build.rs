//! Stamps `callai --version` with the commit the binary was built from and
//! the cargo features it was built with. One `git` call does it: the
//! crates that read a commit pull in libgit2 or a tree of their own
//! dependencies; outside a git checkout the commit reads "unknown".

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    // Rebuilt when HEAD moves: a commit, a checkout, a branch's ref.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        let dir = PathBuf::from(dir);
        let common = git(&["rev-parse", "--git-common-dir"]).map_or(dir.clone(), PathBuf::from);
        // A path that does not exist would rerun this on every build.
        for watched in [dir.join("HEAD"), common.join("refs/heads")] {
            if watched.exists() {
                println!("cargo:rerun-if-changed={}", watched.display());
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    let mut features: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| k.strip_prefix("CARGO_FEATURE_").map(str::to_owned))
        .map(|f| f.to_ascii_lowercase().replace('_', "-"))
        .collect();
    features.sort();
    let features = if features.is_empty() {
        "none".to_owned()
    } else {
        features.join(", ")
    };
    let version = std::env::var("CARGO_PKG_VERSION").expect("cargo sets it");
    println!("cargo:rustc-env=CALLAI_VERSION={version} (commit {commit}; features: {features})");
}
