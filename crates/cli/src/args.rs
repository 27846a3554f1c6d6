//! The command line (the `callai` contract of the design).

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Run callAI packs: WebAssembly components whose nodes call models through
/// this host, with every provider request counted (RFC 0248).
#[derive(Debug, Parser)]
#[command(name = "callai", version = crate::VERSION)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a pack's node once and print its output (JSON) on stdout.
    Run(Box<RunArgs>),
    /// Serve the host over HTTP: run packs, upload them, ctx.callAI as a
    /// service, Prometheus metrics, OpenTelemetry traces.
    Serve(ServeArgs),
    /// List the bundled example packs.
    Examples,
    /// Write a new pack into DIR, with the SDK it builds with, a mock script
    /// that truncates once, a sample input and a README of how to build it.
    New {
        /// The pack's language.
        #[arg(long, value_enum)]
        lang: crate::new::Lang,
        /// The folder to make (its name names the pack).
        dir: PathBuf,
    },
    /// Make, list and revoke the API keys of a running `callai serve`
    /// (through its `/v1/keys`, with the admin's token).
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Look after a run log.
    Runlog {
        #[command(subcommand)]
        command: RunlogCommand,
    },
    /// Check a host config without starting anything: print every setting
    /// with its default filled in, or the first error with its key, line
    /// and column.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Compile component files into the cache `callai run` and `callai
    /// serve` load from, so that their first run starts at once (a pack
    /// build's last step).
    Compile {
        /// The component files (.wasm).
        #[arg(required = true)]
        packs: Vec<PathBuf>,
        /// Host config (TOML): its `[limits]` and `[cache]` shape the
        /// compilation, as for `run`.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Print a shell's completion script for `callai` (bash: `source <(callai
    /// completions bash)`; zsh: into a file on `$fpath` named `_callai`;
    /// fish: into `~/.config/fish/completions/callai.fish`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the host's aiProviders facet (and the reliability capability).
    Facet {
        /// Host config (TOML).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Run the v2-callai-attempt-accounting conformance scenario on this host
    /// (its eight legs through the real wasm fixture node); exits non-zero on
    /// any failed finding.
    Conformance {
        /// Print the findings as JSON.
        #[arg(long)]
        json: bool,
        /// Host config (TOML) to judge instead of the defaults.
        #[arg(long)]
        config: Option<PathBuf>,
        /// The fixture node to run the legs through: a bundled example
        /// honouring the conformance node's contract (`echo-attempts`, or
        /// `echo-attempts-ts`, the same node in TypeScript).
        #[arg(long, default_value = "echo-attempts")]
        fixture: String,
    },
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// A component file (.wasm) or the name of a bundled example (see `callai examples`).
    pub pack: String,
    /// The node's input (JSON). Default: the example's sample input.
    #[arg(long, conflicts_with = "input_file")]
    pub input: Option<String>,
    /// Read the node's input from this file.
    #[arg(long)]
    pub input_file: Option<PathBuf>,
    /// Mock provider script (JSON array, one reply per provider request).
    /// Default: the example's own script, or one text reply.
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// Host config (TOML).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Write every event of the run here, one JSON object per line.
    #[arg(long)]
    pub events: Option<PathBuf>,
    /// Write one JSON line per request the mock received.
    #[arg(long)]
    pub mock_log: Option<PathBuf>,
    /// Record every call of the run into this run log: an SQLite file
    /// (created if absent) or a `postgres://` URL. Needs --run-id.
    #[arg(long, requires = "run_id", conflicts_with_all = ["replay", "resume"])]
    pub record: Option<String>,
    /// Replay the run from this run log: every call is served from the log,
    /// no provider request is made. Needs --run-id.
    #[arg(long, requires = "run_id", conflicts_with = "resume")]
    pub replay: Option<String>,
    /// Resume a run that stopped before its end (the host died or was
    /// killed): its committed calls are served from this run log, the first
    /// call past them goes live, and the run goes on recording under its id.
    /// The input and mock script default to the ones the run was started
    /// with. Needs --run-id.
    #[arg(long, requires = "run_id")]
    pub resume: Option<String>,
    /// The run's id in the run log.
    #[arg(long)]
    pub run_id: Option<String>,
    /// With --record: replace a run already recorded under --run-id.
    #[arg(long, requires = "record")]
    pub overwrite: bool,
    /// The node id reported in events. Default: the example's node id, or the file name.
    #[arg(long)]
    pub node_id: Option<String>,
    /// Show the pack's own log lines at this level and above on stderr as
    /// the run goes (`off` for none).
    #[arg(long, value_enum, default_value = "info")]
    pub log: crate::pack_logs::LogLevel,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Host config (TOML); `[server]`, `[runlog]` and `[telemetry]` apply.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Listen here (IP:PORT) instead of `[server] listen`.
    #[arg(long)]
    pub listen: Option<String>,
    /// Every `*.wasm` in this folder is a pack, named by its file stem.
    #[arg(long)]
    pub packs: Option<PathBuf>,
    /// Record every run here instead of `[runlog] url`: an SQLite file or a
    /// `postgres://` URL.
    #[arg(long)]
    pub runlog: Option<String>,
    /// Listen beyond loopback even with no token set (a proxy in front
    /// checks every caller): whoever reaches the server is its admin.
    #[arg(long)]
    pub allow_open: bool,
}

/// `callai config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Parse and check a host config as `callai serve` does at start-up
    /// (providers, defaults, tenants, tokens, limits), without starting
    /// anything; print the settings it makes as TOML.
    Check {
        /// The host config (TOML).
        file: PathBuf,
        /// Print for a program: the settings (or the error, on stderr) as
        /// one JSON object. Without it both are text, on a terminal or not.
        #[arg(long)]
        json: bool,
    },
}

/// `callai runlog ...`
#[derive(Debug, Subcommand)]
pub enum RunlogCommand {
    /// Delete the finished runs that ended before a date (their calls,
    /// events, and the schemas no call names any more). Runs still running
    /// are kept.
    Prune {
        /// Host config (TOML): its `[runlog] url` and `keepDays`.
        #[arg(long)]
        config: Option<PathBuf>,
        /// The run log (an SQLite file or a `postgres://` URL), instead of
        /// `[runlog] url`.
        #[arg(long)]
        runlog: Option<String>,
        /// Prune what ended before this: a date (`2026-11-01`, midnight
        /// UTC) or an RFC 3339 time. Default: `[runlog] keepDays` ago.
        #[arg(long)]
        before: Option<String>,
    },
}

/// Where a `callai keys` command finds the server.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// The server's address.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The variable holding the admin's token (`[server] tokenEnv`'s).
    #[arg(long, default_value = "CALLAI_TOKEN")]
    pub token_env: String,
}

/// `callai keys`.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Make a key of a tenant; prints it as JSON, its secret (`key`) once.
    Create {
        /// The tenant its calls and runs belong to.
        #[arg(long)]
        tenant: String,
        /// A name for people.
        #[arg(long)]
        name: String,
        /// A limit, `KEY=AMOUNT/PER` (`requests=600/1m`, `cost=5/1d`;
        /// keys: requests, inputTokens, outputTokens, cost); repeatable.
        #[arg(long = "limit")]
        limits: Vec<String>,
        /// A provider its calls may reach; repeatable (none: its tenant's).
        #[arg(long = "allowed-provider")]
        allowed_providers: Vec<String>,
        /// A model its calls may name; repeatable (none: any).
        #[arg(long = "allowed-model")]
        allowed_models: Vec<String>,
        /// When it stops working (RFC 3339).
        #[arg(long)]
        expires_at: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List every key (no secrets): id, tenant, name, status, last used.
    List {
        /// Print the server's JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Revoke a key: refused on every host from then on.
    Revoke {
        /// The key's id (`key-…`).
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}
