//! The wasmtime host for callAI packs: loads a pack (a WebAssembly
//! component of the `openwop:callai` `pack-node` world), runs its node on a
//! fresh instance per run, and hands each `ctx.callAI` to a
//! [`callai_engine::RunSession`]. This is the thin wasm layer: the WIT
//! bindings (generated once, private), the imports that only convert WIT
//! types, and the component runtime (pooling allocator, pre-instantiation,
//! a compiled-component cache on disk, per-run limits).
//!
//! ```no_run
//! use callai_engine::{Host, HostConfig, MockProvider, MockScript};
//! use callai_host::PackRuntime;
//!
//! # async fn demo(component: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
//! let mock = MockProvider::new(MockScript::replies([("hello", 2)]), callai_engine::wire::StructuredOutput::Native);
//! let host = Host::builder(HostConfig::default()).mock(mock).build()?;
//! let runtime = PackRuntime::new()?;          // one per process
//! let pack = runtime.load(component)?;        // compiled once, pre-instantiated
//! let out = pack.run(&host, "my.node", r#"{"messages":[{"role":"user","content":"hi"}]}"#).await;
//! println!("{:?} after {} calls", out.result, out.calls);
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod bindings {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "pack-node",
        imports: { default: async | trappable },
        exports: { default: async },
    });

    callai_wire::wit_conversions!(openwop::callai::types);
}

mod cache;
mod clocks;
mod epoch;
mod function_cache;
mod limits;
mod load;
mod runtime;
mod stdio;
mod view;

pub use load::LoadError;
pub use runtime::{
    DEFAULT_CACHE_MAX_BYTES, Pack, PackRuntime, RunOptions, RunOutput, RuntimeOptions,
};
pub use view::{CallAiCtx, CallAiView, add_to_linker};

/// A pack component's name by content: the SHA-256 of its bytes, in hex,
/// as run logs, uploads and the compiled-component cache name it.
///
/// ```
/// assert_eq!(
///     callai_host::sha256_hex(b"abc"),
///     "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
/// );
/// ```
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(cache::source_of(bytes))
}

/// A tokio runtime set up for running packs beside each other: all its
/// timers and I/O, and the tasks other threads wake, are looked at every
/// few task polls (tokio's default is every 61). A busy pack yields its
/// worker every millisecond; with the defaults, a run waiting on a provider
/// could wait 61 such slices for its turn. `workers`: tokio's default (one
/// per core) when `None`.
pub fn tokio_runtime(workers: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .enable_all()
        .event_interval(4)
        .global_queue_interval(4);
    if let Some(n) = workers {
        builder.worker_threads(n);
    }
    builder.build()
}
