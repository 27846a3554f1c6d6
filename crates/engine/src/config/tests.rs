//! The engine's sections against their documented defaults and errors (the
//! whole file, every section, is tested where it is composed: callai-config).

use super::*;

#[test]
fn empty_sections_take_the_documented_defaults() {
    let c = HostConfig::from_toml("").unwrap();
    assert_eq!(c, HostConfig::default());
    assert_eq!(
        (
            c.retry.max_retry_attempts,
            c.retry.truncation_budget_multiplier,
            c.retry.default_max_tokens,
            c.retry.provider_max_tokens,
        ),
        (3, 2, 4000, 64000)
    );
    assert!(c.retry.nl_fallback && c.mock.native);
    assert!(c.call_accounting.attempts && c.call_accounting.retry_policy);
    assert_eq!(c.defaults.provider, "mock");
    assert!(c.provider_allowed("anything"), "no policy: every provider");
}

#[test]
fn a_section_of_another_crate_is_unknown_here() {
    // The engine alone reads only its own sections; `[server]` belongs to
    // the file the `callai` command composes.
    let err = HostConfig::from_toml("[server]\nlisten = \"127.0.0.1:1\"").unwrap_err();
    assert!(err.to_string().contains("server"), "{err}");
}

#[test]
fn out_of_range_values_name_their_key() {
    for (text, key) in [
        ("[retry]\nmaxRetryAttempts = 17", "retry.maxRetryAttempts"),
        ("[limits]\nwallMs = 0", "limits.wallMs"),
        ("[mock]\nlatencyMs = 600001", "mock.latencyMs"),
    ] {
        let err = HostConfig::from_toml(text).unwrap_err();
        assert_eq!(err.key(), Some(key), "{text}: {err}");
    }
}

#[test]
fn every_section_is_declared_once_and_read_by_its_name() {
    // Each name of SECTIONS is read by read_section (an empty table of it
    // parses), and an unknown one is refused listing exactly SECTIONS.
    for section in HostConfig::SECTIONS {
        HostConfig::from_toml(&format!("[{section}]\n")).unwrap();
    }
    let e = HostConfig::from_toml("[nope]\n").unwrap_err().to_string();
    let listed = HostConfig::SECTIONS.map(|s| format!("`{s}`")).join(", ");
    assert!(e.contains(&format!("expected one of {listed}")), "{e}");
    let c = HostConfig::from_toml("[limits]\nwallMs = 7\n").unwrap();
    assert_eq!(c.limits.wall_ms, 7);
}
