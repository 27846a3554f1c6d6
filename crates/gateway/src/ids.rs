//! The ids the gateway makes (a call's, `call_…`, `chatcmpl-…`, `msg_…`; a
//! run's nobody chose; this host's own in the leases it holds), the ids a
//! caller may choose, and the RFC 3339 time every answer writes.

/// A fresh call id: `prefix` and 16 hex digits, unguessable (the run log's
/// source of fresh ids).
pub fn fresh_id(prefix: &str) -> String {
    let seed = callai_engine::runlog::fresh_id();
    format!("{prefix}{seed:016x}")
}

/// A run id nobody chose: `run-` and 128 random bits.
pub fn new_run_id() -> String {
    let (a, b) = (
        callai_engine::runlog::RunSeed::fresh().seed,
        callai_engine::runlog::RunSeed::fresh().seed,
    );
    format!("run-{a:016x}{b:016x}")
}

/// This host's name in leases: the machine's, the process id, and a
/// random part (a restarted process is another host).
pub fn lease_owner() -> String {
    let machine = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "host".into());
    let nonce = callai_engine::runlog::RunSeed::fresh().seed as u32;
    format!("{machine}-{}-{nonce:08x}", std::process::id())
}

/// Whether `id` may name a node: 1 to 256 characters, none of them a
/// control character (a NUL is refused by PostgreSQL's text, and no id
/// needs one).
pub fn valid_node_id(id: &str) -> bool {
    (1..=256).contains(&id.chars().count()) && !id.chars().any(char::is_control)
}

/// What a refused node id is told.
pub const NODE_ID_RULE: &str = "must be 1 to 256 characters, none of them a control character";

/// Whether `id` may name a run: 1 to 128 of `A-Z a-z 0-9 . _ : -`.
pub fn valid_run_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
}

/// `ms` since the Unix epoch as `2026-11-30T15:03:12.345Z`.
pub fn rfc3339(ms: u64) -> String {
    // Past jiff's range (year 9999) only for a clock gone wrong; saturate.
    let ts = i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .unwrap_or(jiff::Timestamp::MAX);
    // jiff's RFC 3339 printer, three digits of fraction always: the same
    // text as strftime's `%Y-%m-%dT%H:%M:%S%.3fZ` with no format to parse
    // (the access log writes one a request).
    format!("{ts:.3}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(1_796_051_592_345), "2026-11-30T15:13:12.345Z");
        // A clock past jiff's range saturates, printed as strftime would.
        let max = jiff::Timestamp::MAX.strftime("%Y-%m-%dT%H:%M:%S%.3fZ");
        assert_eq!(rfc3339(u64::MAX), max.to_string());
    }

    #[test]
    fn ids_are_their_prefix_and_hex() {
        let id = fresh_id("call_");
        assert_eq!(id.len(), 21, "{id}");
        assert!(id[5..].bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        let run = new_run_id();
        assert!(run.starts_with("run-") && run.len() == 36, "{run}");
        assert_ne!(new_run_id(), run);
    }
}
