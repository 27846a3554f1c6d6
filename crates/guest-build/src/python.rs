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
    build: PathBuf,
}

impl Python {
    /// Finds python3, and makes the environment under `work`; `Err` says
    /// what is missing.
    pub fn install(root: &Path, work: &Path) -> Result<Self, String> {
        tool_version("python3", &["--version"])?;
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
        Ok(Self {
            venv,
            build: sdk.join("src/callai_sdk/build.py"),
        })
    }

    /// Builds the pack whose module is `app` into `out`.
    pub fn build(&self, app: &Path, out: &Path) -> Result<(), String> {
        println!(
            "cargo:rerun-if-changed={}",
            app.parent().unwrap_or(app).display()
        );
        let status = Command::new(self.venv.join("bin/python"))
            .arg(&self.build)
            .arg("build")
            .arg(app)
            .arg("-o")
            .arg(out)
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
