//! `callai`: run packs on the callAI runtime, list the bundled examples,
//! print the facet, run the conformance scenario, prune a run log, manage
//! a server's API keys.

mod args;
mod compile;
mod config_check;
mod error;
mod keys;
mod new;
mod pack_logs;
mod run;
mod runlog;
mod serve;

use args::{Cli, Command, ConfigCommand};
use clap::{CommandFactory, Parser};
use error::Report;
use std::process::ExitCode;

/// `callai --version`: the package's version, the commit it was built
/// from and its cargo features (set by build.rs).
pub(crate) const VERSION: &str = env!("CALLAI_VERSION");

/// mimalloc, the default build's allocator: less CPU per call than glibc's
/// malloc through `serve` under load, about as much memory per call in
/// flight (the figures: docs/src/performance.md).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Run(args) => run::run(*args),
        Command::Serve(args) => serve::serve(args),
        Command::Examples => {
            let list: String = callai_examples::EXAMPLES
                .iter()
                .map(|e| {
                    format!(
                        "{:<18} {:<11} {:<36} {}\n",
                        e.name, e.language, e.node_id, e.description
                    )
                })
                .collect();
            error::print(&list).map(|()| ExitCode::SUCCESS)
        }
        Command::New { lang, dir } => new::new(lang, &dir).map(|()| ExitCode::SUCCESS),
        Command::Runlog { command } => runlog::runlog(command),
        Command::Keys { command } => keys::keys(command),
        Command::Config {
            command: ConfigCommand::Check { file, json },
        } => {
            // Its errors are what a person reads unless a program asks.
            let report = if json { Report::Json } else { Report::Text };
            return config_check::check(&file, json).unwrap_or_else(|error| {
                error.report_as(report);
                ExitCode::from(2)
            });
        }
        Command::Compile { packs, config } => run::load_config(config.as_deref())
            .and_then(|config| run::runtime(&config))
            .and_then(|runtime| compile::compile(&runtime, &packs)),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "callai", &mut script);
            error::print(&String::from_utf8_lossy(&script)).map(|()| ExitCode::SUCCESS)
        }
        Command::Facet { config } => run::facet(config.as_deref()),
        Command::Conformance {
            json,
            config,
            fixture,
        } => run::conformance(json, config.as_deref(), &fixture),
    };
    outcome.unwrap_or_else(|error| {
        error.report_as(Report::Auto);
        ExitCode::from(2)
    })
}
