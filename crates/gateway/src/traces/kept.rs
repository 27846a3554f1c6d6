//! The traces a [`super::CallStore`] keeps in memory, and where their
//! memory comes from.
//!
//! Ten thousand traces, each allocated between the short-lived allocations
//! of the calls around it and freed ten thousand calls later, left glibc's
//! heap fragmented and every allocation of a loaded server slower (malloc
//! and free 15.8% of its CPU with traces kept, 11.9% with none: the
//! performance page). So a trace's allocation is made in a batch with
//! others while the store fills, and once it is full, the oldest trace's
//! allocation takes the newest: a full store allocates and frees nothing
//! per call, and its traces sit together, not among the calls' own.

use super::record::CallTrace;
use callai_engine::wire::Attempts;
use smol_str::SmolStr;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// How many trace allocations are made together while the store fills.
const BATCH: usize = 256;

/// The kept traces, oldest first, and by id.
#[derive(Debug, Default)]
pub(super) struct Kept {
    pub(super) order: VecDeque<Arc<CallTrace>>,
    pub(super) by_id: HashMap<SmolStr, Arc<CallTrace>>,
    /// Allocations made ahead, for the traces to come.
    spare: Vec<Arc<CallTrace>>,
}

impl Kept {
    /// Keeps `trace`, the oldest going past `keep` (at least 1). Returns
    /// it as kept, and the trace its allocation held before, to be dropped
    /// once the store's lock is let go.
    pub(super) fn keep(
        &mut self,
        trace: CallTrace,
        keep: usize,
    ) -> (Arc<CallTrace>, Option<CallTrace>) {
        let slot = if self.order.len() >= keep {
            let oldest = self.order.pop_front();
            if let Some(old) = &oldest {
                self.by_id.remove(&old.id);
            }
            oldest
        } else {
            if self.spare.is_empty() {
                let room = BATCH.min(keep - self.order.len());
                self.spare
                    .extend((0..room).map(|_| Arc::new(CallTrace::empty())));
            }
            self.spare.pop()
        };
        let (trace, stale) = match slot {
            // Nothing else holds it (a reader, the log's writer): reused.
            Some(mut slot) => match Arc::get_mut(&mut slot) {
                Some(old) => {
                    let stale = std::mem::replace(old, trace);
                    (slot, Some(stale))
                }
                None => (Arc::new(trace), None),
            },
            None => (Arc::new(trace), None),
        };
        self.by_id.insert(trace.id.clone(), trace.clone());
        self.order.push_back(trace.clone());
        (trace, stale)
    }
}

impl CallTrace {
    /// A trace of nothing: what an allocation made ahead holds.
    fn empty() -> Self {
        Self {
            id: SmolStr::default(),
            tenant: SmolStr::default(),
            endpoint: "",
            run_id: None,
            node_id: SmolStr::default(),
            prompt: None,
            started_ms: 0,
            route: None,
            outcome: "",
            attempts: Attempts {
                count: 0,
                output_tokens: None,
                usage_complete: true,
                structured_output: None,
            },
            cost: None,
            requests: smallvec::SmallVec::new(),
            duration_ms: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(id: &str) -> CallTrace {
        CallTrace {
            id: id.into(),
            ..CallTrace::empty()
        }
    }

    #[test]
    fn a_full_store_reuses_the_oldest_allocation_unless_it_is_held() {
        let mut kept = Kept::default();
        let (a, _) = kept.keep(trace("a"), 2);
        let (b, _) = kept.keep(trace("b"), 2);
        let (a_at, b_at) = (Arc::as_ptr(&a), Arc::as_ptr(&b));
        drop((a, b));
        // Full: "a" goes, and its allocation takes "c".
        let (c, stale) = kept.keep(trace("c"), 2);
        assert_eq!(Arc::as_ptr(&c), a_at);
        assert_eq!(stale.map(|t| t.id), Some("a".into()));
        assert_eq!(
            kept.order.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["b", "c"]
        );
        assert!(!kept.by_id.contains_key("a"));
        // A reader holds "b": "d" gets an allocation of its own, and the
        // reader's trace is untouched.
        let held = kept.by_id["b"].clone();
        let (d, stale) = kept.keep(trace("d"), 2);
        assert_ne!(Arc::as_ptr(&d), b_at);
        assert!(stale.is_none());
        assert_eq!(held.id, "b");
        assert_eq!(
            kept.order.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["c", "d"]
        );
        assert_eq!(kept.by_id.len(), 2);
        assert!(
            kept.spare.is_empty(),
            "no more made ahead than the store keeps"
        );
    }

    #[test]
    fn allocations_are_made_ahead_in_batches_up_to_what_the_store_keeps() {
        let mut kept = Kept::default();
        kept.keep(trace("0"), 10_000);
        assert_eq!(kept.spare.len(), BATCH - 1);
        let mut small = Kept::default();
        small.keep(trace("0"), 3);
        assert_eq!(small.spare.len(), 2);
    }
}
