//! The operator's commands: `callai config check`, `callai completions`,
//! `callai --version`, and what `callai serve` says when it starts.

use super::cli::{callai, write};
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn config_check_prints_every_setting_with_its_default() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "host.toml",
        "[retry]\nmaxRetryAttempts = 5\n[providers.openai]\n\
         [tenants.acme]\ntokenEnv = \"ACME_TOKEN\"\n[tenants.acme.budget]\nrequests = 100\n",
    );
    // As on a machine where the provider's key is not set.
    let out = crate::callai_command()
        .args(["config", "check", &file])
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert!(
        printed.starts_with(&format!("# {file}: valid.")),
        "{printed}"
    );
    let settings: toml::Table = toml::from_str(&printed).expect("the output is TOML");
    // The file's own value, and defaults it did not set.
    assert_eq!(settings["retry"]["maxRetryAttempts"].as_integer(), Some(5));
    assert_eq!(
        settings["retry"]["defaultMaxTokens"].as_integer(),
        Some(4000)
    );
    assert_eq!(settings["limits"]["wallMs"].as_integer(), Some(300_000));
    assert_eq!(
        settings["server"]["listen"].as_str(),
        Some("127.0.0.1:8080")
    );
    // A provider's defaults come from its kind.
    let openai = &settings["providers"]["openai"];
    assert_eq!(openai["kind"].as_str(), Some("openai"));
    assert_eq!(openai["model"].as_str(), Some("gpt-4o-mini"));
    assert_eq!(openai["apiKeyEnv"].as_str(), Some("OPENAI_API_KEY"));
    assert_eq!(
        settings["tenants"]["acme"]["budget"]["window"].as_str(),
        Some("1d")
    );
    // The printed settings are a config that checks the same.
    let again = write(dir.path(), "again.toml", &printed);
    let out_again = callai(&["config", "check", &again]);
    assert!(out_again.status.success(), "{}", text(&out_again.stderr));
    let settings_again: toml::Table = toml::from_str(&text(&out_again.stdout)).unwrap();
    assert_eq!(settings_again, settings);
    // What this environment lacks is said, not refused.
    let notes = text(&out.stderr);
    assert!(notes.contains("$OPENAI_API_KEY"), "{notes}");
    assert!(notes.contains("$ACME_TOKEN"), "{notes}");
    assert!(notes.contains("--runlog"), "{notes}");
    // For a program: one JSON object, the notes in it.
    let out = crate::callai_command()
        .args(["config", "check", "--json", &file])
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    let said: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(said["valid"], true);
    assert_eq!(said["settings"]["retry"]["maxRetryAttempts"], 5);
    let notes = said["notes"].as_array().unwrap();
    assert!(
        notes
            .iter()
            .any(|n| n.as_str().unwrap().contains("$OPENAI_API_KEY")),
        "{notes:?}"
    );
}

/// What `config check` refuses about money, `serve` refuses at start-up,
/// before it listens, naming the same key.
#[test]
fn serve_refuses_a_budget_in_money_no_call_could_keep() {
    let dir = tempfile::tempdir().unwrap();
    let runlog = dir.path().join("runs.db");
    for (name, toml, key) in [
        (
            "currency.toml",
            "[tenants.a]\ntokenEnv = \"T\"\n[tenants.a.budget]\ncost = 5.0\ncurrency = \"usd\"\n",
            "tenants.a.budget.currency",
        ),
        (
            "unpriced.toml",
            "[providers.q]\nkind = \"openai\"\napiKeyEnv = \"\"\n[tenants.a]\ntokenEnv = \"T\"\n\
             allowedProviders = [\"q\"]\n[tenants.a.budget]\ncost = 5.0\n",
            "tenants.a.allowedProviders[0]",
        ),
    ] {
        let file = write(dir.path(), name, toml);
        let out = crate::callai_command()
            .args([
                "serve",
                "--config",
                &file,
                "--listen",
                "127.0.0.1:0",
                "--runlog",
            ])
            .arg(&runlog)
            .env("T", "tok")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}: {}", text(&out.stderr));
        let said = text(&out.stderr);
        assert!(said.contains(key), "{name}: {said}");
        assert!(!text(&out.stdout).contains("listening"), "{name}");
    }
}

#[test]
fn config_check_names_the_key_line_and_column_of_the_first_error() {
    let dir = tempfile::tempdir().unwrap();
    for (name, toml, needles) in [
        (
            "range.toml",
            "# a comment\n[retry]\nmaxRetryAttempts = 99\n",
            &["retry.maxRetryAttempts", "line 3, column 20"][..],
        ),
        (
            "provider.toml",
            "[tenants.acme]\ntokenEnv = \"T\"\nallowedProviders = [\"mock\", \"opnai\"]\n",
            &[
                "tenants.acme.allowedProviders[1]",
                "\"opnai\"",
                "line 3, column 29",
            ],
        ),
        (
            "shared.toml",
            "[server]\ntokenEnv = \"ADMIN\"\n[tenants.a]\ntokenEnv = \"ADMIN\"\n",
            &["tenants.a.tokenEnv", "line 4, column 12"],
        ),
        (
            "unknown.toml",
            "[retry]\nmaxRetrys = 2\n",
            &["maxRetrys", "line 2, column 1"],
        ),
        (
            "open.toml",
            "[server]\nlisten = \"0.0.0.0:8080\"\n",
            &["server.tokenEnv", "0.0.0.0:8080"],
        ),
        (
            "currency.toml",
            "[tenants.a]\ntokenEnv = \"T\"\n[tenants.a.budget]\ncost = 5.0\ncurrency = \"usd\"\n",
            &["tenants.a.budget.currency", "\"usd\"", "line 5"],
        ),
        (
            "unpriced.toml",
            "[providers.q]\nkind = \"openai\"\n[tenants.a]\ntokenEnv = \"T\"\n\
             allowedProviders = [\"q\"]\n[tenants.a.budget]\ncost = 5.0\n",
            &["tenants.a.allowedProviders[0]", "no price in USD", "line 5"],
        ),
        (
            "route.toml",
            "[providers.q]\nkind = \"openai\"\n[providers.p]\nkind = \"openai\"\n\
             prices = { input = 1.0, output = 2.0 }\n[models.free]\ntargets = [\"q\"]\n\
             [tenants.a]\ntokenEnv = \"T\"\n[tenants.a.budget]\ncost = 5.0\n",
            &["models.free.targets", "tenant \"a\"", "line 7"],
        ),
    ] {
        let file = write(dir.path(), name, toml);
        // Piped, the error is still the text a person reads...
        let out = callai(&["config", "check", &file]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        assert!(out.stdout.is_empty(), "{name}");
        let said = text(&out.stderr);
        assert!(said.starts_with("error: "), "{name}: {said}");
        for needle in needles {
            assert!(said.contains(needle), "{name}: {said}");
        }
        // ...and JSON when a program asks for it.
        let out = callai(&["config", "check", "--json", &file]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        let error: serde_json::Value = serde_json::from_slice(&out.stderr).unwrap();
        assert_eq!(error["error"]["kind"], "config", "{name}");
        let message = error["error"]["message"].as_str().unwrap();
        for needle in needles {
            assert!(message.contains(needle), "{name}: {message}");
        }
    }
    let out = callai(&["config", "check", "/no/such/host.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("/no/such/host.toml"));
}

#[test]
fn completions_load_in_bash_and_name_every_command() {
    let out = callai(&["completions", "bash"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let dir = tempfile::tempdir().unwrap();
    let script = write(dir.path(), "callai.bash", &text(&out.stdout));
    let loaded = Command::new("bash")
        .args(["--noprofile", "--norc", "-c"])
        .arg(format!("source {script} && complete -p callai"))
        .output()
        .expect("bash runs");
    assert!(loaded.status.success(), "{}", text(&loaded.stderr));
    assert!(text(&loaded.stdout).contains("callai"));
    for command in [
        "run",
        "serve",
        "config",
        "completions",
        "new",
        "conformance",
    ] {
        assert!(text(&out.stdout).contains(command), "{command}");
    }
    for (shell, marker) in [("zsh", "#compdef callai"), ("fish", "complete -c callai")] {
        let out = callai(&["completions", shell]);
        assert!(out.status.success());
        assert!(text(&out.stdout).contains(marker), "{shell}");
    }
    let out = callai(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("tcsh"));
}

#[test]
fn version_names_the_commit_and_the_features() {
    let out = callai(&["--version"]);
    assert!(out.status.success());
    let version = text(&out.stdout);
    assert!(
        version.starts_with(&format!("callai {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    assert!(version.contains("; features: "), "{version}");
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    if let Some(head) = head.ok().filter(|o| o.status.success()) {
        let head = text(&head.stdout);
        assert!(version.contains(head.trim()), "{version} vs HEAD {head}");
    }
}

#[test]
fn serve_says_what_it_serves_when_it_starts() {
    let mut child = crate::callai_command()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(
        first.starts_with("listening on http://127.0.0.1:"),
        "{first}"
    );
    let block: Vec<String> = lines.by_ref().take(4).map(Result::unwrap).collect();
    child.kill().unwrap();
    child.wait().unwrap();
    let block = block.join("\n");
    for needle in [
        "providers",
        "only the built-in mock",
        "no token is set",
        "run log",
        "in memory",
        "bundled examples",
    ] {
        assert!(block.contains(needle), "{needle}: {block}");
    }
}

#[test]
fn compile_fills_the_cache_that_run_loads_from() {
    let cache = tempfile::tempdir().unwrap();
    let pack = Path::new(callai_test_programs_artifacts::path("multi_call").unwrap());
    let compile = |pack: &Path| {
        crate::callai_command()
            .arg("compile")
            .arg(pack)
            .env("CALLAI_CACHE_DIR", cache.path())
            .output()
            .unwrap()
    };
    // `callai run`'s cache: the compiled components under CALLAI_CACHE_DIR.
    let cwasm = || {
        std::fs::read_dir(cache.path().join("components"))
            .into_iter()
            .flatten()
            .filter(|e| {
                let path = e.as_ref().unwrap().path();
                path.extension().is_some_and(|x| x == "cwasm")
            })
            .count()
    };
    assert_eq!(cwasm(), 0);
    let first = compile(pack);
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert!(
        text(&first.stdout).contains(": compiled in "),
        "{}",
        text(&first.stdout)
    );
    assert_eq!(cwasm(), 1, "the compilation is in the cache");
    let again = compile(pack);
    assert!(
        text(&again.stdout).contains(": already compiled"),
        "{}",
        text(&again.stdout)
    );
    let missing = compile(Path::new("/no/such/pack.wasm"));
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).contains("/no/such/pack.wasm"));
}
