//! A call's chain of targets: where the next request goes when the one it
//! was sent to is unavailable, or its quota has no room. A chain of one
//! target (a call that names its provider) never moves.

use super::{CallMachine, Failure, RequestReason, Step};
use crate::provider::ProviderFailure;
use callai_wire::ErrorCode;
use callai_wire::StructuredOutput;

impl CallMachine<'_> {
    /// After the current target was unavailable (a refused connection, a
    /// timeout, 408, 429 or 5xx): moves to the next target of the chain and
    /// says `true`; at the chain's end, moves back to its first and says
    /// `false`: the round starts again after the usual backoff.
    pub(super) fn fall_over(&mut self) -> bool {
        if self.at + 1 < self.targets.len() {
            self.switch_to(self.at + 1);
            self.reason = RequestReason::ProviderFallback;
            true
        } else {
            self.switch_to(0);
            false
        }
    }

    /// Whether a target follows the current one in the chain (a request
    /// its provider's quota holds back goes there instead of waiting).
    pub(crate) fn has_next_target(&self) -> bool {
        self.at + 1 < self.targets.len()
    }

    /// A request its provider's quota held back: not an attempt. The next
    /// target of the chain takes it at once; at the chain's end the call
    /// ends with the quota's refusal.
    pub(super) fn throttled(&mut self, f: ProviderFailure) -> Step {
        if self.fall_over() {
            if self.ledger.count() > 0 {
                self.announce.clear();
                self.announce_retry(RequestReason::ProviderFallback, f.to_string());
            }
            return self.send();
        }
        self.announce.clear();
        let refusal = f.refusal.map(|e| *e);
        let failure = Failure::terminal(
            ErrorCode::ProviderUnavailable,
            "x-host-callai-provider-quota",
            f.message,
        );
        let mut error = self.give_up(failure);
        if let Some(refusal) = refusal {
            error.code = refusal.code;
            let details = error.details.get_or_insert_with(Default::default);
            for (k, v) in refusal.details.into_iter().flatten() {
                details.entry(k).or_insert(v);
            }
        }
        Step::Done(Err(error))
    }

    /// Points the next request at target `index`: its provider, its model,
    /// and how it takes a schema (in the prompt for the rest of the call
    /// once a target rejected native structured output).
    fn switch_to(&mut self, index: usize) {
        let target = &self.targets[index];
        self.at = index;
        self.provider = target.provider;
        self.model.clone_from(&target.model);
        if self.schema.is_some() {
            let native = target.native && !self.native_rejected;
            self.mode = Some(StructuredOutput::native_if(native));
        }
    }
}
