//! The ledger behind RFC 0248 §A: one entry per provider request.

use callai_wire::{Attempts, StructuredOutput};

/// Counts the provider requests of one call and sums what they reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ledger {
    count: u32,
    output_tokens: u64,
    reported: u32,
}

impl Default for Ledger {
    fn default() -> Self {
        Self::new()
    }
}

impl Ledger {
    /// No requests yet.
    pub fn new() -> Self {
        Self {
            count: 0,
            output_tokens: 0,
            reported: 0,
        }
    }

    /// One request reached the provider; `output_tokens` is what its
    /// response reported (`None` for no usage, including a failed request).
    pub fn record(&mut self, output_tokens: Option<u32>) {
        self.count += 1;
        if let Some(t) = output_tokens {
            self.output_tokens += u64::from(t);
            self.reported += 1;
        }
    }

    /// Requests made so far (§A.1).
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The record for a result. `structured` is the final attempt's mode, only
    /// for a call that supplied a `responseSchema` (§A.3).
    pub fn attempts(&self, structured: Option<StructuredOutput>) -> Attempts {
        Attempts {
            count: self.count,
            // §A.2: the sum over every attempt that reported usage; with none
            // reported there is nothing to sum, and the field is left out.
            output_tokens: (self.reported > 0).then_some(self.output_tokens),
            usage_complete: self.reported == self.count,
            structured_output: structured,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_every_reported_attempt() {
        let mut l = Ledger::new();
        l.record(Some(2000));
        l.record(Some(1800));
        let a = l.attempts(Some(StructuredOutput::Native));
        assert_eq!(a.count, 2);
        assert_eq!(a.output_tokens, Some(3800));
        assert!(a.usage_complete);
        assert_eq!(a.structured_output, Some(StructuredOutput::Native));
    }

    #[test]
    fn a_missing_usage_makes_the_sum_a_floor() {
        let mut l = Ledger::new();
        l.record(None);
        l.record(Some(7));
        let a = l.attempts(None);
        assert_eq!(
            (a.count, a.output_tokens, a.usage_complete),
            (2, Some(7), false)
        );
        let mut none = Ledger::new();
        none.record(None);
        let a = none.attempts(None);
        assert_eq!(
            (a.count, a.output_tokens, a.usage_complete),
            (1, None, false)
        );
    }

    #[test]
    fn the_sum_does_not_overflow_u32() {
        let mut l = Ledger::new();
        for _ in 0..16 {
            l.record(Some(u32::MAX));
        }
        assert_eq!(
            l.attempts(None).output_tokens,
            Some(16 * u64::from(u32::MAX))
        );
    }
}
