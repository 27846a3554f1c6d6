//! A test that no module of this crate imports, directly or through
//! others, a module that imports it: each file's `crate::` and `super::`
//! paths (re-exports and tests aside) resolved to the module they name,
//! and the graph searched for a circle, which the failure names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// `src/a/b.rs` and `src/a/b/mod.rs` are `a::b`; `src/lib.rs` is the root.
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without its tests and its re-exports.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or(text);
    text.lines()
        .filter(|l| !l.trim_start().starts_with("pub use ") && !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path the code names from `crate::` or `super::`, each as module
/// segments from the root; `use a::{b, c::d}` groups expanded one level.
fn paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    for (start, prefix) in code
        .match_indices("crate::")
        .chain(code.match_indices("super::"))
    {
        if start > 0 && word(bytes[start - 1]) {
            continue;
        }
        let mut base: Vec<String> = match prefix {
            "crate::" => Vec::new(),
            _ => module[..module.len().saturating_sub(1)].to_vec(),
        };
        let rest = &code[start + prefix.len()..];
        let path: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        base.extend(
            path.split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        );
        let after = &rest[path.len()..];
        if path.ends_with("::") && after.starts_with('{') {
            let group = &after[1..after.find('}').unwrap_or(after.len())];
            for item in group.split(',') {
                let mut p = base.clone();
                p.extend(item.trim().split("::").map(|s| s.trim().to_owned()));
                out.push(p);
            }
        } else {
            out.push(base);
        }
    }
    out
}

#[test]
fn no_module_imports_one_that_imports_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let modules: BTreeSet<Vec<String>> = all
        .iter()
        .map(|p| module_of(p.strip_prefix(&src).unwrap()))
        .collect();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for file in &all {
        let module = module_of(file.strip_prefix(&src).unwrap());
        let text = std::fs::read_to_string(file).unwrap();
        for path in paths(&code(&text), &module) {
            // The longest prefix that is a module of this crate.
            let target = (0..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| modules.contains(p))
                .unwrap_or_default();
            if target != module && !target.is_empty() {
                edges.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    assert!(
        edges.len() > 10,
        "the scan found too few imports to mean anything: {edges:?}"
    );
    if let Some(found) = find_circle(&edges) {
        let names: Vec<String> = found.iter().map(|m| m.join("::")).collect();
        panic!("an import circle: {}", names.join(" -> "));
    }
}

type Graph = BTreeMap<Vec<String>, BTreeSet<Vec<String>>>;

/// A path of `edges` that comes back to where it started, if there is one.
fn find_circle(edges: &Graph) -> Option<Vec<Vec<String>>> {
    fn from(
        at: &Vec<String>,
        edges: &Graph,
        path: &mut Vec<Vec<String>>,
        done: &mut BTreeSet<Vec<String>>,
    ) -> Option<Vec<Vec<String>>> {
        if let Some(i) = path.iter().position(|p| p == at) {
            let mut found = path[i..].to_vec();
            found.push(at.clone());
            return Some(found);
        }
        if done.contains(at) {
            return None;
        }
        path.push(at.clone());
        for next in edges.get(at).into_iter().flatten() {
            if let Some(found) = from(next, edges, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(at.clone());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|start| from(start, edges, &mut Vec::new(), &mut done))
}

#[test]
fn the_scan_reads_paths_and_finds_circles() {
    let a = vec!["a".to_owned()];
    let found = paths("use crate::b::{X, c::Y};\nfn f() { super::z::w(); }", &a);
    let want: Vec<Vec<String>> = [vec!["b", "X"], vec!["b", "c", "Y"], vec!["z", "w"]]
        .into_iter()
        .map(|p| p.into_iter().map(str::to_owned).collect())
        .collect();
    assert_eq!(found, want);
    let m = |name: &str| vec![name.to_owned()];
    let mut edges = Graph::new();
    edges.entry(m("a")).or_default().insert(m("b"));
    edges.entry(m("b")).or_default().insert(m("c"));
    assert_eq!(find_circle(&edges), None);
    edges.entry(m("c")).or_default().insert(m("a"));
    assert_eq!(
        find_circle(&edges),
        Some(vec![m("a"), m("b"), m("c"), m("a")])
    );
}
