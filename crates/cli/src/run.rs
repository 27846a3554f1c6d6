//! `callai run`, `facet` and `conformance`.

use crate::args::RunArgs;
use crate::error::{CliError, print};
use crate::pack_logs::PackLogs;
use callai_config::{Config, OpenLog, RunLogConfig};
use callai_engine::RunLogError;
use callai_engine::observe::SharedObserver;
use callai_engine::runlog::{ExistingRun, RecordedRun, RunSpec, RunStatus};
use callai_engine::{Host, Journal, MockProvider, MockScript, Recording, facet};
use callai_host::{PackRuntime, RunOptions, RunOutput, RuntimeOptions};
use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

pub(crate) fn load_config(path: Option<&Path>) -> Result<Config, CliError> {
    match path {
        Some(p) => Ok(Config::from_file(p)?),
        None => Ok(Config::default()),
    }
}

/// The host of `config`: every configured provider started and its API key
/// read now, so a missing key stops every subcommand at start-up; each
/// attempt priced at its prices, as `serve` prices it.
fn host(config: &Config) -> Result<Host, CliError> {
    let prices = callai_config::PriceList::load(config)?;
    let builder = config.host_builder(&|k| std::env::var(k).ok())?;
    Ok(builder.prices(Arc::new(prices)).build()?)
}

fn read(path: &Path, what: &'static str) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|source| CliError::Read {
        what,
        path: path.to_owned(),
        source,
    })
}

fn create(path: &Path) -> Result<BufWriter<File>, CliError> {
    File::create(path)
        .map(BufWriter::new)
        .map_err(|source| CliError::Write {
            path: path.to_owned(),
            source,
        })
}

pub(crate) fn tokio() -> Result<tokio::runtime::Runtime, CliError> {
    callai_host::tokio_runtime(None)
        .map_err(|e| CliError::Usage(format!("cannot start tokio: {e}")))
}

/// What a `callai run` runs: its pack, input, script and node id, from the
/// arguments, the bundled example they name, or the run being resumed.
struct Plan {
    example: Option<&'static callai_examples::Example>,
    pack_path: PathBuf,
    input: String,
    /// The mock script and its text; none for a component file run with
    /// no script (the unscripted mock answers it).
    script_text: Option<String>,
    script: Option<MockScript>,
    node_id: String,
}

impl Plan {
    fn of(args: &RunArgs, config: &Config, rt: &tokio::runtime::Runtime) -> Result<Self, CliError> {
        let example = callai_examples::example(&args.pack);
        let pack_path = PathBuf::from(&args.pack);
        let looks_like_a_path =
            args.pack.contains(std::path::MAIN_SEPARATOR) || args.pack.ends_with(".wasm");
        if example.is_none() && !pack_path.exists() && !looks_like_a_path {
            let names: Vec<&str> = callai_examples::EXAMPLES.iter().map(|e| e.name).collect();
            return Err(CliError::NoSuchPack {
                name: args.pack.clone(),
                known: names.join(", "),
            });
        }
        // On resume, what the run was started with.
        let resumed = match &args.resume {
            Some(url) => Some(rt.block_on(stopped_run(
                url,
                args.run_id.as_deref().unwrap_or_default(),
                &config.runlog,
            ))?),
            None => None,
        };
        let spec = resumed.as_ref().and_then(|r| r.spec.clone());
        let input = input(args, spec.as_ref(), example)?;
        let script_text = match (&args.script, &spec, example) {
            (Some(s), _, _) => Some(read(s, "script")?),
            (
                None,
                Some(RunSpec {
                    script: Some(s), ..
                }),
                _,
            ) => Some(s.clone()),
            (None, _, Some(e)) => Some(e.default_script.to_owned()),
            (None, _, None) => None,
        };
        let mut script = script_text
            .as_deref()
            .map(MockScript::from_json)
            .transpose()?;
        if let (None, Some(run), Some(text)) = (&args.script, &resumed, &script_text) {
            // The script the run was started with, past what it already used.
            script = MockScript::resumed(Some(text), run).or(script);
        }
        let node_id = args.node_id.clone().unwrap_or_else(|| match example {
            Some(e) => e.node_id.to_owned(),
            None => pack_path
                .file_stem()
                .map_or_else(|| "node".into(), |s| s.to_string_lossy().into_owned()),
        });
        Ok(Self {
            example,
            pack_path,
            input,
            script_text,
            script,
            node_id,
        })
    }

    /// The pack's component.
    fn bytes(&self) -> Result<Vec<u8>, CliError> {
        match self.example {
            Some(e) => Ok(e.component().into_owned()),
            None => std::fs::read(&self.pack_path).map_err(|source| CliError::Read {
                what: "pack",
                path: self.pack_path.clone(),
                source,
            }),
        }
    }
}

/// The node's input: `--input`, `--input-file`, the resumed run's (which a
/// given one must equal), the example's, or `{}`.
fn input(
    args: &RunArgs,
    spec: Option<&RunSpec>,
    example: Option<&callai_examples::Example>,
) -> Result<String, CliError> {
    let given = match (&args.input, &args.input_file) {
        (Some(i), _) => Some(i.clone()),
        (None, Some(f)) => Some(read(f, "input")?),
        (None, None) => None,
    };
    if let (Some(given), Some(spec)) = (&given, spec)
        && given.trim() != spec.input.trim()
    {
        return Err(CliError::Usage(format!(
            "--input differs from the input run {:?} was started with; resume it with that input (or none)",
            args.run_id.as_deref().unwrap_or_default()
        )));
    }
    Ok(match (given, spec, example) {
        (Some(i), _, _) => i,
        (None, Some(s), _) => s.input.clone(),
        (None, None, Some(e)) => e.default_input.to_owned(),
        (None, None, None) => "{}".to_owned(),
    })
}

pub fn run(args: RunArgs) -> Result<ExitCode, CliError> {
    let config = load_config(args.config.as_deref())?;
    let rt = tokio()?;
    let plan = Plan::of(&args, &config, &rt)?;
    // Open the output files first: a bad path fails before the run, not after.
    let mut events_out = args.events.as_deref().map(create).transpose()?;
    let mut mock_log_out = args.mock_log.as_deref().map(create).transpose()?;

    let structured = config.host.mock.structured_output();
    let mock = match plan.script.clone() {
        Some(script) => MockProvider::new(script, structured),
        None => MockProvider::unscripted(structured),
    };
    let mock = Arc::new(mock.with_latency(config.host.mock.latency()));
    let runtime = runtime(&config)?;
    let host = host(&config)?.with_provider("mock", mock.clone());
    let bytes = plan.bytes()?;
    let spec = RunSpec {
        pack: args.pack.clone(),
        sha256: callai_host::sha256_hex(&bytes),
        input: plan.input.clone(),
        script: plan.script_text.clone(),
        tenant: None,
    };
    let journal = rt.block_on(journal(&args, &plan.node_id, &spec, &config.runlog))?;
    // A TypeScript or Python pack carries its language's engine: its first
    // compile takes seconds, later runs load it from the cache.
    let pack = crate::compile::load(&runtime, &args.pack, &bytes)?;

    let telemetry =
        callai_telemetry::Telemetry::from_config(&config.telemetry, |k| std::env::var(k).ok())
            .map_err(|e| CliError::Usage(e.to_string()))?;
    let trace = telemetry
        .as_ref()
        .map(|t| t.run(&plan.node_id, args.run_id.as_deref(), &args.pack));
    let events = callai_engine::events::EventLog::new();
    let options = RunOptions {
        journal,
        observer: trace.as_ref().map(|t| t.observer() as SharedObserver),
        events: Some(events.clone()),
        budget: None,
    };
    let mut logs = PackLogs::new(events, args.log);
    let output: RunOutput = rt.block_on(async {
        let run = pack.run_with(&host, &plan.node_id, &plan.input, options);
        tokio::pin!(run);
        // The pack's log lines as they come: the run's events are read
        // every tick (a run writes them from its own task).
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(50));
        loop {
            tokio::select! {
                output = &mut run => break output,
                _ = tick.tick() => logs.print_new(),
            }
        }
    });
    logs.print_new();
    if let (Some(telemetry), Some(trace)) = (&telemetry, &trace) {
        let error = output.result.as_ref().err().map(ToString::to_string);
        trace.end(error.as_deref().map_or(Ok(()), Err));
        // Spans go out before the process ends.
        telemetry.shutdown();
    }
    if let (Some(out), Some(path)) = (events_out.as_mut(), &args.events) {
        callai_engine::events::write_jsonl(&output.events, out).map_err(|source| {
            CliError::Write {
                path: path.clone(),
                source,
            }
        })?;
    }
    if let (Some(out), Some(path)) = (mock_log_out.as_mut(), &args.mock_log) {
        write_mock_log(&mock, out, path)?;
    }
    warn_of_unknown_fields(&output.events);
    match output.result {
        Ok(text) => {
            // Output that is not JSON is printed as a JSON string: escaped,
            // so a pack cannot send control sequences to the terminal.
            let value = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
            print(&(serde_json::to_string_pretty(&value).expect("JSON") + "\n"))?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("{}", e.to_json());
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The mock's requests, a JSON object a line (`--mock-log`).
fn write_mock_log(
    mock: &MockProvider,
    out: &mut BufWriter<File>,
    path: &Path,
) -> Result<(), CliError> {
    let written = mock.log().iter().try_for_each(|entry| {
        serde_json::to_writer(&mut *out, entry)?;
        out.write_all(b"\n")
    });
    written
        .and_then(|()| out.flush())
        .map_err(|source| CliError::Write {
            path: path.to_owned(),
            source,
        })
}

/// A warning on stderr for each field of a request the host ignored, not
/// knowing it (`[policy] unknownRequestFields = "warn"`): a line on a
/// terminal, a JSON object a line for a program.
fn warn_of_unknown_fields(events: &[callai_engine::Event]) {
    let terminal = std::io::stderr().is_terminal();
    for event in events {
        if let callai_engine::Event::UnknownRequestFields { fields, .. } = event {
            for field in fields {
                if terminal {
                    eprintln!("warning: {field}; it was ignored");
                } else {
                    let warning = serde_json::json!({"warning": {"kind": "unknown_request_field",
                        "field": field.name, "didYouMean": field.did_you_mean,
                        "message": format!("{field}; it was ignored")}});
                    eprintln!("{warning}");
                }
            }
        }
    }
}

/// `--record` / `--replay` / `--resume`: the run log and what to do with it.
async fn journal(
    args: &RunArgs,
    node_id: &str,
    spec: &RunSpec,
    limits: &RunLogConfig,
) -> Result<Journal, CliError> {
    let run_id = args.run_id.as_deref().unwrap_or_default();
    match (&args.record, &args.replay, &args.resume) {
        (Some(url), _, _) => {
            let log = callai_config::open_runlog(url, OpenLog::CreateIfMissing, limits).await?;
            let existing = match args.overwrite {
                true => ExistingRun::Overwrite,
                false => ExistingRun::Refuse,
            };
            let recording = Recording {
                existing,
                spec: Some(spec),
                lease: None,
            };
            Journal::record(log, run_id, node_id, recording)
                .await
                .map_err(CliError::from)
        }
        (None, Some(url), _) => {
            let log = callai_config::open_runlog(url, OpenLog::Existing, limits).await?;
            Journal::replay(&*log, run_id).await.map_err(CliError::from)
        }
        (None, None, Some(url)) => {
            let log = callai_config::open_runlog(url, OpenLog::Existing, limits).await?;
            Journal::resume(log, run_id, None)
                .await
                .map_err(CliError::from)
        }
        (None, None, None) => Ok(Journal::live()),
    }
}

/// The run `--resume` names, as far as it was committed; a finished one is
/// refused here, before anything runs.
async fn stopped_run(
    url: &str,
    run_id: &str,
    limits: &RunLogConfig,
) -> Result<RecordedRun, CliError> {
    let log = callai_config::open_runlog(url, OpenLog::Existing, limits).await?;
    let run = log.load(run_id.into()).await?;
    match run.status {
        RunStatus::Running => Ok(run),
        done => Err(RunLogError::Finished(run_id.into(), done.as_str()).into()),
    }
}

/// `callai facet`.
pub fn facet(config: Option<&Path>) -> Result<ExitCode, CliError> {
    let host = host(&load_config(config)?)?;
    let doc = facet::document(&host);
    print(&(serde_json::to_string_pretty(&doc).expect("JSON") + "\n"))?;
    Ok(ExitCode::SUCCESS)
}

/// `callai conformance`.
pub fn conformance(json: bool, config: Option<&Path>, fixture: &str) -> Result<ExitCode, CliError> {
    let config = load_config(config)?;
    let host = host(&config)?;
    let found = callai_examples::example(fixture)
        .filter(|e| e.node_id == callai_conformance::NODE_ID)
        .ok_or_else(|| {
            CliError::Usage(format!(
                "{fixture:?} is not a bundled conformance fixture ({} is)",
                callai_conformance::NODE_ID
            ))
        })?;
    let fixture = found;
    // The config's limits and the compiled-component cache, as `callai run`
    // has them: a TypeScript or Python fixture compiles once, not per run.
    let runtime = runtime(&config)?;
    let pack = runtime
        .load(&fixture.component())
        .map_err(|source| CliError::Load {
            name: fixture.name.into(),
            source,
        })?;
    let target = callai_conformance::HostTarget::new(pack, host)
        .map_err(|e| CliError::Usage(format!("cannot start tokio: {e}")))?;
    let report = callai_conformance::run(&target);
    if json {
        print(&(serde_json::to_string_pretty(&report.to_json()).expect("JSON") + "\n"))?;
    } else {
        print(&report.table())?;
    }
    Ok(if report.failed() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The wasmtime runtime for `config`'s limits, with the compiled-component
/// cache of [`runtime_options`].
pub(crate) fn runtime(config: &Config) -> Result<PackRuntime, CliError> {
    PackRuntime::with_options(&runtime_options(config))
        .map_err(|e| CliError::Usage(format!("cannot start wasmtime: {e:#}")))
}

/// The runtime options for `config`'s limits, with the compiled-component
/// cache in `$CALLAI_CACHE_DIR`, else `$XDG_CACHE_HOME/callai`, else
/// `~/.cache/callai` (none when no home is known).
pub(crate) fn runtime_options(config: &Config) -> RuntimeOptions {
    let mut options = RuntimeOptions::from_limits(&config.host.limits);
    options.cache_max_bytes = config.cache.max_bytes;
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let dir = env("CALLAI_CACHE_DIR")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("callai")))
        .or_else(|| env("HOME").map(|d| d.join(".cache/callai")));
    if let Some(dir) = dir {
        options = options.cache_dir(dir.join("components"));
    }
    options
}
