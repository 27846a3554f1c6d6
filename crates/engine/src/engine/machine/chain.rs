//! A call's chain of targets: where the next request goes when the one it
//! was sent to is unavailable. A chain of one target (a call that names its
//! provider) never moves.

use super::{CallMachine, RequestReason};
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
