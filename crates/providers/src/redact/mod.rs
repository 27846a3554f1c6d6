//! Keeping an API key out of everything a provider sends back. A provider
//! (or a gateway in front of it) may echo the key in any encoding: as it
//! is, upper-cased, JSON-escaped (`\/`, `\u0073`), URL-encoded (`%2F`), or
//! base64-encoded inside a longer token. Every text that leaves a provider
//! adapter — error messages and reply content alike — passes through
//! [`Redactor::redact`].

use base64::Engine as _;
use base64::engine::GeneralPurpose;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
mod clean;
mod scan;

use clean::ByteClasses;
use scan::Scanner;
use std::borrow::Cow;

/// What stands where a key was.
pub const REDACTED: &str = "[redacted]";

/// Finds a key in its foreseeable encodings.
#[derive(Clone, Default)]
pub struct Redactor {
    /// The key, lower-cased ASCII (matched case-insensitively).
    key: Vec<u8>,
    /// What each byte is to it.
    classes: ByteClasses,
    /// Every run of [`MIN_RUN`] consecutive bytes of `key` (of all of it,
    /// when shorter), each packed into a `u64` by [`pack`], sorted: a
    /// window is looked up with a binary search over at most the key's
    /// length, no hashing.
    runs: Vec<u64>,
    /// The key's base64 forms at each of the three byte alignments, in both
    /// alphabets: the characters determined by the key's bytes alone.
    base64: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Redactor([redacted])")
    }
}

/// The base64 characters of `key` placed `offset` bytes into a stream that
/// depend on the key's bits alone: the key encoded behind `offset` bytes,
/// less the characters that share bits with what comes before or after.
fn base64_core(key: &[u8], offset: usize, engine: &GeneralPurpose) -> String {
    let mut bytes = vec![0u8; offset];
    bytes.extend_from_slice(key);
    let (first, last) = ((offset * 8).div_ceil(6), bytes.len() * 8 / 6);
    engine.encode(&bytes)[first..last].to_owned()
}

impl Redactor {
    /// A redactor for `key`; one for no key changes nothing.
    pub fn new(key: Option<&str>) -> Self {
        let Some(key) = key.filter(|k| !k.is_empty()) else {
            return Self::default();
        };
        let raw = key.as_bytes();
        let base64 = (0..3)
            .flat_map(|offset| [&STANDARD, &URL_SAFE].map(|e| base64_core(raw, offset, e)))
            // A core too short to be the key's and nothing else is left out.
            .filter(|core| core.len() >= 8)
            .collect();
        let key = raw.to_ascii_lowercase();
        let mut runs: Vec<u64> = key.windows(MIN_RUN.min(key.len())).map(pack).collect();
        runs.sort_unstable();
        runs.dedup();
        Self {
            classes: ByteClasses::of(&key),
            key,
            runs,
            base64,
        }
    }

    /// The length of the windows a match is made of: [`MIN_RUN`], or the
    /// whole key when it is shorter.
    fn window(&self) -> usize {
        MIN_RUN.min(self.key.len()).max(1)
    }

    /// `text` with every run of [`MIN_RUN`] or more consecutive characters
    /// of the key, in any encoding above, replaced by `[redacted]`: a key
    /// echoed whole, cut in pieces, or with invisible characters (U+200B
    /// and the other Unicode format characters) put inside it.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.key.is_empty() || clean::surely_clean(self, text) {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut scanner = Scanner::new(self);
        scanner.push(text, &mut out);
        scanner.finish(&mut out);
        if out == text {
            Cow::Borrowed(text)
        } else {
            Cow::Owned(out)
        }
    }
}

/// A text redacted as it streams in pieces: what [`Redactor::redact`]
/// makes of the whole, let go as soon as no key can still be in it, in
/// time linear in the text and with a bounded tail held back.
#[derive(Debug)]
pub(crate) struct StreamRedaction<'a>(Option<Scanner<'a>>);

impl<'a> StreamRedaction<'a> {
    pub(crate) fn new(redactor: &'a Redactor) -> Self {
        Self((!redactor.key.is_empty()).then(|| Scanner::new(redactor)))
    }

    /// Takes `text`; what may be relayed now (empty when none).
    pub(crate) fn push<'t>(&mut self, text: &'t str) -> Cow<'t, str> {
        match &mut self.0 {
            None => Cow::Borrowed(text),
            Some(scanner) => {
                let mut out = String::new();
                scanner.push(text, &mut out);
                Cow::Owned(out)
            }
        }
    }

    /// What is left at the end of the stream (empty when none).
    pub(crate) fn finish(self) -> String {
        let mut out = String::new();
        if let Some(scanner) = self.0 {
            scanner.finish(&mut out);
        }
        out
    }
}

/// The fewest consecutive characters of a key that are redacted where they
/// stand alone: fewer are too likely in any text to say anything.
pub const MIN_RUN: usize = 8;

/// A window of at most [`MIN_RUN`] (eight) bytes as one number, its first
/// byte highest: two windows of the same length are equal when their
/// numbers are.
fn pack(window: &[u8]) -> u64 {
    window
        .iter()
        .fold(0, |packed, b| packed << 8 | u64::from(*b))
}

/// Whether `c` is a Unicode format character (category Cf): invisible, so
/// a provider can put one inside a key and the text still shows the key.
fn is_format(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{FFF0}'..='\u{FFF8}' | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0000}'..='\u{E0FFF}')
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-test/SECRET+0248_abcdefGHIJ";

    #[test]
    fn every_foreseeable_encoding_of_the_key_is_redacted() {
        let r = Redactor::new(Some(KEY));
        let json_escaped = KEY.replace('/', "\\/");
        let u_escaped: String = KEY
            .chars()
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect();
        let url_encoded: String = KEY
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' => (b as char).to_string(),
                b => format!("%{b:02X}"),
            })
            .collect();
        let mut encodings = vec![
            KEY.to_owned(),
            KEY.to_uppercase(),
            json_escaped,
            u_escaped,
            url_encoded.clone(),
            url_encoded.to_lowercase(),
        ];
        // Base64 of the key inside longer tokens, at every alignment.
        for prefix in ["", "u:", "ab:"] {
            let token = format!("{prefix}{KEY}");
            encodings.push(STANDARD.encode(token.as_bytes()));
            encodings.push(URL_SAFE.encode(token.as_bytes()));
        }
        for shown in encodings {
            let text = format!("error: invalid key <{shown}> given");
            let redacted = r.redact(&text);
            assert!(redacted.contains(REDACTED), "{shown}: {redacted}");
            assert!(
                !redacted.contains("SECRET") && !redacted.contains("secret"),
                "{redacted}"
            );
            assert!(redacted.starts_with("error: invalid key <"), "{redacted}");
        }
    }

    #[test]
    fn text_without_the_key_is_left_alone() {
        let r = Redactor::new(Some(KEY));
        // Seven characters of the key are not a run of it (MIN_RUN is 8).
        for text in ["", "plain text", "%zz \\uZZZZ \\", "ünïcödé ✓ sk-test"] {
            assert_eq!(r.redact(text), text);
        }
        assert_eq!(Redactor::new(None).redact(KEY), KEY);
        assert_eq!(format!("{r:?}"), "Redactor([redacted])");
    }

    /// A window is looked up only when all its bytes are the key's: a key
    /// right after its own characters, a key shorter than a run (matched
    /// whole), and one of a single repeated character are still found.
    #[test]
    fn a_key_among_its_own_characters_or_shorter_than_a_run_is_redacted() {
        let cases = [
            (KEY, format!("sksksk{KEY}tttt")),
            (KEY, format!("{}{KEY}", &KEY[3..12])),
            ("sk-fake", "sksk-fakee".to_owned()),
            ("sk-fake", "x\\u0073k-FAKE!".to_owned()),
            ("aaaaaaaaaaaa", "baaaaaaaab".to_owned()),
        ];
        for (key, text) in cases {
            let r = Redactor::new(Some(key));
            let redacted = r.redact(&text);
            assert!(redacted.contains(REDACTED), "{key} in {text}: {redacted}");
            let lower = redacted.to_lowercase();
            let n = MIN_RUN.min(key.len());
            for run in key.to_lowercase().as_bytes().windows(n) {
                let run = std::str::from_utf8(run).unwrap();
                assert!(!lower.contains(run), "{run} left in {redacted}");
            }
        }
        let short = Redactor::new(Some("sk-fake"));
        for text in ["sk-fak", "k-fake", "sk_fake", "the sk-fa ke"] {
            assert_eq!(short.redact(text), text);
        }
        // Seven a's are a run of none: the run is eight.
        assert_eq!(
            Redactor::new(Some("aaaaaaaaaaaa")).redact("baaaaaaab"),
            "baaaaaaab"
        );
    }

    /// Issue 22 #8: a key echoed with invisible characters inside it, or in
    /// pieces, or case-folded, leaks no run of 8 of its characters.
    #[test]
    fn a_key_in_pieces_or_with_invisible_characters_is_redacted() {
        let r = Redactor::new(Some(KEY));
        let zero_width = format!("{}\u{200B}{}", &KEY[..25], &KEY[25..]);
        let escaped_zero_width = format!("{}\\u200b{}", &KEY[..10], &KEY[10..]);
        let soft_hyphens: String = KEY.chars().flat_map(|c| [c, '\u{00AD}']).collect();
        let halves = format!("{} ... {}", &KEY[..15], &KEY[15..]);
        for shown in [
            zero_width,
            escaped_zero_width,
            soft_hyphens,
            halves,
            KEY.to_lowercase(),
            format!("\u{FEFF}{}", KEY.to_uppercase()),
        ] {
            let text = format!("error: key <{shown}>");
            let redacted = r.redact(&text);
            // What a reader sees: the invisible characters left out.
            let lower = redacted
                .chars()
                .filter(|c| !is_format(*c))
                .collect::<String>()
                .to_lowercase();
            for run in KEY.to_lowercase().as_bytes().windows(MIN_RUN) {
                let run = std::str::from_utf8(run).unwrap();
                assert!(!lower.contains(run), "{shown:?} left {run:?}: {redacted}");
            }
            assert!(redacted.starts_with("error: key <"), "{redacted}");
        }
    }

    /// What a stream relays, pushed in pieces of `size` bytes (at char
    /// boundaries), and the most it held back at any time.
    fn streamed(r: &Redactor, text: &str, size: usize) -> (String, usize) {
        let mut stream = StreamRedaction::new(r);
        let (mut out, mut held) = (String::new(), 0);
        let mut at = 0;
        while at < text.len() {
            let mut end = (at + size).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            out.push_str(&stream.push(&text[at..end]));
            held = held.max(end.saturating_sub(out.len()));
            at = end;
        }
        out.push_str(&stream.finish());
        (out, held)
    }

    #[test]
    fn a_key_split_across_pieces_is_redacted_as_a_whole() {
        let key = "sk-test-SUPERSECRET-0248";
        let r = Redactor::new(Some(key));
        let mut stream = StreamRedaction::new(&r);
        let mut relayed = String::new();
        for piece in ["here is ", "sk-test-SUP", "ERSECRET", "-0248 and", " more"] {
            relayed.push_str(&stream.push(piece));
        }
        relayed.push_str(&stream.finish());
        assert!(!relayed.contains("SUPERSECRET"), "{relayed}");
        assert!(!relayed.contains("sk-test-SUP"), "{relayed}");
        assert_eq!(relayed, "here is [redacted] and more");
    }

    /// Issue 31 #8: however a text is cut into pieces, the stream relays
    /// what the whole text redacts to.
    #[test]
    fn a_stream_relays_what_the_whole_text_redacts_to_however_it_is_cut() {
        let r = Redactor::new(Some(KEY));
        let b64 = STANDARD.encode(format!("ab:{KEY}").as_bytes());
        let texts = [
            format!("error: {KEY} given"),
            format!("x{}y", KEY.to_uppercase()),
            format!("{}\\u200b{}", &KEY[..10], &KEY[10..]),
            format!("%2F{}%2f and \\u0073{}", &KEY[..12], &KEY[12..]),
            format!("{KEY}{KEY} twice, then {} ... {}", &KEY[..15], &KEY[15..]),
            format!("token {b64} end"),
            format!("ünïcödé {}\u{200B}{} ✓", &KEY[..9], &KEY[9..]),
            "no key at all, only \\ and % and \\u00".to_owned(),
            "a".repeat(300),
        ];
        for text in &texts {
            let whole = r.redact(text).into_owned();
            for size in [1, 2, 3, 5, 7, 8, 13, 100] {
                assert_eq!(
                    streamed(&r, text, size).0,
                    whole,
                    "{text:?} in pieces of {size}"
                );
            }
        }
    }

    /// Words go out as they come: a character the key does not hold ends
    /// every match through it, so nothing before it waits for the next
    /// piece.
    #[test]
    fn a_stream_of_words_is_relayed_word_by_word() {
        let r = Redactor::new(Some(KEY));
        let mut stream = StreamRedaction::new(&r);
        assert_eq!(stream.push("Half "), "Half ");
        assert_eq!(stream.push("a story, "), "a story, ");
        assert_eq!(stream.push("more"), "");
        assert_eq!(stream.finish(), "more");
    }

    /// Issue 31 #8: text without whitespace is let go as it comes; the
    /// stream holds back a bounded tail, not the whole text.
    #[test]
    fn a_stream_without_whitespace_holds_back_a_bounded_tail() {
        let r = Redactor::new(Some(KEY));
        let text = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo".repeat(3000);
        let (out, held) = streamed(&r, &text, 100);
        assert_eq!(out, text);
        assert!(
            held < 200,
            "held back {held} bytes of a stream with no whitespace"
        );
        // An invisible flood is cut off too.
        let flood = "\u{200B}".repeat(20_000);
        let (out, held) = streamed(&r, &flood, 100);
        assert_eq!(out, flood);
        assert!(
            held < 8 * 1024,
            "held back {held} bytes of invisible characters"
        );
    }
}
