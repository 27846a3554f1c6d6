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
    /// The bytes of text the kept traces hold (`[runlog] keepText`).
    text_bytes: u64,
}

/// What keeping a trace let go of, to be dropped once the store's lock is:
/// the old trace whose allocation the new one took, and any other trace
/// evicted with it (to make room for its text).
#[derive(Debug, Default)]
pub(super) struct Stale {
    _replaced: Option<CallTrace>,
    _evicted: Vec<Arc<CallTrace>>,
}

impl Kept {
    /// Keeps `trace`, the oldest going past `keep` (at least 1) traces or
    /// `max_text` bytes of their text. Returns it as kept, and what it let
    /// go of, to be dropped once the store's lock is let go.
    pub(super) fn keep(
        &mut self,
        trace: CallTrace,
        keep: usize,
        max_text: u64,
    ) -> (Arc<CallTrace>, Stale) {
        let text = trace.text_bytes();
        let mut slot = None;
        let mut evicted = Vec::new();
        while !self.order.is_empty()
            && (self.order.len() >= keep || self.text_bytes + text > max_text)
        {
            let old = self.order.pop_front().expect("not empty");
            self.by_id.remove(&old.id);
            self.text_bytes -= old.text_bytes();
            match slot {
                None => slot = Some(old),
                Some(_) => evicted.push(old),
            }
        }
        self.text_bytes += text;
        let slot = if slot.is_some() {
            slot
        } else {
            if self.spare.is_empty() {
                let room = BATCH.min(keep - self.order.len());
                self.spare
                    .extend((0..room).map(|_| Arc::new(CallTrace::empty())));
            }
            self.spare.pop()
        };
        let (trace, replaced) = match slot {
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
        let stale = Stale {
            _replaced: replaced,
            _evicted: evicted,
        };
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
            error: None,
            attempts: Attempts {
                count: 0,
                output_tokens: None,
                usage_complete: true,
                structured_output: None,
            },
            cost: None,
            requests: smallvec::SmallVec::new(),
            duration_ms: 0,
            cache: None,
            cached_from: None,
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
        let (a, _) = kept.keep(trace("a"), 2, u64::MAX);
        let (b, _) = kept.keep(trace("b"), 2, u64::MAX);
        let (a_at, b_at) = (Arc::as_ptr(&a), Arc::as_ptr(&b));
        drop((a, b));
        // Full: "a" goes, and its allocation takes "c".
        let (c, stale) = kept.keep(trace("c"), 2, u64::MAX);
        assert_eq!(Arc::as_ptr(&c), a_at);
        assert_eq!(stale._replaced.map(|t| t.id), Some("a".into()));
        assert_eq!(
            kept.order.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["b", "c"]
        );
        assert!(!kept.by_id.contains_key("a"));
        // A reader holds "b": "d" gets an allocation of its own, and the
        // reader's trace is untouched.
        let held = kept.by_id["b"].clone();
        let (d, stale) = kept.keep(trace("d"), 2, u64::MAX);
        assert_ne!(Arc::as_ptr(&d), b_at);
        assert!(stale._replaced.is_none());
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
        kept.keep(trace("0"), 10_000, u64::MAX);
        assert_eq!(kept.spare.len(), BATCH - 1);
        let mut small = Kept::default();
        small.keep(trace("0"), 3, u64::MAX);
        assert_eq!(small.spare.len(), 2);
    }

    #[test]
    fn past_its_bytes_of_text_the_oldest_traces_go_whatever_their_number() {
        let with_text = |id: &str, bytes: usize| {
            let mut t = trace(id);
            t.prompt = Some(super::super::text::TracedText {
                sha256: [0; 32],
                text: Some("x".repeat(bytes)),
                cut: false,
            });
            t
        };
        let mut kept = Kept::default();
        for id in ["a", "b", "c"] {
            kept.keep(with_text(id, 400), 100, 1000);
        }
        // "a" went for "c"'s text: 800 of 1,000 bytes kept.
        let ids = |k: &Kept| k.order.iter().map(|t| t.id.to_string()).collect::<Vec<_>>();
        assert_eq!(ids(&kept), ["b", "c"]);
        let (_, stale) = kept.keep(with_text("d", 1000), 100, 1000);
        assert_eq!(ids(&kept), ["d"], "both older traces went for its text");
        assert_eq!(stale._evicted.len(), 1);
        assert_eq!(kept.text_bytes, 1000);
        // A trace without text costs none.
        kept.keep(trace("e"), 100, 1000);
        assert_eq!(ids(&kept), ["d", "e"]);
    }
}
