//! The common case told apart cheaply: a text that cannot hold any part of
//! the key the scanner would redact, known in one pass over its bytes,
//! with no decoding and no allocation. Every reply's content and tool
//! arguments go through the redactor, and almost none holds the key: the
//! full scan decodes, queues and windows each character. A structured
//! call's reply of 55 bytes took 7,460 instructions through the scanner
//! and takes 1,216 through this check (`bench/profile/instructions.sh`).
//!
//! It answers "clean" only where the scanner provably changes nothing:
//! plain ASCII with no escape the scanner decodes (`\`, `%`) and no
//! character beyond ASCII (an invisible one would be left out of a run,
//! joining what it separates), so each byte is one unit; no run of
//! [`super::MIN_RUN`] (or the key's length) bytes all of the key's, which
//! every match needs; and none of the key's base64 forms (searched for
//! only in a text with a run of base64 characters as long as the shortest
//! form). Anything else goes to the scanner.

use super::Redactor;

/// A byte the key holds (compared lower-cased).
const KEY: u8 = 1;
/// A byte of either base64 alphabet.
const BASE64: u8 = 2;
/// A byte the scanner may decode with others (`\`, `%`) or that starts a
/// character beyond ASCII: the check leaves the text to the scanner.
const SCAN: u8 = 4;

/// What each byte is to a key's redaction, a bit each: one table lookup a
/// byte.
#[derive(Debug, Clone)]
pub(crate) struct ByteClasses(Box<[u8; 256]>);

impl Default for ByteClasses {
    fn default() -> Self {
        Self::of(b"")
    }
}

impl ByteClasses {
    /// The classes for `key` (lower-cased).
    pub(crate) fn of(key: &[u8]) -> Self {
        let mut table = Box::new([0u8; 256]);
        for (b, class) in (0..=255u8).zip(table.iter_mut()) {
            if key.contains(&b.to_ascii_lowercase()) {
                *class |= KEY;
            }
            if b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_') {
                *class |= BASE64;
            }
            if b >= 0x80 || b == b'\\' || b == b'%' {
                *class |= SCAN;
            }
        }
        Self(table)
    }

    /// Whether `b` is one of the key's bytes, case aside.
    pub(crate) fn is_key(&self, b: u8) -> bool {
        self.0[usize::from(b)] & KEY != 0
    }
}

/// Whether the scanner would leave `text` as it is, known without it; a
/// `false` says only that the scanner must look.
pub(super) fn surely_clean(redactor: &Redactor, text: &str) -> bool {
    let n = redactor.window();
    // A base64 form is a run of its alphabet's characters at least as
    // long as the shortest form: without one, none is searched for.
    let shortest = redactor.base64.iter().map(String::len).min().unwrap_or(0);
    let classes = &redactor.classes.0;
    let (mut run, mut b64_run, mut b64_longest) = (0usize, 0usize, 0usize);
    for &b in text.as_bytes() {
        let class = classes[usize::from(b)];
        if class & SCAN != 0 {
            return false;
        }
        run = if class & KEY != 0 { run + 1 } else { 0 };
        if run >= n {
            return false;
        }
        b64_run = if class & BASE64 != 0 { b64_run + 1 } else { 0 };
        b64_longest = b64_longest.max(b64_run);
    }
    b64_longest < shortest
        || !redactor
            .base64
            .iter()
            .any(|core| text.contains(core.as_str()))
}

#[cfg(test)]
mod tests {
    use super::super::{Redactor, scan::Scanner};
    use super::*;
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;

    /// What the scanner alone makes of `text`.
    fn scanned(r: &Redactor, text: &str) -> String {
        let mut out = String::new();
        let mut scanner = Scanner::new(r);
        scanner.push(text, &mut out);
        scanner.finish(&mut out);
        out
    }

    #[test]
    fn a_key_holds_its_bytes_either_case_and_no_other() {
        let classes = ByteClasses::of(b"sk-fake\xff\x00");
        for b in 0..=255u8 {
            let held = b"sk-fake\xff\x00".contains(&b.to_ascii_lowercase());
            assert_eq!(classes.is_key(b), held, "{b}");
        }
        assert!(!ByteClasses::default().is_key(b's'));
    }

    /// Texts the check calls clean, the scanner leaves alone: many texts
    /// near the key (its pieces, runs one short, its base64 forms, escapes,
    /// invisible characters), and a deterministic spread of others made of
    /// the key's characters and a few that are not.
    #[test]
    fn what_it_calls_clean_the_scanner_leaves_alone() {
        let key = "sk-test/SECRET+0248_abcdefGHIJ";
        let r = Redactor::new(Some(key));
        let mut texts: Vec<String> = vec![
            String::new(),
            "plain words, nothing else".into(),
            key.into(),
            key[..7].into(),
            format!("{} {}", &key[..7], &key[7..14]),
            key.to_uppercase(),
            format!("a{}\\u200b{}", &key[..5], &key[5..]),
            format!("{}\u{200B}{}", &key[..5], &key[5..]),
            format!("{}%2F{}", &key[..6], &key[8..]),
        ];
        texts.extend(r.base64.iter().map(|core| format!("token {core} end")));
        let alphabet: Vec<char> = format!("{key} .,\\%\u{200B}é").chars().collect();
        let mut seed: u64 = 0x0248;
        for _ in 0..4000 {
            let len = (seed % 24) as usize;
            let text: String = (0..len)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    alphabet[(seed >> 33) as usize % alphabet.len()]
                })
                .collect();
            texts.push(text);
        }
        let mut clean = 0;
        for text in &texts {
            if surely_clean(&r, text) {
                clean += 1;
                assert_eq!(scanned(&r, text), *text, "{text:?}");
            }
        }
        // The check is no vacuous `false`: most short random texts pass it.
        assert!(clean > 1000, "only {clean} of {} called clean", texts.len());
        for text in [key.to_owned(), format!("x{}", key.to_uppercase())] {
            assert!(!surely_clean(&r, &text), "{text}");
        }
    }

    /// A key cut by an escape or an invisible character into runs each
    /// shorter than a match, whose decoded text is one: each rule of the
    /// check alone sends it to the scanner, which redacts it.
    #[test]
    fn a_key_cut_by_what_the_scanner_decodes_is_not_called_clean() {
        let r = Redactor::new(Some("qwertyzxcvbn"));
        // And its base64 form, whose characters are mostly not the key's.
        let b64 = format!("token {} end", STANDARD.encode("qwertyzxcvbn"));
        for text in ["qwer\\u0074yzxc", "qwer%74yzxc", "qwert\u{200B}yzxc", &b64] {
            assert!(!surely_clean(&r, text), "{text:?}");
            assert!(r.redact(text).contains(super::super::REDACTED), "{text:?}");
        }
    }

    /// A reply's content as the providers send it: clean, and left alone.
    #[test]
    fn an_answer_without_the_key_is_clean() {
        let r = Redactor::new(Some("sk-fake"));
        let answer = r#"{"scene":"The rain fell on the quiet harbour as the boats came in."}"#;
        assert!(surely_clean(&r, answer));
        assert_eq!(r.redact(answer), answer);
    }
}
