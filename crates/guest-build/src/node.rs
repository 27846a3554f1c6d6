//! TypeScript packs: the SDK's build tool (`guest-sdk-ts/bin/build.mjs`,
//! esbuild + componentize-js) run with node. The SDK is copied under the
//! shared guest target directory and its locked dependencies installed
//! there with `npm ci`, so the source tree stays as it was checked out.

use crate::{copy_tree, hash_file, tool_version};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The SDK, installed and ready to build packs.
#[derive(Debug)]
pub struct Node {
    sdk: PathBuf,
    version: String,
}

impl Node {
    /// Finds node and npm, and installs the SDK (from `root/guest-sdk-ts`)
    /// under `work`; `Err` says what is missing.
    pub fn install(root: &Path, work: &Path) -> Result<Self, String> {
        let version = tool_version("node", &["--version"])?;
        tool_version("npm", &["--version"])?;
        let source = root.join("guest-sdk-ts");
        for dir in ["src", "bin", "wit"] {
            println!("cargo:rerun-if-changed={}", source.join(dir).display());
        }
        let lock = source.join("package-lock.json");
        println!("cargo:rerun-if-changed={}", lock.display());
        let sdk = work.join("ts-sdk");
        for dir in ["src", "bin", "wit"] {
            copy_tree(&source.join(dir), &sdk.join(dir)).map_err(|e| e.to_string())?;
        }
        for file in ["package.json", "package-lock.json"] {
            fs::copy(source.join(file), sdk.join(file)).map_err(|e| format!("{file}: {e}"))?;
        }
        // npm ci only when the lockfile changed since the last install.
        let stamp = sdk.join("node_modules/.callai-lock");
        let want = hash_file(&lock)?;
        if fs::read_to_string(&stamp).ok().as_deref() != Some(want.as_str()) {
            let status = Command::new("npm")
                .args([
                    "ci",
                    "--ignore-scripts",
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                ])
                .current_dir(&sdk)
                .status()
                .map_err(|e| format!("npm ci: {e}"))?;
            if !status.success() {
                return Err(format!("npm ci failed in {}", sdk.display()));
            }
            fs::write(&stamp, want).map_err(|e| e.to_string())?;
        }
        // Type-check the SDK and the example packs (esbuild only strips types).
        let status = Command::new("node")
            .arg(sdk.join("node_modules/typescript/bin/tsc"))
            .arg("-p")
            .arg(source.join("tsconfig.json"))
            .status()
            .map_err(|e| format!("tsc: {e}"))?;
        if !status.success() {
            return Err("tsc found type errors in guest-sdk-ts or the TypeScript examples".into());
        }
        Ok(Self { sdk, version })
    }

    /// The SDK as an npm tarball in `out_dir` (what `callai new --lang ts`
    /// writes beside a new pack); its path.
    pub fn pack_sdk(&self, out_dir: &Path) -> Result<PathBuf, String> {
        let out = Command::new("npm")
            .args(["pack", "--silent", "--pack-destination"])
            .arg(out_dir)
            .current_dir(&self.sdk)
            .output()
            .map_err(|e| format!("npm pack: {e}"))?;
        let name = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !out.status.success() || name.is_empty() {
            return Err(format!(
                "npm pack of the TypeScript SDK failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(out_dir.join(name))
    }

    /// A fingerprint of what builds a pack besides the pack's own files:
    /// the SDK with its lockfile, node's version, and this file's recipe.
    pub fn fingerprint(&self) -> Result<String, String> {
        // This file is how a pack is built (the flags `build` passes): a
        // change to it is a change of what a cached pack was built by.
        let recipe = include_str!("node.rs");
        crate::fingerprint(&[&self.sdk], &format!("node {}\n{recipe}", self.version))
    }

    /// Builds the pack whose entry is `entry` into `out`.
    pub fn build(&self, entry: &Path, out: &Path) -> Result<(), String> {
        println!(
            "cargo:rerun-if-changed={}",
            entry.parent().unwrap_or(entry).display()
        );
        let status = Command::new("node")
            .arg(self.sdk.join("bin/build.mjs"))
            .args(["build"])
            .arg(entry)
            .arg("-o")
            .arg(out)
            // The repository's packs are compiled by the tests that run them.
            .arg("--no-compile")
            .status()
            .map_err(|e| format!("node: {e}"))?;
        status
            .success()
            .then_some(())
            .ok_or_else(|| format!("building {} failed", entry.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pack cached by an older recipe (say, other flags to the SDK's
    /// build) is not taken for one this recipe builds.
    #[test]
    fn the_build_recipe_is_part_of_the_fingerprint() {
        let node = Node {
            sdk: Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            version: "v20.0.0".into(),
        };
        let sdk_and_node_only = crate::fingerprint(&[&node.sdk], "node v20.0.0").unwrap();
        assert_ne!(node.fingerprint().unwrap(), sdk_and_node_only);
    }
}
