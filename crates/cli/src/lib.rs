//! The `callai` command's library part: the example packs this build
//! bundles (built by `build.rs` into components and embedded), so that
//! `callai run echo-attempts` works on a fresh checkout.

/// One bundled example pack.
#[derive(Debug, Clone, Copy)]
pub struct Example {
    /// The name `callai run` takes.
    pub name: &'static str,
    /// The node id.
    pub node_id: &'static str,
    /// One line about it.
    pub description: &'static str,
    /// The component.
    pub component: &'static [u8],
    /// The mock script `run` uses when given none.
    pub default_script: &'static str,
    /// The input `run` uses when given none.
    pub default_input: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/examples.rs"));

/// The bundled example called `name` (its crate name, e.g. `echo-attempts`).
pub fn example(name: &str) -> Option<&'static Example> {
    EXAMPLES.iter().find(|e| e.name == name)
}
