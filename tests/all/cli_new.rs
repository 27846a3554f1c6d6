//! `callai new`: a pack of each language made in a folder outside the
//! repository, built there with the SDK the binary wrote out (no network:
//! cargo and npm work offline from what this repository's build fetched),
//! and run by `callai` on the mock script it came with.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn callai() -> Command {
    crate::callai_command()
}

/// Runs `command`, failing the test with its output when it fails.
fn ok(command: &mut Command) -> std::process::Output {
    let out = command.output().expect("the command starts");
    assert!(
        out.status.success(),
        "{command:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `program` with the words of `args`, run in `dir`.
fn in_dir(dir: &Path, program: &str, args: &str) -> Command {
    let mut command = Command::new(program);
    command.args(args.split(' ')).current_dir(dir);
    command
}

/// Makes a pack of `lang` in a new folder under `parent`.
fn new_pack(lang: &str, parent: &Path) -> std::path::PathBuf {
    let dir = parent.join(format!("my-{lang}-pack"));
    ok(callai().args(["new", "--lang", lang]).arg(&dir));
    assert!(dir.join("README.md").exists() && dir.join("mock.json").exists());
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(readme.lines().count() <= 10, "{readme}");
    dir
}

/// The pack's build ran `callai compile` (the `callai` of `$CALLAI`) into
/// the cache of `$CALLAI_CACHE_DIR`, `cache`: the first run loads it.
fn was_precompiled(built: &std::process::Output, cache: &Path) {
    let said = String::from_utf8_lossy(&built.stdout);
    assert!(said.contains("pack.wasm: compiled in"), "{said}");
    assert_eq!(
        callai_tests::compiled_components(cache),
        1,
        "the build compiled the pack into the cache"
    );
}

/// Runs the built component on the pack's own mock script and input: the
/// mock truncates once, so the call took two requests.
fn runs_with_two_attempts(dir: &Path, component: &Path) {
    let out = ok(callai()
        .env("CALLAI_CACHE_DIR", dir.join("../cache"))
        .arg("run")
        .arg(component)
        .args(["--script", "mock.json", "--input-file", "input.json"])
        .current_dir(dir));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["requests"], 2, "{v}");
    assert_eq!(v["scene"]["scene"], "The lamp turns. A ship answers.");
}

#[test]
fn a_rust_pack_builds_outside_the_repository() {
    let parent = tempfile::tempdir().unwrap();
    let dir = new_pack("rust", parent.path());
    // The SDK written out is every source file of the SDK and its wire types.
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    for (repo, written) in [
        ("guest-sdk/src", ".callai/callai-sdk/src"),
        ("crates/wire/src", ".callai/callai-wire/src"),
    ] {
        for entry in std::fs::read_dir(root.join(repo)).unwrap() {
            let name = entry.unwrap().file_name();
            let copy = dir.join(written).join(&name);
            assert!(copy.exists(), "callai new left out {repo}/{name:?}");
        }
    }
    // The oldest Rust it builds with is stated, and is the workspace's.
    let stated = format!("rust-version = \"{}\"", env!("CARGO_PKG_RUST_VERSION"));
    for manifest in [
        "Cargo.toml",
        ".callai/callai-sdk/Cargo.toml",
        ".callai/callai-wire/Cargo.toml",
    ] {
        let text = std::fs::read_to_string(dir.join(manifest)).unwrap();
        assert!(text.contains(&stated), "{manifest}: {text}");
    }
    // A target folder kept between runs: the SDK's dependencies compile
    // once; the pack and the SDK written beside it build anew each time.
    let target = callai_tests::target_tmp("cli-new-rust-target");
    let build = "build --offline --release --target wasm32-wasip2";
    ok(in_dir(&dir, env!("CARGO"), build).env("CARGO_TARGET_DIR", &target));
    runs_with_two_attempts(
        &dir,
        &target.join("wasm32-wasip2/release/my_rust_pack.wasm"),
    );
    // The README's pack (its `log::info!` included) builds in the crate
    // `callai new` wrote, with the dependencies the template lists.
    let readme_pack =
        std::fs::read_to_string(root.join("crates/test-programs/src/bin/readme_pack.rs")).unwrap();
    let shown = readme_pack.split("// README: begin\n").nth(1).unwrap();
    let shown = shown.split("// README: end").next().unwrap();
    std::fs::write(dir.join("src/lib.rs"), shown).unwrap();
    ok(in_dir(&dir, env!("CARGO"), build).env("CARGO_TARGET_DIR", &target));
    assert_eq!(
        callai()
            .arg("new")
            .args(["--lang", "rust"])
            .arg(&dir)
            .output()
            .unwrap()
            .status
            .code(),
        Some(2),
        "a folder that is not empty is refused"
    );
}

#[test]
fn a_typescript_pack_builds_outside_the_repository() {
    if callai_examples::TS_SDK.is_none() {
        eprintln!("skipped: this build has no node, so no TypeScript SDK");
        return;
    }
    let parent = tempfile::tempdir().unwrap();
    let dir = new_pack("ts", parent.path());
    ok(&mut in_dir(
        &dir,
        "npm",
        "ci --offline --no-audit --no-fund --loglevel=error",
    ));
    let cache = callai_tests::cache_sharing_functions(parent.path());
    let built = ok(in_dir(&dir, "npm", "run --silent build")
        .env("CALLAI", env!("CARGO_BIN_EXE_callai"))
        .env("CALLAI_CACHE_DIR", &cache));
    was_precompiled(&built, &cache);
    runs_with_two_attempts(&dir, &dir.join("pack.wasm"));
    // A string where the SDK takes a number fails the build, with tsc's
    // message naming the line, before anything is bundled.
    let index = dir.join("src/index.ts");
    let good = std::fs::read_to_string(&index).unwrap();
    std::fs::write(&index, good.replace(".maxTokens(200)", ".maxTokens('20')")).unwrap();
    std::fs::remove_file(dir.join("pack.wasm")).unwrap();
    let out = in_dir(&dir, "npm", "run --silent build")
        .env("CALLAI", env!("CARGO_BIN_EXE_callai"))
        .env("CALLAI_CACHE_DIR", &cache)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the build type-checks: {said}");
    assert!(
        said.contains("src/index.ts") && said.contains("TS2345"),
        "{said}"
    );
    assert!(
        !dir.join("pack.wasm").exists(),
        "nothing built past the check"
    );
}

#[test]
fn a_python_pack_builds_outside_the_repository() {
    let (Some(_), Some(python)) = (callai_examples::PY_SDK, callai_examples::BUILD_PYTHON) else {
        eprintln!("skipped: this build has no python3, so no Python SDK");
        return;
    };
    let parent = tempfile::tempdir().unwrap();
    let dir = new_pack("py", parent.path());
    // The wheel callai wrote, installed on its own; componentize-py is the
    // one this repository's build installed (the README's pip install of
    // .callai/requirements-build.txt would fetch the same, pinned).
    let site = parent.path().join("site");
    let wheel = std::fs::read_dir(dir.join(".callai"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .expect("a wheel");
    ok(Command::new(python)
        .args(["-m", "pip", "install", "--quiet", "--no-deps", "--target"])
        .arg(&site)
        .arg(wheel));
    let build = "-m callai_sdk.build build app.py -o pack.wasm";
    let cache = callai_tests::cache_sharing_functions(parent.path());
    let built = ok(in_dir(&dir, python, build)
        .env("PYTHONPATH", &site)
        .env("CALLAI", env!("CARGO_BIN_EXE_callai"))
        .env("CALLAI_CACHE_DIR", &cache));
    was_precompiled(&built, &cache);
    runs_with_two_attempts(&dir, &dir.join("pack.wasm"));
    // Without a callai to run, the build says the first run compiles.
    let unbuilt = ok(in_dir(&dir, python, build)
        .env("PYTHONPATH", &site)
        .env("CALLAI", parent.path().join("no-such-callai")));
    let said = String::from_utf8_lossy(&unbuilt.stderr);
    assert!(
        said.contains("the first `callai run` compiles the pack"),
        "{said}"
    );
}
