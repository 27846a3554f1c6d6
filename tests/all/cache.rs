//! The compiled-component cache trusts an entry only for the component and
//! the installation it was written for, and never follows a symlink.

use callai_engine::HostConfig;
use callai_host::{PackRuntime, RuntimeOptions};
use callai_tests::components::{component_with_function, pack_with_function};
use callai_tests::{block_on, host_with_script};
use serde_json::json;
use std::path::{Path, PathBuf};

fn runtime(dir: &Path) -> PackRuntime {
    let options = RuntimeOptions {
        max_concurrent_runs: 2,
        ..RuntimeOptions::default()
    }
    .cache_dir(dir);
    PackRuntime::with_options(&options).unwrap()
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    found.sort();
    found
}

/// Runs `bytes` as the echo-attempts node would be asked, and says whether
/// it behaved as echo-attempts (it echoes `attempts`).
fn behaves_as_echo(rt: &PackRuntime, bytes: &[u8]) -> bool {
    let pack = rt.load(bytes).unwrap();
    let (host, _) = host_with_script(
        HostConfig::default(),
        &json!([{"content": "x", "outputTokens": 1}]),
    );
    let input = r#"{"messages": [{"role": "user", "content": "hi"}]}"#;
    let out = block_on(pack.run(&host, "n", input));
    out.result.is_ok_and(|o| o.contains("attempts"))
}

#[test]
fn an_entry_copied_over_anothers_is_recompiled_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let echo = &*callai_examples::example("echo-attempts")
        .unwrap()
        .component();
    let other = &*callai_examples::example("summarize").unwrap().component();
    let rt = runtime(dir.path());
    rt.load(echo).unwrap();
    let echo_entry = entries(dir.path());
    rt.load(other).unwrap();
    let both = entries(dir.path());
    assert_eq!(both.len(), 2);
    let other_entry = both
        .iter()
        .find(|p| !echo_entry.contains(p))
        .unwrap()
        .clone();
    let echo_entry = &echo_entry[0];
    // The attack: echo-attempts' native code put where summarize's goes.
    std::fs::copy(echo_entry, &other_entry).unwrap();
    let fresh = runtime(dir.path());
    assert!(
        !behaves_as_echo(&fresh, other),
        "summarize ran echo-attempts' code"
    );
    assert!(
        behaves_as_echo(&fresh, echo),
        "echo-attempts itself still loads"
    );
    assert_ne!(
        std::fs::read(&other_entry).unwrap(),
        std::fs::read(echo_entry).unwrap(),
        "the planted entry was replaced"
    );
}

#[test]
fn an_entry_from_another_installation_is_not_trusted() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let echo = &*callai_examples::example("echo-attempts")
        .unwrap()
        .component();
    runtime(a.path()).load(echo).unwrap();
    runtime(b.path()).load(echo).unwrap();
    // B's entry, MAC'd with B's key, copied into A's cache under its name.
    let (entry_a, entry_b) = (&entries(a.path())[0], &entries(b.path())[0]);
    assert_eq!(entry_a.file_name(), entry_b.file_name());
    assert_ne!(
        std::fs::read(entry_a).unwrap(),
        std::fs::read(entry_b).unwrap()
    );
    std::fs::copy(entry_b, entry_a).unwrap();
    let planted = std::fs::read(entry_a).unwrap();
    assert!(behaves_as_echo(&runtime(a.path()), echo));
    assert_ne!(
        std::fs::read(entry_a).unwrap(),
        planted,
        "recompiled and rewritten under A's key"
    );
}

#[cfg(unix)]
#[test]
fn a_symlink_in_the_cache_is_neither_followed_nor_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let echo = &*callai_examples::example("echo-attempts")
        .unwrap()
        .component();
    runtime(dir.path()).load(echo).unwrap();
    let entry = entries(dir.path())[0].clone();
    // The entry replaced by a link to a file the attacker wants written.
    let victim = outside.path().join("victim");
    std::fs::write(&victim, b"keep me").unwrap();
    std::fs::remove_file(&entry).unwrap();
    std::os::unix::fs::symlink(&victim, &entry).unwrap();
    assert!(behaves_as_echo(&runtime(dir.path()), echo));
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"keep me",
        "written through the link"
    );
    assert!(
        !std::fs::symlink_metadata(&entry)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link was replaced"
    );
    // The key file too: a link there is not read as the key.
    let key = dir.path().join("cache.key");
    assert!(std::fs::symlink_metadata(&key).unwrap().is_file());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn a_component_refused_as_a_pack_is_never_cached() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path());
    // A component that compiles but exports no `run`: refused from what
    // its bytes say, before it is compiled (issue 31 #10).
    let not_a_pack = component_with_function(64, "refused");
    let refused = rt.load(&not_a_pack).map(|_| ()).unwrap_err();
    assert!(
        matches!(refused, callai_host::LoadError::NotAPackShape(_)),
        "{refused}"
    );
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
    assert!(!rt.is_cached(&not_a_pack));
}

#[test]
fn the_cache_keeps_to_its_bound_dropping_the_least_recently_used() {
    let dir = tempfile::tempdir().unwrap();
    let packs: Vec<Vec<u8>> = ["echo-attempts", "summarize", "bookai-scene"]
        .iter()
        .map(|n| callai_examples::example(n).unwrap().component().to_vec())
        .collect();
    // Learn each entry's size with an unbounded cache, then start empty.
    let sizes: Vec<u64> = {
        let rt = runtime(dir.path());
        packs
            .iter()
            .map(|p| {
                rt.load(p).unwrap();
                let size = entries(dir.path())
                    .iter()
                    .map(|e| e.metadata().unwrap().len())
                    .sum::<u64>();
                entries(dir.path())
                    .iter()
                    .for_each(|e| std::fs::remove_file(e).unwrap());
                size
            })
            .collect()
    };
    // The compiled packs get half of `maxBytes`, the functions the rest.
    let bound = sizes.iter().sum::<u64>() - 1;
    let options = RuntimeOptions {
        max_concurrent_runs: 2,
        cache_max_bytes: 2 * bound,
        ..RuntimeOptions::default()
    }
    .cache_dir(dir.path());
    let rt = PackRuntime::with_options(&options).unwrap();
    let pause = || std::thread::sleep(std::time::Duration::from_millis(20));
    rt.load(&packs[0]).unwrap();
    pause();
    rt.load(&packs[1]).unwrap();
    pause();
    // A hit is a use: the first is now the most recently used.
    rt.load(&packs[0]).unwrap();
    pause();
    rt.load(&packs[2]).unwrap();
    let cached: Vec<bool> = packs.iter().map(|p| rt.is_cached(p)).collect();
    assert_eq!(
        cached,
        [true, false, true],
        "the second was used least recently"
    );
    let total: u64 = entries(dir.path())
        .iter()
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(
        total <= bound,
        "{total} bytes cached over a bound of {bound}"
    );
    let functions: u64 = std::fs::read_dir(dir.path().join("functions"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(
        functions > 0 && functions <= bound,
        "{functions} bytes of compiled functions over a bound of {bound}"
    );
}

#[test]
fn a_function_over_the_limit_is_refused_before_compiling() {
    let options = RuntimeOptions {
        max_concurrent_runs: 1,
        max_function_bytes: Some(100_000),
        ..RuntimeOptions::default()
    };
    let rt = PackRuntime::with_options(&options).unwrap();
    // 3.6 MB in one function: compiling it took 12 s of CPU and 818 MB.
    let bomb = component_with_function(3_600_000, "bomb");
    let started = std::time::Instant::now();
    match rt.check(&bomb) {
        Err(callai_host::LoadError::FunctionTooLarge {
            largest,
            limit,
            key,
        }) => {
            assert_eq!((largest, limit), (3_600_000, 100_000));
            assert_eq!(key, "server.maxPackFunctionBytes");
        }
        other => panic!("{other:?}"),
    }
    assert!(rt.load(&bomb).is_err());
    // Reading sizes is linear: far under the 12 s a compile took.
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert!(rt.check(&pack_with_function(100_000, "fits")).is_ok());
}

/// Issue 31 #10: the code a compile would take is counted whole, however
/// it is split into functions, and a component that cannot be a pack is
/// refused from its bytes; both before anything is compiled.
#[test]
fn code_over_the_limit_and_components_of_no_pack_are_refused_before_compiling() {
    let options = RuntimeOptions {
        max_concurrent_runs: 1,
        max_function_bytes: Some(1 << 20),
        max_code_bytes: Some(500_000),
        ..RuntimeOptions::default()
    };
    let rt = PackRuntime::with_options(&options).unwrap();
    // Every function under the function limit, the code over the whole.
    let pack = pack_with_function(600_000, "big");
    match rt.check(&pack) {
        Err(callai_host::LoadError::CodeTooLarge { total, limit, key }) => {
            assert!(total >= 600_000, "{total}");
            assert_eq!((limit, key), (500_000, "server.maxPackCodeBytes"));
        }
        other => panic!("{other:?}"),
    }
    assert!(rt.check(&pack_with_function(100_000, "small")).is_ok());
    // No `run`: no pack, whatever it holds.
    match rt.check(&component_with_function(64, "no-run")) {
        Err(callai_host::LoadError::NotAPackShape(why)) => {
            assert!(why.contains("run"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    // The shaped one really is a pack: it compiles, pre-instantiates, runs.
    let small = rt.load(&pack_with_function(64, "runs")).unwrap();
    let (host, _) = host_with_script(HostConfig::default(), &json!([]));
    let out = block_on(small.run(&host, "n", "{}"));
    assert_eq!(out.result.unwrap(), "");
}

#[test]
fn every_bundled_pack_fits_the_default_function_limit() {
    let limit = callai_config::ServerConfig::default().max_pack_function_bytes;
    let options = RuntimeOptions {
        max_concurrent_runs: 1,
        max_function_bytes: Some(limit),
        ..RuntimeOptions::default()
    };
    let rt = PackRuntime::with_options(&options).unwrap();
    for example in callai_examples::EXAMPLES {
        let bytes = example.component();
        if let Err(e) = rt.check(&bytes) {
            panic!("{}: {e}", example.name);
        }
    }
}

/// The hash each bundled pack carries from the examples' build (what a
/// server lists it by, without inflating it) is its bytes' own.
#[test]
fn every_bundled_pack_carries_its_own_sha256() {
    for example in callai_examples::EXAMPLES {
        assert_eq!(
            example.sha256,
            callai_host::sha256_hex(&example.component()),
            "{}",
            example.name
        );
    }
}
