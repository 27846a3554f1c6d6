//! Files and functions a reader holds in one view (issue 32): no Rust
//! source file of the repository over 500 lines, no function or method
//! over 100. Each file is parsed (syn, lines from spans), so a brace in a
//! string or a comment counts for nothing; what is over is named with its
//! length.

use std::path::{Path, PathBuf};
use syn::visit::Visit;

const MAX_FILE_LINES: usize = 500;
const MAX_FN_LINES: usize = 100;

/// Files written by a tool, not by a person: wit-bindgen's output.
const GENERATED: [&str; 1] = ["guest-sdk/src/bindings.rs"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !matches!(name.as_str(), "target" | "node_modules" | ".git") {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// Every function and method of a file with its first line and length.
#[derive(Default)]
struct Functions(Vec<(String, usize, usize)>);

impl Functions {
    fn add(&mut self, name: String, span: proc_macro2::Span) {
        let (start, end) = (span.start().line, span.end().line);
        self.0.push((name, start, end - start + 1));
    }
}

impl<'ast> Visit<'ast> for Functions {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.add(f.sig.ident.to_string(), syn::spanned::Spanned::span(f));
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.add(f.sig.ident.to_string(), syn::spanned::Spanned::span(f));
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        self.add(f.sig.ident.to_string(), syn::spanned::Spanned::span(f));
        syn::visit::visit_trait_item_fn(self, f);
    }
}

#[test]
fn no_file_over_500_lines_and_no_function_over_100() {
    let root = root();
    let mut files = Vec::new();
    for dir in ["crates", "tests", "examples", "guest-sdk", "fuzz"] {
        sources(&root.join(dir), &mut files);
    }
    assert!(
        files.len() > 100,
        "found {} files: the scan is wrong",
        files.len()
    );
    let mut over = Vec::new();
    let mut functions = 0;
    for file in &files {
        let relative = file
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if GENERATED.contains(&relative.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        let lines = text.lines().count();
        if lines > MAX_FILE_LINES {
            over.push(format!("{relative}: {lines} lines"));
        }
        let parsed =
            syn::parse_file(&text).unwrap_or_else(|e| panic!("{relative} does not parse: {e}"));
        let mut found = Functions::default();
        found.visit_file(&parsed);
        functions += found.0.len();
        for (name, line, length) in found.0 {
            if length > MAX_FN_LINES {
                over.push(format!("{relative}:{line}: fn {name} is {length} lines"));
            }
        }
    }
    assert!(
        functions > 1000,
        "found {functions} functions: the scan is wrong"
    );
    assert!(
        over.is_empty(),
        "over {MAX_FILE_LINES} lines a file or {MAX_FN_LINES} a function:\n{}",
        over.join("\n")
    );
}
