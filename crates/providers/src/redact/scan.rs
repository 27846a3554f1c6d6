//! The redaction itself, one pass over text that may come in pieces: each
//! unit (`\uXXXX`, `\/`, `%XX` or one character) is decoded once, each
//! window of [`MIN_RUN`](super::MIN_RUN) decoded bytes that are all the
//! key's is looked up once (packed in a `u64`, by binary search), and text
//! is let go as soon as no window still to come can cover it, so that a
//! stream of any length costs time linear in its length and holds a
//! bounded tail.
//!
//! A key's run is matched on the decoded, lower-cased bytes with invisible
//! format characters left out; a match (windows that overlap, merged) is
//! replaced, with whatever it spans in the original, by `[redacted]`. The
//! key's base64 forms are then replaced in what is let go, a tail of the
//! longest form's length kept back so that one cut across two pieces is
//! still found. A character the key does not hold (a space, most
//! punctuation) ends every window through it, and one outside the base64
//! alphabet ends every base64 form: the text up to it goes at once, so a
//! stream of words is relayed word by word, not held back.

use super::{REDACTED, Redactor, is_format};
use std::collections::VecDeque;

/// The most format characters in a row that can sit inside a match: past
/// them the key is taken as cut there. It bounds what one invisible flood
/// makes the scanner hold back (a key cut by more than this many invisible
/// characters shows no more than [`MIN_RUN`](super::MIN_RUN) - 1 of its
/// characters a piece, as one cut by visible ones).
const MAX_GAP: usize = 1024;

/// A byte no key has: stands for a run of invisible characters too long to
/// be inside one.
const SEPARATOR: u8 = 0;

/// An incremental redaction of one text.
#[derive(Debug)]
pub(crate) struct Scanner<'a> {
    redactor: &'a Redactor,
    /// The window length: [`MIN_RUN`](super::MIN_RUN), or the key's length
    /// when shorter.
    n: usize,
    /// Text not let go yet; `raw[0]` is at `base`.
    raw: String,
    base: usize,
    /// Where decoding goes on (absolute).
    next: usize,
    /// Where the last units decoded start (absolute; at most `n`).
    starts: VecDeque<usize>,
    /// Their bytes, packed as [`super::pack`] packs a window (the last `n`).
    window: u64,
    /// How many units in a row, up to the last, hold bytes the key has: a
    /// window is looked up only when all its `n` bytes are the key's.
    held: usize,
    /// Format characters since the last unit.
    gap: usize,
    /// Matches not wholly let go, in order (absolute); the last may grow.
    spans: VecDeque<(usize, usize)>,
    /// The start of the match whose `[redacted]` went out already.
    open: Option<usize>,
    /// The end of the last match let go wholly: a window that starts
    /// there goes on with it (one `[redacted]`, as the whole text gets).
    closed: Option<usize>,
    /// The end (absolute) of the last unit whose byte the key does not
    /// hold: no window through it can match, so the text before it is final.
    settled: usize,
    /// Redacted text held back for the base64 forms.
    out: String,
    /// The longest base64 form's length.
    longest: usize,
}

impl<'a> Scanner<'a> {
    /// A scanner for `redactor`'s key (not empty).
    pub(crate) fn new(redactor: &'a Redactor) -> Self {
        Self {
            settled: 0,
            n: redactor.window(),
            redactor,
            raw: String::new(),
            base: 0,
            next: 0,
            starts: VecDeque::new(),
            window: 0,
            held: 0,
            gap: 0,
            spans: VecDeque::new(),
            open: None,
            closed: None,
            out: String::new(),
            longest: redactor.base64.iter().map(String::len).max().unwrap_or(0),
        }
    }

    /// Takes `text`; appends to `to` what may be let go now.
    pub(crate) fn push(&mut self, text: &str, to: &mut String) {
        self.raw.push_str(text);
        self.decode(false);
        // Every window that covers a unit before the last n - 1 has been
        // looked up: the text before them is final.
        let keep = self.n - 1;
        let release = match self.starts.len().checked_sub(keep) {
            Some(i) if keep > 0 => self.starts.get(i).copied().unwrap_or(self.next),
            Some(_) => self.next,
            None => self.base,
        };
        self.release(release.max(self.settled));
        self.emit(false, to);
    }

    /// The end of the text: appends the rest to `to`.
    pub(crate) fn finish(mut self, to: &mut String) {
        self.decode(true);
        self.release(self.base + self.raw.len());
        self.emit(true, to);
    }

    /// Decodes the units from `next` on; a unit cut off at the end of the
    /// text waits for the next piece, unless `last`.
    fn decode(&mut self, last: bool) {
        let hex = |s: &[u8]| {
            std::str::from_utf8(s)
                .ok()
                .and_then(|h| u32::from_str_radix(h, 16).ok())
        };
        loop {
            let i = self.next - self.base;
            let raw = self.raw.as_bytes();
            let Some(&first) = raw.get(i) else {
                return;
            };
            // An escape that may be cut off by the end of this piece.
            let cut = |len: usize| raw.len() < i + len && !last;
            let (byte, len): (Option<u8>, usize) = match first {
                b'\\' if cut(2) => return,
                b'\\' if raw.get(i + 1) == Some(&b'u') => {
                    if cut(6) {
                        return;
                    }
                    match raw.get(i + 2..i + 6).and_then(hex) {
                        Some(c) if c < 0x80 => (Some(c as u8), 6),
                        Some(c) if char::from_u32(c).is_some_and(is_format) => (None, 6),
                        _ => (Some(first), 1),
                    }
                }
                b'\\' if matches!(raw.get(i + 1), Some(b'/' | b'\\' | b'"')) => {
                    (Some(raw[i + 1]), 2)
                }
                b'%' if cut(3) => return,
                b'%' => match raw.get(i + 1..i + 3).and_then(hex) {
                    Some(c) => (Some(c as u8), 3),
                    None => (Some(first), 1),
                },
                b if b < 0x80 => (Some(b), 1),
                _ => {
                    // A character beyond ASCII: left out when invisible, else
                    // kept whole (it is in no key of ASCII).
                    let c = self.raw[i..]
                        .chars()
                        .next()
                        .expect("a character starts here");
                    let len = c.len_utf8();
                    if is_format(c) {
                        (None, len)
                    } else {
                        let start = self.next;
                        let mut bytes = [0u8; 4];
                        bytes[..len].copy_from_slice(&raw[i..i + len]);
                        self.gap = 0;
                        for &b in &bytes[..len] {
                            self.unit(b, start, start + len);
                        }
                        self.next += len;
                        continue;
                    }
                }
            };
            let start = self.next;
            self.next += len;
            match byte {
                Some(b) => {
                    self.gap = 0;
                    self.unit(b.to_ascii_lowercase(), start, start + len);
                }
                // Past the gap, every invisible character is a unit that
                // matches nothing, and the text before it can go.
                None if self.gap >= MAX_GAP => self.unit(SEPARATOR, start, start + len),
                None => self.gap += 1,
            }
        }
    }

    /// A unit decoded: the window it ends is looked up.
    fn unit(&mut self, byte: u8, start: usize, end: usize) {
        if self.redactor.classes.is_key(byte) {
            self.held += 1;
        } else {
            self.settled = end;
            self.held = 0;
        }
        if self.starts.len() == self.n {
            self.starts.pop_front();
        }
        self.starts.push_back(start);
        // The last n bytes: the older ones shifted out (n is 1 to 8).
        self.window = (self.window << 8 | u64::from(byte)) & (u64::MAX >> (64 - 8 * self.n));
        // A window through a byte the key does not have is none of its runs
        // (and `held` >= n means n starts are here).
        if self.held < self.n || self.redactor.runs.binary_search(&self.window).is_err() {
            return;
        }
        let (from, to) = (self.starts[0], end);
        match self.spans.back_mut() {
            Some(last) if from <= last.1 => last.1 = last.1.max(to),
            _ => {
                if self.closed.is_some_and(|end| from <= end) {
                    self.open = Some(from);
                }
                self.spans.push_back((from, to));
            }
        }
    }

    /// Lets go of the text before `upto` (absolute), matches replaced.
    fn release(&mut self, upto: usize) {
        let mut at = self.base;
        while let Some(&(start, end)) = self.spans.front() {
            if start >= upto {
                break;
            }
            if start > at {
                self.out
                    .push_str(&self.raw[at - self.base..start - self.base]);
            }
            if self.open != Some(start) {
                self.out.push_str(REDACTED);
                self.open = Some(start);
            }
            if end <= upto {
                at = end;
                self.closed = Some(end);
                self.spans.pop_front();
            } else {
                // The match goes on past what is let go: the rest of it
                // is dropped as it is let go.
                at = upto;
                break;
            }
        }
        if at < upto {
            self.out
                .push_str(&self.raw[at - self.base..upto - self.base]);
        }
        self.raw.drain(..upto - self.base);
        self.base = upto;
    }

    /// Replaces the key's base64 forms in what was let go and appends it to
    /// `to`, all of it when `last`, else all but a tail as long as the
    /// longest form less one.
    fn emit(&mut self, last: bool, to: &mut String) {
        for core in &self.redactor.base64 {
            if self.out.contains(core.as_str()) {
                self.out = self.out.replace(core.as_str(), REDACTED);
            }
        }
        let keep = if last {
            0
        } else {
            self.longest.saturating_sub(1)
        };
        let mut cut = self.out.len().saturating_sub(keep);
        // No base64 form goes through a byte outside the alphabet.
        if let Some(i) = self.out.as_bytes()[cut..]
            .iter()
            .rposition(|b| !(b.is_ascii_alphanumeric() || b"+/-_".contains(b)))
        {
            cut += i + 1;
        }
        while !self.out.is_char_boundary(cut) {
            cut -= 1;
        }
        to.push_str(&self.out[..cut]);
        self.out.drain(..cut);
    }
}
