//! `callai`: run packs on the callAI runtime, list the bundled examples,
//! print the facet, run the conformance scenario, prune a run log.

mod args;
mod error;
mod new;
mod run;
mod runlog;
mod serve;

use args::{Cli, Command};
use clap::Parser;
use std::process::ExitCode;

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
        Command::Facet { config } => run::facet(config.as_deref()),
        Command::Conformance {
            json,
            config,
            fixture,
        } => run::conformance(json, config.as_deref(), &fixture),
    };
    outcome.unwrap_or_else(|error| {
        error.report();
        ExitCode::from(2)
    })
}
