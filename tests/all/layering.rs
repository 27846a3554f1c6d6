//! No import circles (issue 50): in `callai-gateway`, `callai-server` and
//! `callai-wire`, no module reaches, through the modules it names, a module
//! that names it. Each file is parsed (syn), its tests left out, and every
//! way one module names another is an edge of the graph:
//!
//! - a `mod child;` line: the parent names its child (so a child that
//!   names its parent, `use super::X` for an `X` of the parent's file, is a
//!   circle: what children share lives in a sibling);
//! - every path in the code and in `use` and `pub use` lines: from
//!   `crate::`, `super::`, `self::`, or a child's name (`use logged::…`),
//!   resolved to the longest prefix that is a module of the crate (a name
//!   re-exported by a parent is the parent: `crate::X` is the crate's root).
//!
//! A circle of any size fails, named module by module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

type Module = Vec<String>;
type Graph = BTreeMap<Module, BTreeSet<Module>>;

/// Whether the attributes hold `#[cfg(test)]`.
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

/// One module's file as read: the children it declares and every path it
/// names, each as written.
#[derive(Default)]
struct Named {
    children: Vec<String>,
    paths: Vec<Vec<String>>,
}

impl Named {
    fn add_use(&mut self, prefix: &[String], tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                let mut prefix = prefix.to_vec();
                prefix.push(p.ident.to_string());
                self.add_use(&prefix, &p.tree);
            }
            syn::UseTree::Name(n) => {
                let mut path = prefix.to_vec();
                if n.ident != "self" {
                    path.push(n.ident.to_string());
                }
                self.paths.push(path);
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.to_vec();
                path.push(r.ident.to_string());
                self.paths.push(path);
            }
            syn::UseTree::Glob(_) => self.paths.push(prefix.to_vec()),
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| self.add_use(prefix, t)),
        }
    }
}

impl<'ast> Visit<'ast> for Named {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if is_test(attrs) {
            return;
        }
        match item {
            syn::Item::Mod(m) if m.content.is_none() => self.children.push(m.ident.to_string()),
            syn::Item::Use(u) => self.add_use(&[], &u.tree),
            _ => syn::visit::visit_item(self, item),
        }
    }

    /// `pub(super)`, `pub(in crate::a)`: who may see an item names nothing
    /// it uses.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.paths
            .push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, path);
    }
}

/// Every module of the crate whose root file is `root`, with what its file
/// names.
fn modules(root: &Path) -> BTreeMap<Module, Named> {
    fn read(file: &Path, module: Module, out: &mut BTreeMap<Module, Named>) {
        let text = std::fs::read_to_string(file).unwrap();
        let syntax = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let mut named = Named::default();
        named.visit_file(&syntax);
        // `a.rs` keeps its children in `a/`, `a/mod.rs` and `lib.rs` beside.
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        let dir: PathBuf = match stem.as_str() {
            "mod" | "lib" => file.parent().unwrap().into(),
            _ => file.with_extension(""),
        };
        for child in &named.children {
            let as_file = dir.join(format!("{child}.rs"));
            let file = if as_file.exists() {
                as_file
            } else {
                dir.join(child).join("mod.rs")
            };
            let mut path = module.clone();
            path.push(child.clone());
            read(&file, path, out);
        }
        out.insert(module, named);
    }
    let mut out = BTreeMap::new();
    read(root, Vec::new(), &mut out);
    out
}

/// The module a path written in `module` names, if it names one of the
/// crate's: from `crate`, `super` (each), `self`, or a child's name; the
/// longest prefix that is a module.
fn target(
    module: &Module,
    path: &[String],
    children: &[String],
    all: &BTreeSet<Module>,
) -> Option<Module> {
    let (mut at, rest) = match path.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &path[1..]),
        Some("self") => (module.clone(), &path[1..]),
        Some("super") => {
            let supers = path.iter().take_while(|s| *s == "super").count();
            let at = module[..module.len().checked_sub(supers)?].to_vec();
            (at, &path[supers..])
        }
        Some(first) if children.iter().any(|c| c == first) => (module.clone(), path),
        _ => return None,
    };
    let mut found = at.clone();
    for segment in rest {
        at.push(segment.clone());
        if all.contains(&at) {
            found = at.clone();
        } else {
            break;
        }
    }
    Some(found)
}

/// The graph of the crate whose root file is `root`.
fn graph(root: &Path) -> Graph {
    let modules = modules(root);
    let all: BTreeSet<Module> = modules.keys().cloned().collect();
    let mut edges = Graph::new();
    for (module, named) in &modules {
        let out = edges.entry(module.clone()).or_default();
        for child in &named.children {
            let mut path = module.clone();
            path.push(child.clone());
            out.insert(path);
        }
        for path in &named.paths {
            if let Some(to) = target(module, path, &named.children, &all)
                && to != *module
            {
                out.insert(to);
            }
        }
    }
    edges
}

/// A path of `edges` that comes back to where it started, if there is one.
fn find_circle(edges: &Graph) -> Option<Vec<Module>> {
    fn from(
        at: &Module,
        edges: &Graph,
        path: &mut Vec<Module>,
        done: &mut BTreeSet<Module>,
    ) -> Option<Vec<Module>> {
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

fn name(module: &Module) -> String {
    match module.is_empty() {
        true => "crate".into(),
        false => module.join("::"),
    }
}

#[test]
fn no_module_of_the_gateway_the_server_or_the_wire_reaches_one_that_reaches_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for krate in ["gateway", "server", "wire"] {
        let edges = graph(&root.join("crates").join(krate).join("src/lib.rs"));
        let count: usize = edges.values().map(BTreeSet::len).sum();
        assert!(
            edges.len() > 8 && count > 20,
            "crates/{krate}: the scan found {} modules and {count} edges: it is wrong",
            edges.len()
        );
        if let Some(found) = find_circle(&edges) {
            let names: Vec<String> = found.iter().map(name).collect();
            panic!("crates/{krate}: an import circle: {}", names.join(" -> "));
        }
    }
}

#[test]
fn the_scan_sees_mod_lines_child_paths_re_exports_and_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    let m = |path: &str| -> Module {
        path.split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    };
    write("lib.rs", "mod a;\nmod b;\npub use a::X;\n");
    write("a/mod.rs", "mod inner;\npub use inner::X;\n");
    write(
        "a/inner.rs",
        "pub(super) struct X;\n#[cfg(test)]\nmod tests { use crate::b::Y; }\n",
    );
    write("b.rs", "pub struct Y(crate::a::X);\n");
    let edges = graph(&dir.path().join("lib.rs"));
    assert_eq!(edges[&m("")], [m("a"), m("b")].into());
    assert_eq!(
        edges[&m("a")],
        [m("a::inner")].into(),
        "mod line and child path"
    );
    assert!(
        edges[&m("a::inner")].is_empty(),
        "tests and visibility are left out"
    );
    assert_eq!(edges[&m("b")], [m("a")].into());
    assert_eq!(find_circle(&edges), None);
    // A child naming what its parent's file holds is a circle.
    write("a/inner.rs", "pub struct X(super::Z);\n");
    write("a/mod.rs", "mod inner;\npub use inner::X;\npub struct Z;\n");
    let found = find_circle(&graph(&dir.path().join("lib.rs"))).unwrap();
    assert_eq!(
        found.iter().map(name).collect::<Vec<_>>(),
        ["a", "a::inner", "a"]
    );
    // So is a path through the root's re-export, of any length.
    write("a/inner.rs", "pub struct X;\n");
    write("b.rs", "pub struct Y(crate::X);\n");
    write(
        "a/mod.rs",
        "mod inner;\npub use inner::X;\npub fn f(_: crate::b::Y) {}\n",
    );
    let found = find_circle(&graph(&dir.path().join("lib.rs"))).unwrap();
    assert_eq!(
        found.iter().map(name).collect::<Vec<_>>(),
        ["crate", "a", "b", "crate"]
    );
}

/// The crates the gateway may not pull in, even through another: it is
/// the domain, and HTTP is the server's.
const HTTP: [&str; 7] = [
    "axum",
    "axum-core",
    "hyper",
    "hyper-util",
    "http",
    "tower",
    "tower-http",
];

/// The crates `package` depends on, its normal dependencies' too (not
/// its dev- or build-dependencies).
fn tree(package: &str) -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .current_dir(&root)
        .args(["tree", "--offline", "--locked", "-q", "-e", "normal"])
        .args(["--prefix", "none", "-p", package])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo tree -p {package} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| Some(l.split(' ').next()?.to_owned()))
        .collect()
}

#[test]
fn the_gateway_has_no_http_in_its_dependency_tree() {
    let gateway = tree("callai-gateway");
    assert!(
        gateway.contains("callai-engine") && gateway.contains("tokio"),
        "the tree reads wrong: {gateway:?}"
    );
    let http: Vec<&str> = HTTP.into_iter().filter(|c| gateway.contains(*c)).collect();
    assert!(http.is_empty(), "callai-gateway depends on {http:?}");
    // The server, the HTTP edge, does: the check tells them apart.
    assert!(tree("callai-server").contains("axum"));
}
