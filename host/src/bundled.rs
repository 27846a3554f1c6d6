//! The example packs bundled into this build (feature `bundled-examples`):
//! built by `build.rs` into components and embedded, so `callai run
//! echo-attempts` works on a fresh checkout.

include!(concat!(env!("OUT_DIR"), "/components.rs"));

/// The bundled example called `name` (its crate name, e.g. `echo-attempts`).
pub fn example(name: &str) -> Option<&'static Example> {
    EXAMPLES.iter().find(|e| e.name == name)
}
