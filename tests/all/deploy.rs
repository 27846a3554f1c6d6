//! `deploy/`: the systemd unit passes `systemd-analyze verify` without a
//! warning, and every example host config passes `callai config check`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

#[test]
fn the_systemd_unit_verifies_cleanly() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        let how = "systemd-analyze is not installed: .ci/run installs the distribution's \
                   systemd package";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{how}");
        }
        eprintln!("skipped: {how}");
        return;
    }
    let unit = std::fs::read_to_string(deploy().join("callai.service")).unwrap();
    assert!(unit.contains("ExecStart=/usr/local/bin/callai serve --config /etc/callai/host.toml"));
    for key in [
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
        "StateDirectory=callai",
        "DynamicUser=yes",
    ] {
        assert!(unit.contains(key), "{key}");
    }
    // verify checks that the command exists: the one this test built.
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("callai.service");
    let unit = unit.replace("/usr/local/bin/callai", env!("CARGO_BIN_EXE_callai"));
    std::fs::write(&local, &unit).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&local)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
    // It would say so: a misspelt key is a warning verify prints.
    std::fs::write(&local, unit.replace("ProtectHome=", "ProtectHme=")).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&local)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("ProtectHme"));
}

#[test]
fn every_example_config_checks() {
    let mut checked = 0;
    for entry in std::fs::read_dir(deploy()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let out = crate::callai_command()
            .args(["config", "check"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        checked += 1;
    }
    assert_eq!(
        checked, 3,
        "the laptop, one provider, tenants on PostgreSQL"
    );
}
