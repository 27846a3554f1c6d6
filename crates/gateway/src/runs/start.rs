//! A run from `POST /v1/runs` started: its pack found and compiled,
//! admitted (or turned away), journaled when a run log is set (leased and
//! its pack kept in the log when durable), then handed to its task; and
//! answered when it ends, or at once when its caller does not wait.

use super::entry::RunEntry;
use super::views::{Accepted, RunAnswer, StatusWord, inspected_answer};
use super::work::Work;
use crate::error::GatewayError;
use crate::ids::new_run_id;
use crate::packs::PackSource;
use crate::state::Gateway;
use crate::tenants::Caller;
use callai_engine::runlog::{Fence, Lease, RunSpec};
use callai_engine::{Journal, MockScript, Recording, RunLogError};
use std::sync::Arc;

/// A run to start, as its caller asked for it (`POST /v1/runs`, checked).
#[derive(Debug, Clone, PartialEq)]
pub struct RunRequest {
    /// The pack's name.
    pub pack: String,
    /// The node's input, as JSON text.
    pub input: String,
    /// The run id to use; one is made up when absent.
    pub run_id: Option<String>,
    /// Record call by call under a lease, for another host to take over.
    pub durable: bool,
    /// Answer when the run ends (the default), or at once.
    pub wait: bool,
    /// A mock script for this run alone, and its JSON text.
    pub script: Option<(MockScript, String)>,
    /// Return the run's events in the answer.
    pub events: bool,
    /// The W3C `traceparent` the caller sent: the run's spans go under it.
    pub trace_parent: Option<String>,
}

/// How a started run is answered.
#[derive(Debug)]
pub enum Started {
    /// It ran to its end (here, or on another host that took it over).
    Ended(RunAnswer),
    /// Its caller does not wait: it is running.
    Accepted(Accepted),
}

/// Starts the run `request` asks for; answers when it ends, or at once
/// when the caller does not wait.
pub async fn start(
    state: Arc<Gateway>,
    caller: Caller,
    request: RunRequest,
) -> Result<Started, GatewayError> {
    let info = state
        .packs
        .get(caller.name(), &request.pack)
        .ok_or_else(|| {
            GatewayError::not_found(format!("no pack {:?} on this host", request.pack))
        })?;
    if request.durable && state.runlog.is_none() {
        return Err(GatewayError::invalid(
            "durable",
            "a durable run needs a run log ([runlog] url or --runlog)",
        ));
    }
    if request.script.is_some() && !caller.0.host.config().provider_allowed("mock") {
        return Err(GatewayError::invalid(
            "script",
            "the mock provider is not allowed by this host's policy",
        ));
    }
    let kept_input = kept_input(&request, state.runlog_config.keep_text)?;
    // Compile first (once per component): a pack that is no longer readable
    // fails here, before any slot is taken.
    let pack = state.packs.pack(&info).await?;
    let ticket = state.admission.admit()?;
    let run_id = request.run_id.clone().unwrap_or_else(new_run_id);
    let entry = Arc::new(
        RunEntry::new(
            caller.name().to_owned(),
            run_id.clone(),
            info.name.clone(),
            info.node_id.clone(),
        )
        .under(request.trace_parent.clone()),
    );
    state.runs.insert(entry.clone())?;
    let script_text = match &request.script {
        Some((_, text)) => Some(text.clone()),
        None => info.default_script.clone(),
    };
    let spec = RunSpec {
        pack: info.name.clone(),
        sha256: info.sha256.clone(),
        input: kept_input,
        script: script_text.clone(),
        tenant: None,
    };
    let begun = begin(&state, &entry, &spec, request.durable, &info.source).await;
    let (journal, lease) = match begun {
        Ok(begun) => begun,
        Err(e) => {
            state.runs.remove(&entry);
            return Err(e);
        }
    };
    let script = script_text.and_then(|s| MockScript::from_json(&s).ok());
    let work = Work {
        state: state.clone(),
        entry: entry.clone(),
        caller,
        pack,
        input: request.input.clone(),
        script,
        lease,
    };
    state.tasks.spawn(work.run(ticket, journal));
    if !request.wait {
        return Ok(Started::Accepted(Accepted {
            run_id,
            status: StatusWord::Running,
        }));
    }
    entry.wait().await;
    if entry.is_handed_on()
        && let Ok(run) = state.load(entry.key()).await
    {
        // Another host has the run now: say where the log has it.
        let mut answer = inspected_answer(&run);
        if request.events {
            answer.events = Some(run.run.events);
        }
        return Ok(Started::Ended(answer));
    }
    let mut answer = entry.answer();
    if request.events {
        answer.events = Some(entry.events.snapshot());
    }
    Ok(Started::Ended(answer))
}

/// The input as the run log keeps it: without the bytes of an image (each
/// `data:` URL as its media type, SHA-256 and length) unless `[runlog]
/// keepText` (`keep_text`). A durable run is resumed from its input, so one
/// whose input holds image bytes the log would not keep is refused.
fn kept_input(request: &RunRequest, keep_text: bool) -> Result<String, GatewayError> {
    if keep_text || !request.input.contains("data:") {
        return Ok(request.input.clone());
    }
    let Ok(mut input) = serde_json::from_str::<serde_json::Value>(&request.input) else {
        return Ok(request.input.clone());
    };
    if !callai_engine::images::data_urls_digested(&mut input) {
        return Ok(request.input.clone());
    }
    if request.durable {
        return Err(GatewayError::invalid(
            "durable",
            "the input holds an inline image (a data: URL), and this host keeps no image bytes \
             ([runlog] keepText is off), so the run could not be resumed from its log: send the \
             image by URL, or set [runlog] keepText = true",
        ));
    }
    Ok(input.to_string())
}

/// The run's journal: recording into the run log when there is one (with
/// what it was started with, so that it can be resumed; leased and its
/// pack kept in the log when durable). A run id its tenant holds in the log
/// is a conflict; another tenant's run of the same id is another run.
async fn begin(
    state: &Gateway,
    entry: &RunEntry,
    spec: &RunSpec,
    durable: bool,
    source: &PackSource,
) -> Result<(Journal, Option<Fence>), GatewayError> {
    let Some(log) = &state.runlog else {
        return Ok((Journal::live(), None));
    };
    let internal = |e: RunLogError| GatewayError::internal(e.to_string());
    if durable {
        let bytes = source.bytes().map_err(GatewayError::internal)?;
        log.put_pack(&spec.sha256, &bytes).await.map_err(internal)?;
    }
    let lease = durable.then(|| Lease {
        owner: &state.lease_owner,
        duration: state.runlog_config.lease(),
    });
    let recording = Recording {
        spec: Some(spec),
        lease,
        ..Recording::default()
    };
    let journal = Journal::record(log.clone(), entry.key(), &entry.node_id, recording)
        .await
        .map_err(|e| match e {
            RunLogError::RunExists(id) => {
                GatewayError::conflict(format!("run {id:?} is already in the run log"))
            }
            e => internal(e),
        })?;
    let fence = if durable { journal.fence() } else { None };
    Ok((journal, fence))
}
