//! What the peer benchmark's tools share: reading their arguments, the
//! process's CPU time, memory and page faults, and latency percentiles.

use std::collections::HashMap;
use std::time::Duration;

pub mod tls;

/// `--key value` pairs; a bare `--flag` maps to `"true"`.
pub fn args() -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut args = std::env::args().skip(1).peekable();
    while let Some(a) = args.next() {
        if let Some(key) = a.strip_prefix("--") {
            let value = match args.peek() {
                Some(v) if !v.starts_with("--") => args.next().unwrap_or_default(),
                _ => "true".to_owned(),
            };
            out.insert(key.to_owned(), value);
        }
    }
    out
}

/// The argument `key`, parsed, or `default`.
pub fn arg<T: std::str::FromStr>(args: &HashMap<String, String>, key: &str, default: T) -> T {
    args.get(key)
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("--{key} {v:?} does not parse"))
        })
        .unwrap_or(default)
}

/// CPU time every live thread of process `pid` (`self` for this one) has
/// spent, from `/proc/PID/task/*/schedstat` (nanoseconds, unlike the
/// 10 ms ticks of `/proc/PID/stat`).
pub fn cpu_time(pid: &str) -> Duration {
    let mut total = 0u64;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let text = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
            total += text
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Duration::from_nanos(total)
}

/// This process's minor page faults so far (`/proc/self/stat` field 10):
/// each first touch of a page the kernel must fill, a fresh pool slot's
/// pages among them.
pub fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    // After the name: state is field 3, so minflt (field 10) is the 8th.
    after_name
        .split_whitespace()
        .nth(7)
        .and_then(|f| f.parse().ok())
        .unwrap_or(0)
}

/// A field of `/proc/PID/status` in KiB (`VmRSS`, `VmHWM`).
pub fn status_kib(pid: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The `p`-th percentile (0..=100) of `sorted`, in ms.
pub fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

/// The structured request every contender sends: one JSON object with a
/// `scene` string.
pub fn structured_request() -> serde_json::Value {
    serde_json::json!({
        "messages": [{"role": "user", "content": "Write one sentence of a scene."}],
        "maxTokens": 200,
        "responseSchema": {
            "type": "object",
            "properties": {"scene": {"type": "string"}},
            "required": ["scene"]
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_ranks() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile_ms(&v, 50.0), 51.0);
        assert_eq!(percentile_ms(&v, 99.0), 99.0);
        assert_eq!(percentile_ms(&[], 50.0), 0.0);
    }

    #[test]
    fn this_process_has_spent_some_cpu() {
        assert!(cpu_time("self") > Duration::ZERO);
        assert!(status_kib("self", "VmRSS") > 0);
        assert!(minor_faults() > 0);
    }
}
