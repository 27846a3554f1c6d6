//! The background work of a serving host: durable runs whose host died
//! taken over, the run log pruned.

use super::retention::prune_periodically;
use super::takeover::take_over;
use crate::state::Gateway;
use std::sync::Arc;
use tokio::task::JoinHandle;

/// The background work, going on until [`Background::stop`].
#[derive(Debug)]
pub struct Background {
    takeover: JoinHandle<()>,
    pruning: JoinHandle<()>,
}

impl Background {
    /// Starts it for `gateway`, on the current tokio runtime.
    pub fn start(gateway: &Arc<Gateway>) -> Self {
        Self {
            takeover: tokio::spawn(take_over(gateway.clone())),
            pruning: tokio::spawn(prune_periodically(gateway.clone())),
        }
    }

    /// Stops both.
    pub fn stop(&self) {
        self.takeover.abort();
        self.pruning.abort();
    }
}
