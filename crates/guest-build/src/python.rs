//! Python packs: componentize-py (pinned by hash in
//! `guest-sdk-py/requirements-build.txt`) installed into a virtual
//! environment under the shared guest target directory, and the SDK's
//! build command (`callai_sdk/build.py`) run with it.

use crate::{hash_file, tool_version};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The build environment, ready to build packs.
#[derive(Debug)]
pub struct Python {
    venv: PathBuf,
    sdk: PathBuf,
    version: String,
}

impl Python {
    /// Finds python3, and makes the environment under `work`; `Err` says
    /// what is missing.
    pub fn install(root: &Path, work: &Path) -> Result<Self, String> {
        let version = tool_version("python3", &["--version"])?;
        let sdk = root.join("guest-sdk-py");
        let requirements = sdk.join("requirements-build.txt");
        println!("cargo:rerun-if-changed={}", requirements.display());
        println!(
            "cargo:rerun-if-changed={}",
            sdk.join("src/callai_sdk").display()
        );
        let venv = work.join("py-venv");
        let python = venv.join("bin/python");
        if !python.exists() {
            let status = Command::new("python3")
                .args(["-m", "venv"])
                .arg(&venv)
                .status()
                .map_err(|e| format!("python3 -m venv: {e}"))?;
            if !status.success() {
                return Err("python3 -m venv failed (is the venv module installed?)".into());
            }
        }
        let stamp = venv.join(".callai-requirements");
        let want = hash_file(&requirements)?;
        if fs::read_to_string(&stamp).ok().as_deref() != Some(want.as_str()) {
            let status = Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .args(["--require-hashes", "-r"])
                .arg(&requirements)
                .status()
                .map_err(|e| format!("pip: {e}"))?;
            if !status.success() {
                return Err("pip install -r guest-sdk-py/requirements-build.txt failed".into());
            }
            fs::write(&stamp, want).map_err(|e| e.to_string())?;
        }
        Ok(Self { venv, sdk, version })
    }

    /// The SDK (`root/guest-sdk-py`) as a wheel in `out_dir` (what `callai
    /// new --lang py` writes beside a new pack); its path. Built from a copy,
    /// so that setuptools' build folders stay out of the source tree.
    pub fn wheel(&self, root: &Path, out_dir: &Path) -> Result<PathBuf, String> {
        let source = out_dir.join("source");
        let _ = fs::remove_dir_all(out_dir);
        crate::copy_tree(&root.join("guest-sdk-py"), &source).map_err(|e| e.to_string())?;
        let status = Command::new(self.venv.join("bin/python"))
            .args([
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(["--no-deps", "--no-build-isolation", "--wheel-dir"])
            .arg(out_dir)
            .arg(&source)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .status()
            .map_err(|e| format!("pip wheel: {e}"))?;
        if !status.success() {
            return Err("pip wheel of guest-sdk-py failed".into());
        }
        let wheel = fs::read_dir(out_dir)
            .map_err(|e| e.to_string())?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "whl"))
            .ok_or("pip wheel made no wheel")?;
        Ok(wheel)
    }

    /// The build environment's interpreter, with componentize-py.
    pub fn interpreter(&self) -> PathBuf {
        self.venv.join("bin/python")
    }

    /// A fingerprint of what builds a pack besides the pack's own files:
    /// the SDK's sources, the pinned build requirements, python's
    /// version, and this file's recipe.
    pub fn fingerprint(&self) -> Result<String, String> {
        crate::fingerprint(
            &[
                &self.sdk.join("src"),
                &self.sdk.join("requirements-build.txt"),
            ],
            // This file is how a pack is built: a change to it is a
            // change of what a cached pack was built by.
            &format!("{}\n{}", self.version, include_str!("python.rs")),
        )
    }

    /// Builds the pack whose module is `app` into `out`.
    pub fn build(&self, app: &Path, out: &Path) -> Result<(), String> {
        println!(
            "cargo:rerun-if-changed={}",
            app.parent().unwrap_or(app).display()
        );
        let status = Command::new(self.venv.join("bin/python"))
            .arg(self.sdk.join("src/callai_sdk/build.py"))
            .arg("build")
            .arg(app)
            .arg("-o")
            .arg(out)
            // The repository's packs are compiled by the tests that run them.
            .arg("--no-compile")
            // No __pycache__ in the source tree.
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .status()
            .map_err(|e| format!("python: {e}"))?;
        status
            .success()
            .then_some(())
            .ok_or_else(|| format!("building {} failed", app.display()))
    }
}
