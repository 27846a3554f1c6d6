//! `callai runlog prune`: deletes the finished runs of a run log that ended
//! before a date, as `serve` does on its own every hour under
//! `[runlog] keepDays`.

use crate::args::RunlogCommand;
use crate::error::CliError;
use callai_config::OpenLog;
use callai_engine::events::now_ms;
use std::process::ExitCode;

/// Runs a `callai runlog` command.
pub fn runlog(command: RunlogCommand) -> Result<ExitCode, CliError> {
    let RunlogCommand::Prune {
        config,
        runlog,
        before,
    } = command;
    let config = crate::run::load_config(config.as_deref())?;
    let url = runlog.unwrap_or_else(|| config.runlog.url.clone());
    if url.is_empty() {
        return Err(CliError::Usage(
            "callai runlog prune: name the run log with --runlog or [runlog] url".into(),
        ));
    }
    let before_ms = match before.as_deref() {
        Some(text) => parse_before(text).map_err(CliError::Usage)?,
        None => config.runlog.prune_before(now_ms()).ok_or_else(|| {
            CliError::Usage(
                "callai runlog prune: [runlog] keepDays is 0 (keep every run); give --before DATE"
                    .into(),
            )
        })?,
    };
    let rt = crate::run::tokio()?;
    let pruned = rt.block_on(async {
        let log = callai_config::open_runlog(&url, OpenLog::Existing, &config.runlog).await?;
        log.prune(before_ms).await
    })?;
    let when = jiff::Timestamp::from_millisecond(before_ms as i64)
        .map_or_else(|_| before_ms.to_string(), |t| t.to_string());
    crate::error::print(&format!(
        "pruned {} finished runs that ended before {when}, {} schemas no call names, {} call traces \
         and {} stored responses\n",
        pruned.runs, pruned.schemas, pruned.traces, pruned.responses
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// `--before`: a date (midnight UTC) or an RFC 3339 time, in ms since the
/// Unix epoch.
fn parse_before(text: &str) -> Result<u64, String> {
    let at = match text.parse::<jiff::Timestamp>() {
        Ok(t) => t,
        Err(_) => text
            .parse::<jiff::civil::Date>()
            .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC))
            .map(|z| z.timestamp())
            .map_err(|_| {
                format!(
                    "--before {text:?} is neither a date (2026-11-01) nor an RFC 3339 time (2026-11-01T12:00:00Z)"
                )
            })?,
    };
    u64::try_from(at.as_millisecond()).map_err(|_| format!("--before {text:?} is before 1970"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_date_is_midnight_utc_and_a_time_is_itself() {
        assert_eq!(parse_before("1970-01-02").unwrap(), 86_400_000);
        assert_eq!(parse_before("1970-01-01T00:00:01Z").unwrap(), 1000);
        let bad = parse_before("yesterday").unwrap_err();
        assert!(bad.contains("yesterday"), "{bad}");
    }
}
