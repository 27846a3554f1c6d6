//! The run's limits as its session keeps them: calls per run, a request's
//! size, and what the pack may log.

use super::{CallInput, RunError, RunSession};
use crate::events::{Event, EventSink};

/// What a run has logged, against `limits.maxLogBytes` and `maxLogLines`.
#[derive(Debug, Default)]
pub(super) struct LogBudget {
    pub(super) lines: u64,
    pub(super) bytes: u64,
    pub(super) dropped_lines: u64,
    pub(super) dropped_bytes: u64,
}

impl RunSession {
    /// Records a line the pack logged, within the run's log limits: past
    /// `limits.maxLogLines` or `maxLogBytes` a line is counted and dropped
    /// (one `pack.log.dropped` event says how many at the end), and the line
    /// that crosses the byte limit is cut to fit.
    pub fn log(&mut self, level: &str, mut message: String) {
        let limits = self.host.config().limits;
        let room = limits.max_log_bytes.saturating_sub(self.log.bytes);
        if self.log.lines >= u64::from(limits.max_log_lines) || room == 0 {
            self.log.dropped_lines += 1;
            self.log.dropped_bytes += message.len() as u64;
            return;
        }
        if message.len() as u64 > room {
            let cut = (0..=room as usize)
                .rev()
                .find(|&i| message.is_char_boundary(i))
                .unwrap_or(0);
            self.log.dropped_bytes += (message.len() - cut) as u64;
            message.truncate(cut);
        }
        self.log.lines += 1;
        self.log.bytes += message.len() as u64;
        self.events.emit(Event::PackLog {
            node_id: self.node_id.clone(),
            level: level.into(),
            message,
        });
    }

    /// Counts the next call against `limits.maxCallsPerRun` and its
    /// request against `limits.maxRequestBytes`: its index, or the limit
    /// that stops the run.
    pub(super) fn count_call(&mut self, input: &CallInput) -> Result<u32, RunError> {
        let index = self.calls;
        self.calls += 1;
        let limits = self.host.config().limits;
        if self.calls > limits.max_calls_per_run {
            let message = format!(
                "call {} is over the limit of {} calls per run",
                self.calls, limits.max_calls_per_run
            );
            return Err(self.stop(RunError::Limit {
                key: "limits.maxCallsPerRun",
                message,
            }));
        }
        let size = input.size();
        if size > limits.max_request_bytes {
            let message = format!(
                "a request of {size} bytes is over the limit of {}",
                limits.max_request_bytes
            );
            return Err(self.stop(RunError::Limit {
                key: "limits.maxRequestBytes",
                message,
            }));
        }
        Ok(index)
    }
}
