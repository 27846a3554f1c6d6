//! Compiling a pack: `callai run`'s first run of a pack says so and how
//! long it took, and `callai compile` fills the compiled-component cache
//! ahead of time (a build script's last step), so the first run is fast.

use crate::error::{CliError, print};
use callai_host::{Pack, PackRuntime};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// A compile this long or longer is reported with its time.
const WORTH_SAYING: Duration = Duration::from_secs(1);

/// Loads `bytes` (the pack `name`), compiling it unless the cache holds
/// it; on a terminal, a compile says it is one, and how long it took once
/// that is a second or more.
pub fn load(runtime: &PackRuntime, name: &str, bytes: &[u8]) -> Result<Pack, CliError> {
    let compiling = !runtime.is_cached(bytes);
    let terminal = std::io::stderr().is_terminal();
    if compiling && terminal {
        eprintln!(
            "compiling {name} ({}; first run, cached after) …",
            size(bytes.len())
        );
    }
    let (pack, took) = timed_load(runtime, name, bytes)?;
    if compiling && terminal && took >= WORTH_SAYING {
        eprintln!("compiled {name} in {:.1} s", took.as_secs_f64());
    }
    Ok(pack)
}

/// `callai compile PACK...`: each component file compiled into the cache
/// `callai run` and `callai serve` load from; one line each on stdout.
pub fn compile(runtime: &PackRuntime, packs: &[PathBuf]) -> Result<ExitCode, CliError> {
    if !runtime.has_cache() {
        return Err(CliError::Usage(
            "no compiled-component cache: set CALLAI_CACHE_DIR, XDG_CACHE_HOME or HOME".into(),
        ));
    }
    for path in packs {
        let bytes = std::fs::read(path).map_err(|source| CliError::Read {
            what: "pack",
            path: path.clone(),
            source,
        })?;
        let name = path.display().to_string();
        let line = if runtime.is_cached(&bytes) {
            format!("{name}: already compiled\n")
        } else {
            let (_, took) = timed_load(runtime, &name, &bytes)?;
            format!("{name}: compiled in {:.1} s\n", took.as_secs_f64())
        };
        print(&line)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `bytes` (the pack `name`) loaded, compiled if the cache lacks it, and
/// how long that took.
fn timed_load(
    runtime: &PackRuntime,
    name: &str,
    bytes: &[u8],
) -> Result<(Pack, Duration), CliError> {
    let started = Instant::now();
    let pack = runtime.load(bytes).map_err(|source| CliError::Load {
        name: name.to_owned(),
        source,
    })?;
    Ok((pack, started.elapsed()))
}

fn size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{} MB", b >> 20),
        b => format!("{} KB", b.div_ceil(1 << 10)),
    }
}
