//! The background work of a serving host: durable runs whose host died
//! taken over, the run log pruned, the API keys of the run log kept fresh.

use super::retention::prune_periodically;
use super::takeover::take_over;
use crate::state::Gateway;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// The least time between two reads of the keys that unknown keys asked
/// for: a client sending made-up keys costs at most this many reads.
const UNKNOWN_GAP: Duration = Duration::from_millis(100);

/// The background work, going on until [`Background::stop`].
#[derive(Debug)]
pub struct Background {
    takeover: JoinHandle<()>,
    pruning: JoinHandle<()>,
    keys: JoinHandle<()>,
}

impl Background {
    /// Starts it for `gateway`, on the current tokio runtime.
    pub fn start(gateway: &Arc<Gateway>) -> Self {
        Self {
            takeover: tokio::spawn(take_over(gateway.clone())),
            pruning: tokio::spawn(prune_periodically(gateway.clone())),
            keys: tokio::spawn(keep_keys_fresh(gateway.clone())),
        }
    }

    /// Stops them all.
    pub fn stop(&self) {
        self.takeover.abort();
        self.pruning.abort();
        self.keys.abort();
    }
}

/// Reads the API keys again whenever another host (or this one) changed
/// them: it asks every [`REFRESH`](crate::tenants::keys::REFRESH) while
/// this host holds a live key, every
/// [`IDLE_REFRESH`](crate::tenants::keys::IDLE_REFRESH) otherwise, and soon
/// after a request carried a key it does not know (at most every
/// [`UNKNOWN_GAP`]). A run log that fails is said once, and asked again.
async fn keep_keys_fresh(gateway: Arc<Gateway>) {
    if gateway.runlog.as_ref().and_then(|l| l.api_keys()).is_none() {
        return;
    }
    let mut failing = false;
    loop {
        match gateway.tenants.refresh_keys(false).await {
            Ok(_) => failing = false,
            Err(e) if !failing => {
                eprintln!("callai serve: cannot read the API keys from the run log: {e}");
                failing = true;
            }
            Err(_) => {}
        }
        let keys = gateway.tenants.keys();
        tokio::select! {
            () = tokio::time::sleep(keys.next_refresh()) => {}
            () = keys.unknown.notified() => tokio::time::sleep(UNKNOWN_GAP).await,
        }
    }
}
