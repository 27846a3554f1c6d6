//! `callai new --lang rust|ts|py DIR`: a pack that builds outside this
//! repository. The SDK comes from this binary (the Rust SDK written out as
//! a path dependency, the TypeScript SDK as an npm tarball, the Python SDK
//! as a wheel), with a mock script that truncates once, a sample input and
//! a README of five lines.

mod python;
mod rust;
mod typescript;

use crate::error::CliError;
use std::path::Path;

/// The language of a new pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// A Rust crate (callai-sdk).
    Rust,
    /// A TypeScript module (@openwop/callai-sdk, componentize-js).
    #[value(alias = "typescript")]
    Ts,
    /// A Python module (callai_sdk, componentize-py).
    #[value(alias = "python")]
    Py,
}

/// One file of a new pack, relative to its folder.
pub struct File {
    path: &'static str,
    owned_path: Option<String>,
    contents: Vec<u8>,
}

impl File {
    fn text(path: &'static str, text: String) -> Self {
        Self {
            path,
            owned_path: None,
            contents: text.into_bytes(),
        }
    }

    fn bytes(path: String, contents: Vec<u8>) -> Self {
        Self {
            path: "",
            owned_path: Some(path),
            contents,
        }
    }

    fn path(&self) -> &str {
        self.owned_path.as_deref().unwrap_or(self.path)
    }
}

/// The mock script every new pack runs on: a truncated reply, then a scene.
const MOCK: &str = r#"[{"content": "{\"scene\": \"The lamp turns and", "finishReason": "length", "outputTokens": 500},
 {"content": "{\"scene\": \"The lamp turns. A ship answers.\"}", "finishReason": "stop", "outputTokens": 120}]
"#;

const INPUT: &str = "{\"premise\": \"A lighthouse at dusk.\"}\n";

/// Writes a new pack of `lang` into `dir` (which must not exist, or be
/// empty), and says how to build and run it.
pub fn new(lang: Lang, dir: &Path) -> Result<(), CliError> {
    if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(CliError::Usage(format!(
            "{} is not empty: give a new folder",
            dir.display()
        )));
    }
    let name = pack_name(dir)?;
    let mut files = match lang {
        Lang::Rust => rust::files(&name),
        Lang::Ts => typescript::files(&name),
        Lang::Py => python::files(&name),
    };
    files.push(File::text("mock.json", MOCK.into()));
    files.push(File::text("input.json", INPUT.into()));
    for file in &files {
        let path = dir.join(file.path());
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, &file.contents));
        written.map_err(|source| CliError::Write { path, source })?;
    }
    eprintln!(
        "a {} pack in {}; see its README.md to build and run it",
        match lang {
            Lang::Rust => "Rust",
            Lang::Ts => "TypeScript",
            Lang::Py => "Python",
        },
        dir.display()
    );
    Ok(())
}

/// The pack's name: the folder's, as a package name (`my-pack`).
fn pack_name(dir: &Path) -> Result<String, CliError> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let ok = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if ok {
        Ok(name)
    } else {
        Err(CliError::Usage(format!(
            "{}: the folder's name names the pack; use a letter, then letters, digits, '-' or '_'",
            dir.display()
        )))
    }
}
