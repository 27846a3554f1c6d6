//! `callai run --log LEVEL`: the lines a pack logs (`pack.log` events),
//! shown on stderr as the run goes, at `info` and above by default.

use callai_engine::Event;
use callai_engine::events::EventLog;
use std::io::IsTerminal;

/// The least severe pack log line shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum LogLevel {
    /// Every line.
    Debug,
    /// `info`, `warn` and `error` (the default).
    Info,
    /// `warn` and `error`.
    Warn,
    /// `error` only.
    Error,
    /// None.
    Off,
}

impl LogLevel {
    /// The level of a `pack.log` event's `level` (`debug|info|warn|error`).
    fn of(level: &str) -> Self {
        match level {
            "debug" => Self::Debug,
            "warn" => Self::Warn,
            "error" => Self::Error,
            _ => Self::Info,
        }
    }
}

/// Prints the pack log lines of a run's events at `least` and above, each
/// once, as they arrive.
pub struct PackLogs {
    events: EventLog,
    least: LogLevel,
    seen: usize,
    terminal: bool,
}

impl PackLogs {
    /// Watches `events` (the log the run writes into).
    pub fn new(events: EventLog, least: LogLevel) -> Self {
        Self {
            events,
            least,
            seen: 0,
            terminal: std::io::stderr().is_terminal(),
        }
    }

    /// Prints what arrived since the last time.
    pub fn print_new(&mut self) {
        if self.least == LogLevel::Off {
            return;
        }
        let new = self.events.since(self.seen);
        self.seen += new.len();
        for event in new {
            if let Some(line) = self.line(&event) {
                eprintln!("{line}");
            }
        }
    }

    /// The line of a `pack.log` event worth showing: on a terminal,
    /// `[level node] text` with control characters escaped (a pack cannot
    /// drive the terminal); for a program, a JSON object.
    fn line(&self, event: &Event) -> Option<String> {
        let Event::PackLog {
            node_id,
            level,
            message,
        } = event
        else {
            return None;
        };
        if LogLevel::of(level) < self.least {
            return None;
        }
        Some(if self.terminal {
            let text: String = message
                .chars()
                .flat_map(|c| {
                    let escaped: Vec<char> = match c.is_control() && c != '\t' {
                        true => c.escape_default().collect(),
                        false => vec![c],
                    };
                    escaped
                })
                .collect();
            format!("[{level:<5} {node_id}] {text}")
        } else {
            serde_json::json!({"log": {"level": level, "nodeId": node_id, "message": message}})
                .to_string()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use callai_engine::events::EventSink;

    fn logged(level: &str, message: &str) -> Event {
        Event::PackLog {
            node_id: "n".into(),
            level: level.into(),
            message: message.into(),
        }
    }

    #[test]
    fn lines_below_the_level_and_other_events_are_not_shown() {
        let events = EventLog::new();
        let mut logs = PackLogs::new(events.clone(), LogLevel::Info);
        logs.terminal = true;
        assert_eq!(logs.line(&logged("debug", "d")), None);
        assert_eq!(
            logs.line(&logged("info", "i")).as_deref(),
            Some("[info  n] i")
        );
        assert_eq!(
            logs.line(&logged("warn", "\u{1b}[2Jred")).as_deref(),
            Some("[warn  n] \\u{1b}[2Jred")
        );
        logs.terminal = false;
        let json: serde_json::Value =
            serde_json::from_str(&logs.line(&logged("error", "e")).unwrap()).unwrap();
        assert_eq!(json["log"]["level"], "error");
        events.emit(logged("info", "once"));
        logs.print_new();
        assert_eq!(logs.seen, 1);
        logs.print_new();
        assert_eq!(logs.seen, 1, "each line once");
    }
}
