//! Why a `callai` command could not do what it was asked (exit code 2): a
//! bad argument, config, file, script, pack or run log. A run that went and
//! failed is not one of these (it prints the run's error, exit code 1).

use callai_engine::mock::ScriptError;
use callai_engine::{ConfigError, RunLogError};
use callai_host::LoadError;
use std::io::IsTerminal;
use std::path::PathBuf;

/// A command that could not start, or could not finish its output.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The host config is not usable.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// A file given on the command line could not be read.
    #[error("cannot read {what} {}: {source}", path.display())]
    Read {
        /// What the file is for (`input`, `script`).
        what: &'static str,
        /// The path given.
        path: PathBuf,
        /// Why (no such file, permission denied, ...).
        source: std::io::Error,
    },
    /// An output file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The path given.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The pack is neither a bundled example nor a file.
    #[error("{name:?} is neither a component file nor a bundled example ({known})")]
    NoSuchPack {
        /// What was given.
        name: String,
        /// The bundled examples' names.
        known: String,
    },
    /// The pack does not load.
    #[error("cannot load {name}: {source}")]
    Load {
        /// The pack as given.
        name: String,
        /// Why.
        source: LoadError,
    },
    /// The mock script is not one.
    #[error("{0}")]
    Script(#[from] ScriptError),
    /// The run log cannot be used for what was asked.
    #[error("{0}")]
    RunLog(#[from] RunLogError),
    /// Anything else the arguments ask for that cannot be done.
    #[error("{0}")]
    Usage(String),
    /// A `callai serve` could not be reached, or refused what was asked
    /// (its own error said).
    #[error("{0}")]
    Server(String),
}

/// Writes `text` to stdout. A reader that went away (`callai run ... |
/// head -1`) is not an error: the command ends quietly, as a Unix tool
/// does; any other write error is one.
pub fn print(text: &str) -> Result<(), CliError> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(CliError::Write {
            path: "standard output".into(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// How a command's error is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// A line of text on a terminal, JSON for a program reading stderr.
    Auto,
    /// `error: MESSAGE`, whoever reads it.
    Text,
    /// `{"error": {"kind", "message", "key"?}}`, whoever reads it.
    Json,
}

impl CliError {
    /// Tells the person or program that ran the command, as `report` says:
    /// a line they can read, or the JSON `{"error": {"kind", "message"}}`
    /// (with `key` for a config error that names one).
    pub fn report_as(&self, report: Report) {
        let message = self.to_string();
        let json = match report {
            Report::Auto => !std::io::stderr().is_terminal(),
            Report::Text => false,
            Report::Json => true,
        };
        if !json {
            eprintln!("error: {message}");
            return;
        }
        let kind = match self {
            Self::Config(_) => "config",
            Self::Read { .. } | Self::Write { .. } => "io",
            Self::NoSuchPack { .. } | Self::Load { .. } => "pack",
            Self::Script(_) => "script",
            Self::RunLog(_) => "runlog",
            Self::Usage(_) => "usage",
            Self::Server(_) => "server",
        };
        let mut error = serde_json::json!({"kind": kind, "message": message});
        if let Self::Config(e) = self
            && let Some(key) = e.key()
        {
            error["key"] = key.into();
        }
        eprintln!("{}", serde_json::json!({ "error": error }));
    }
}
