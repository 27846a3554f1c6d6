//! The ids the gateway makes (a call's, `call_…`, `chatcmpl-…`, `msg_…`; a
//! run's nobody chose; this host's own in the leases it holds), the ids a
//! caller may choose, and the RFC 3339 time every answer writes.

/// A fresh call id: `prefix` and 16 hex digits, unguessable (the run log's
/// source of fresh ids).
pub fn fresh_id(prefix: &str) -> String {
    id_of(prefix, callai_engine::runlog::fresh_id())
}

/// `prefix` and `seed` in 16 hex digits.
fn id_of(prefix: &str, seed: u64) -> String {
    // Written into one string of its length, with no format to interpret
    // (every call makes one): `{seed:016x}`'s digits.
    let mut digits = [0u8; 16];
    hex::encode_to_slice(seed.to_be_bytes(), &mut digits).expect("16 digits for 8 bytes");
    let mut id = String::with_capacity(prefix.len() + digits.len());
    id.push_str(prefix);
    id.push_str(std::str::from_utf8(&digits).expect("hex digits are ASCII"));
    id
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
    let mut text = String::with_capacity(RFC3339_BYTES);
    push_rfc3339(&mut text, ms);
    text
}

/// The length of [`rfc3339`]'s text for any time from 1970 to 9999.
const RFC3339_BYTES: usize = 24;

thread_local! {
    /// The second this thread last wrote and its text up to the fraction
    /// (`2026-11-30T15:03:12.`): the access log writes one time a request,
    /// most of them in a second already written.
    static LAST_SECOND: std::cell::Cell<Option<(u64, [u8; 20])>> =
        const { std::cell::Cell::new(None) };
}

/// Appends [`rfc3339`]'s text for `ms` to `out`.
pub fn push_rfc3339(out: &mut String, ms: u64) {
    let (second, milli) = (ms / 1000, ms % 1000);
    let in_range = i64::try_from(ms).is_ok_and(|ms| jiff::Timestamp::from_millisecond(ms).is_ok());
    let cached = in_range.then(|| {
        LAST_SECOND.with(|last| match last.get() {
            Some((at, text)) if at == second => Some(text),
            _ => {
                let text = second_text(second)?;
                last.set(Some((second, text)));
                Some(text)
            }
        })
    });
    let Some(text) = cached.flatten() else {
        // Past jiff's range (year 9999) only for a clock gone wrong:
        // saturate, in jiff's RFC 3339 printer, three digits of fraction.
        use std::fmt::Write;
        let _ = write!(out, "{:.3}", jiff::Timestamp::MAX);
        return;
    };
    out.push_str(std::str::from_utf8(&text).expect("an RFC 3339 time is ASCII"));
    let digits = [milli / 100, milli / 10 % 10, milli % 10].map(|d| char::from(b'0' + d as u8));
    out.extend(digits);
    out.push('Z');
}

/// `second`'s text up to its fraction, `2026-11-30T15:03:12.` (jiff's RFC
/// 3339 printer), when jiff can name it and it is 20 bytes (years 1970 to
/// 9999).
fn second_text(second: u64) -> Option<[u8; 20]> {
    let ts = jiff::Timestamp::from_second(i64::try_from(second).ok()?).ok()?;
    let whole = format!("{ts:.0}");
    let mut text = [b'.'; 20];
    text[..19].copy_from_slice(whole.as_bytes().get(..19)?);
    Some(text)
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
    fn a_time_in_a_second_already_written_is_written_as_jiff_would() {
        let jiff = |ms: u64| {
            let ts = jiff::Timestamp::from_millisecond(ms as i64).unwrap();
            ts.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
        };
        // Each second twice or more and in and out of order, so that the
        // thread's cache is both used and replaced; the ends of the range.
        let mut times = vec![0, 999, 1_000, 59_999, 60_000, 253_402_207_200_000];
        for second in [
            1_796_051_592u64,
            1_796_051_593,
            1_796_051_592,
            4_102_444_799,
        ] {
            times.extend([0, 1, 9, 10, 99, 100, 345, 999].map(|m| second * 1000 + m));
        }
        let mut text = String::new();
        for ms in times {
            assert_eq!(rfc3339(ms), jiff(ms), "{ms}");
            text.clear();
            push_rfc3339(&mut text, ms);
            assert_eq!(text, jiff(ms), "{ms}");
        }
        // Past the range, what jiff's printer says of its last instant.
        let max = format!("{:.3}", jiff::Timestamp::MAX);
        for ms in [253_402_207_200_001, u64::MAX] {
            assert_eq!(rfc3339(ms), max, "{ms}");
        }
    }

    #[test]
    fn ids_are_their_prefix_and_hex() {
        let ids: std::collections::HashSet<String> = (0..64).map(|_| fresh_id("x")).collect();
        assert_eq!(ids.len(), 64, "fresh ids repeat");
        for seed in [0, 1, 0xab, 0x0123_4567_89ab_cdef, u64::MAX] {
            assert_eq!(id_of("call_", seed), format!("call_{seed:016x}"));
        }
        let id = fresh_id("call_");
        assert_eq!(id.len(), 21, "{id}");
        assert!(id[5..].bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        let run = new_run_id();
        assert!(run.starts_with("run-") && run.len() == 36, "{run}");
        assert_ne!(new_run_id(), run);
    }
}
