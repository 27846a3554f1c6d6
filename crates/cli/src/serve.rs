//! `callai serve`.

use crate::args::ServeArgs;
use crate::error::CliError;
use callai_config::parse_listen;
use callai_server::{BundledPack, OpenListen, Server, ServerOptions};
use std::process::ExitCode;

/// SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        () = term => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    eprintln!("shutting down: no new runs; runs in flight may finish");
}

pub fn serve(args: ServeArgs) -> Result<ExitCode, CliError> {
    let config = crate::run::load_config(args.config.as_deref())?;
    let listen = args
        .listen
        .as_deref()
        .map(parse_listen)
        .transpose()
        .map_err(|m| CliError::Usage(format!("--listen: {m}")))?;
    let options = ServerOptions {
        listen,
        packs_dir: args.packs,
        runlog: args.runlog,
        bundled: callai_examples::EXAMPLES
            .iter()
            .map(|e| {
                BundledPack::new(e.name, e.node_id, Some(e.default_script.into()), e.loader())
                    .with_sha256(e.sha256)
            })
            .collect(),
        runtime: crate::run::runtime_options(&config),
        open: if args.allow_open {
            OpenListen::Anywhere
        } else {
            OpenListen::LoopbackOnly
        },
        ..ServerOptions::default()
    };
    let rt = crate::run::tokio()?;
    rt.block_on(async {
        let server = Server::bind(config, options)
            .await
            .map_err(|e| CliError::Usage(e.to_string()))?;
        eprint!("{}", server.banner());
        server
            .run(shutdown_signal())
            .await
            .map_err(|e| CliError::Usage(e.to_string()))
    })?;
    Ok(ExitCode::SUCCESS)
}
