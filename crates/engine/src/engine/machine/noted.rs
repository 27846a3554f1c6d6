//! The events a call's machine makes, made only when someone keeps them:
//! each costs a few strings (provider, model, node, reason), and a caller
//! that will not read a call's events (`serve`'s `/v1/call` without
//! `events`, the drop-in endpoints) should not pay for them.

use crate::events::Event;

/// Whether a call's events are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Events {
    /// Made and handed to the sink.
    Made,
    /// Not made: the sink keeps none.
    Skipped,
}

/// A list of events, pushed to only when they are [`Events::Made`].
#[derive(Debug)]
pub(super) struct Noted {
    events: Events,
    list: Vec<Event>,
}

impl Noted {
    pub(super) fn new(events: Events) -> Self {
        Self {
            events,
            list: Vec::new(),
        }
    }

    /// Adds the event `make` makes; `make` is not called when events are
    /// skipped.
    pub(super) fn push_with(&mut self, make: impl FnOnce() -> Event) {
        if self.events == Events::Made {
            self.list.push(make());
        }
    }

    /// Moves `other`'s events to the end of this list.
    pub(super) fn append(&mut self, other: &mut Noted) {
        self.list.append(&mut other.list);
    }

    pub(super) fn clear(&mut self) {
        self.list.clear();
    }

    pub(super) fn drain(&mut self) -> std::vec::Drain<'_, Event> {
        self.list.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage() -> Event {
        Event::ProviderUsage {
            provider: "p".into(),
            model: "m".into(),
            input_tokens: None,
            output_tokens: Some(1),
            node_id: None,
            attempt: 1,
            reason: "first".into(),
        }
    }

    #[test]
    fn skipped_events_are_never_made() {
        let mut noted = Noted::new(Events::Skipped);
        noted.push_with(|| unreachable!("a skipped event is not made"));
        assert_eq!(noted.drain().count(), 0);
    }

    #[test]
    fn made_events_keep_their_order_across_an_append() {
        let mut announce = Noted::new(Events::Made);
        announce.push_with(usage);
        let mut noted = Noted::new(Events::Made);
        noted.push_with(usage);
        noted.append(&mut announce);
        assert_eq!(noted.drain().count(), 2);
        assert_eq!(announce.drain().count(), 0);
    }
}
