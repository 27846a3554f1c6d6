//! `maxConnections` against the process's file limit: each connection is a
//! descriptor, and a server whose connections take every descriptor cannot
//! open its run log, its packs or its next compile. At start-up the soft
//! limit is raised to the hard one (as nginx's `worker_rlimit_nofile`
//! does), and connections are held to the limit less a reserve.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Descriptors kept for everything but connections: the listener, the run
/// log (SQLite's file, WAL and shm; PostgreSQL's pool), packs, the cache,
/// the runtime's own.
pub const RESERVE: u64 = 128;

/// How many connections fit under a file limit of `limit` (none: no
/// limit), at most `wanted`.
pub fn connections_within(limit: Option<u64>, wanted: usize) -> usize {
    match limit {
        None => wanted,
        Some(limit) => {
            let room = usize::try_from(limit.saturating_sub(RESERVE)).unwrap_or(usize::MAX);
            wanted.min(room.max(1))
        }
    }
}

/// Raises the soft file limit to the hard one where it is lower, and
/// returns how many of `wanted` connections fit under it, saying so on
/// stderr when fewer than `wanted` do.
pub fn fit(wanted: usize) -> usize {
    let Rlimit { current, maximum } = getrlimit(Resource::Nofile);
    let mut soft = current;
    if current < maximum || (current.is_some() && maximum.is_none()) {
        let raised = Rlimit {
            current: maximum,
            maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            soft = maximum;
        }
    }
    let fits = connections_within(soft, wanted);
    if fits < wanted {
        eprintln!(
            "callai serve: server.maxConnections = {wanted} does not fit the file limit ({}); \
             holding {fits} connections (raise `ulimit -n` for more)",
            soft.map_or("none".into(), |s| s.to_string())
        );
    }
    fits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_leave_the_reserve_to_the_rest() {
        assert_eq!(connections_within(None, 4096), 4096);
        assert_eq!(connections_within(Some(20_000), 4096), 4096);
        assert_eq!(
            connections_within(Some(1024), 4096),
            1024 - RESERVE as usize
        );
        assert_eq!(connections_within(Some(256), 300), 128);
        assert_eq!(connections_within(Some(10), 300), 1, "one, however low");
    }
}
