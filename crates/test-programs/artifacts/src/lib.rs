//! The test programs, built into WebAssembly components by this crate's
//! build script: one path constant per program (`TRAP`, `MULTI_CALL`, ...).
//! Dev-only: the tests load them with `PackRuntime::load_file`.

include!(concat!(env!("OUT_DIR"), "/programs.rs"));

/// The component of the program with this file stem.
pub fn path(name: &str) -> Option<&'static str> {
    ALL.iter().find(|(n, _)| *n == name).map(|(_, p)| *p)
}
