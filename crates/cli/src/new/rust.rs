//! `callai new --lang rust`: a pack crate, and the Rust SDK (callai-sdk and
//! the callai-wire types it uses) written out beside it as path
//! dependencies, so the pack builds with no checkout of this repository.

use super::File;

/// The SDK's sources, as this binary was built with them.
macro_rules! sources {
    ($dir:literal, $repo:literal: $($file:literal),* $(,)?) => {
        &[$((concat!($dir, "/", $file), include_str!(concat!("../../../../", $repo, "/", $file)))),*]
    };
}

const SDK: &[(&str, &str)] = sources!(".callai/callai-sdk", "guest-sdk":
    "src/bindings.rs", "src/budget.rs", "src/call.rs", "src/error.rs", "src/lib.rs",
    "src/node.rs", "src/request.rs", "src/response.rs", "src/tools.rs", "wit/callai.wit");

const WIRE: &[(&str, &str)] = sources!(".callai/callai-wire", "crates/wire":
    "src/convert.rs", "src/error.rs", "src/lib.rs", "src/parse/mod.rs", "src/parse/parsed.rs",
    "src/parse/read.rs", "src/parse/retry.rs", "src/parse/shape.rs", "src/parse/tests.rs",
    "src/parse/visit.rs", "src/prompt_cache.rs", "src/request.rs", "src/result.rs",
    "src/thinking.rs", "src/tools.rs", "src/unknown.rs", "src/image.rs", "src/embedding.rs");

/// The oldest Rust the pack builds with: the workspace's own.
const RUST_VERSION: &str = env!("CARGO_PKG_RUST_VERSION");

/// The manifest of a crate of the SDK, standing alone (the repository's
/// inherit from its workspace).
fn sdk_manifest(name: &str, about: &str, dependencies: &str) -> String {
    format!(
        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\
         rust-version = \"{RUST_VERSION}\"\nlicense = \"Apache-2.0\"\ndescription = \"{about} (written out by `callai new`).\"\n\n\
         [dependencies]\n{dependencies}"
    )
}

const SDK_DEPENDENCIES: &str = r#"callai-wire = { path = "../callai-wire" }
wit-bindgen = { version = "0.61.1", default-features = false, features = ["macros", "realloc", "std"] }
serde = { version = "1", features = ["derive"] }
serde_json = "1"
log = "0.4"
"#;

const WIRE_DEPENDENCIES: &str = r#"serde = { version = "1", features = ["derive"] }
serde_json = "1"
serde_path_to_error = "0.1.20"
"#;

fn manifest(name: &str) -> String {
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
rust-version = "{RUST_VERSION}"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
callai-sdk = {{ path = ".callai/callai-sdk" }}
serde = {{ version = "1", features = ["derive"] }}
serde_json = "1"
log = "0.4"

[profile.release]
opt-level = "s"
strip = true

# A pack of its own, even inside another workspace.
[workspace]
"#
    )
}

const LIB: &str = r#"//! A pack node: asks for a scene as structured output and reports the
//! provider requests it really took (RFC 0248 `attempts`).

use callai_sdk::{Node, NodeError, Request, call_as};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Deserialize)]
pub struct Input {
    premise: String,
}

#[derive(Deserialize, Serialize)]
pub struct Scene {
    scene: String,
}

#[derive(Serialize)]
pub struct Output {
    scene: Scene,
    requests: u32,
    output_tokens: Option<u64>,
}

pub struct Draft;

impl Node for Draft {
    type Input = Input;
    type Output = Output;

    fn run(input: Input) -> Result<Output, NodeError> {
        let request = Request::new()
            .system("You write short scenes.")
            .user(input.premise)
            .max_tokens(200)
            .schema(json!({"type": "object", "required": ["scene"],
                           "properties": {"scene": {"type": "string"}}}));
        let scene = call_as::<Scene>(&request)?;
        let attempts = scene.response.attempts();
        Ok(Output {
            scene: scene.data,
            requests: attempts.map_or(1, |a| a.count),
            output_tokens: attempts.and_then(|a| a.output_tokens),
        })
    }
}

callai_sdk::export_node!(Draft);
"#;

/// The files of a Rust pack called `name`.
pub fn files(name: &str) -> Vec<File> {
    let crate_name = name.replace('-', "_");
    let mut files = vec![
        File::text("Cargo.toml", manifest(name)),
        File::text("src/lib.rs", LIB.into()),
        File::text(
            ".callai/callai-sdk/Cargo.toml",
            sdk_manifest(
                "callai-sdk",
                "Write callAI pack nodes in Rust",
                SDK_DEPENDENCIES,
            ),
        ),
        File::text(
            ".callai/callai-wire/Cargo.toml",
            sdk_manifest(
                "callai-wire",
                "The ctx.callAI wire types of RFC 0248",
                WIRE_DEPENDENCIES,
            ),
        ),
        File::text(
            "README.md",
            format!(
                "# {name}\n\nA callAI pack in Rust (`src/lib.rs`); the SDK is in `.callai/`.\n\n\
                 ```sh\nrustup target add wasm32-wasip2\ncargo build --release --target wasm32-wasip2\n\
                 callai run target/wasm32-wasip2/release/{crate_name}.wasm --script mock.json --input-file input.json\n```\n"
            ),
        ),
    ];
    files.extend(
        SDK.iter()
            .chain(WIRE)
            .map(|(path, text)| File::text(path, (*text).into())),
    );
    files
}

#[cfg(test)]
mod tests {
    use super::{SDK, WIRE};
    use std::path::Path;

    /// Every `.rs` file under `dir`, relative to `root`.
    fn sources(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(root).unwrap();
                out.push(relative.to_string_lossy().into_owned());
            }
        }
    }

    /// A new pack's copy of the SDK builds only with every file of it: a
    /// file added to the wire crate or the SDK is added to the lists.
    #[test]
    fn the_lists_name_every_source_file_of_the_sdk() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for (crate_dir, copy, list) in [
            ("crates/wire", ".callai/callai-wire/", WIRE),
            ("guest-sdk", ".callai/callai-sdk/", SDK),
        ] {
            let root = repo.join(crate_dir);
            let mut found = Vec::new();
            sources(&root, &root.join("src"), &mut found);
            for file in found {
                let listed = format!("{copy}{file}");
                assert!(
                    list.iter().any(|(name, _)| *name == listed),
                    "{crate_dir}/{file} is not in the list `callai new --lang rust` copies"
                );
            }
        }
    }
}
