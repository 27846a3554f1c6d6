//! Room for a new connection at `maxConnections`. Every open connection is
//! listed with its activity; when a new one arrives and no place is free,
//! the connection idle the longest (no request of its client in hand: a
//! keep-alive connection between requests, or one that has sent nothing
//! yet) is asked to close, as nginx reuses its keep-alive connections when
//! it runs out. So idle connections, however many, cannot lock a client
//! with a request out; connections in the middle of a request are never
//! closed for room, and past them new connections wait in the backlog.

use super::activity::Activity;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The open connections.
#[derive(Debug, Default)]
pub struct OpenConnections {
    next_id: AtomicU64,
    by_id: Mutex<HashMap<u64, Arc<Activity>>>,
}

impl OpenConnections {
    /// Lists a connection until the returned guard is dropped.
    pub fn register(self: &Arc<Self>, activity: Arc<Activity>) -> Listed {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, activity);
        Listed {
            open: self.clone(),
            id,
        }
    }

    /// Asks the connection idle the longest to close; false when none is
    /// idle.
    pub fn evict_longest_idle(&self) -> bool {
        let by_id = self.lock();
        let mut idle: Vec<_> = by_id
            .values()
            .filter_map(|a| a.idle_since().map(|since| (since, a)))
            .collect();
        idle.sort_unstable_by_key(|(since, _)| *since);
        // One that began a request since it was looked at is passed over.
        idle.into_iter().any(|(_, activity)| activity.evict())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Activity>>> {
        self.by_id.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A connection's place in [`OpenConnections`], given up on drop.
#[derive(Debug)]
pub struct Listed {
    open: Arc<OpenConnections>,
    id: u64,
}

impl Drop for Listed {
    fn drop(&mut self) {
        self.open.lock().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_idle_longest_is_asked_to_close_and_a_busy_one_never() {
        let open = Arc::new(OpenConnections::default());
        let (oldest, newer, busy) = (Activity::new(), Activity::new(), Activity::new());
        let _listed = [open.register(oldest.clone()), open.register(busy.clone())];
        std::thread::sleep(std::time::Duration::from_millis(5));
        let _newer = open.register(newer.clone());
        let _request = busy.begin_request();
        assert!(open.evict_longest_idle());
        assert_eq!(
            (oldest.idle_since(), newer.idle_since().is_some()),
            (None, true),
            "the oldest idle one was asked, the newer not yet"
        );
        assert!(open.evict_longest_idle());
        assert!(newer.idle_since().is_none());
        assert!(!open.evict_longest_idle(), "only a busy one is left");
        assert!(busy.idle_since().is_none());
    }

    #[test]
    fn a_connection_leaves_the_list_when_it_ends() {
        let open = Arc::new(OpenConnections::default());
        let listed = open.register(Activity::new());
        assert_eq!(open.lock().len(), 1);
        drop(listed);
        assert!(open.lock().is_empty());
        assert!(!open.evict_longest_idle());
    }
}
