//! Builds the test programs (`crates/test-programs/src/bin/*.rs`) into
//! WebAssembly components and writes their paths as constants.

use callai_guest_build::{build, ensure_target, shared_target_dir, workspace_root};
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;

fn main() {
    let root = workspace_root();
    let bins = root.join("crates/test-programs/src/bin");
    println!("cargo:rerun-if-changed=build.rs");
    // A new program is a new file in this directory.
    println!("cargo:rerun-if-changed={}", bins.display());
    ensure_target();

    let mut programs: Vec<String> = fs::read_dir(&bins)
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            (path.extension()? == "rs").then(|| path.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    programs.sort();

    let mut built = build(&root, &["callai-test-programs"], &shared_target_dir());
    let mut code = String::new();
    for p in &programs {
        let wasm = built.component(p);
        writeln!(
            code,
            "/// `crates/test-programs/src/bin/{p}.rs`, as a component."
        )
        .unwrap();
        writeln!(code, "pub const {}: &str = {:?};", p.to_uppercase(), wasm).unwrap();
    }
    code.push_str("/// Every program: its file stem and its component.\npub const ALL: &[(&str, &str)] = &[\n");
    for p in &programs {
        writeln!(code, "    ({p:?}, {}),", p.to_uppercase()).unwrap();
    }
    code.push_str("];\n");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("programs.rs");
    fs::write(out, code).unwrap();
}
