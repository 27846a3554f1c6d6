//! Keeping an API key out of everything a provider sends back. A provider
//! (or a gateway in front of it) may echo the key in any encoding: as it
//! is, upper-cased, JSON-escaped (`\/`, `\u0073`), URL-encoded (`%2F`), or
//! base64-encoded inside a longer token. Every text that leaves a provider
//! adapter — error messages and reply content alike — passes through
//! [`Redactor::redact`].

use base64::Engine as _;
use base64::engine::GeneralPurpose;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use std::borrow::Cow;
use std::collections::HashSet;

/// What stands where a key was.
pub const REDACTED: &str = "[redacted]";

/// Finds a key in its foreseeable encodings.
#[derive(Clone, Default)]
pub struct Redactor {
    /// The key, lower-cased ASCII (matched case-insensitively).
    key: Vec<u8>,
    /// Every run of [`MIN_RUN`] consecutive bytes of `key`.
    runs: HashSet<Box<[u8]>>,
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
        let runs = key.windows(MIN_RUN.min(key.len())).map(Box::from).collect();
        Self { key, runs, base64 }
    }

    /// `text` with every run of [`MIN_RUN`] or more consecutive characters
    /// of the key, in any encoding above, replaced by `[redacted]`: a key
    /// echoed whole, cut in pieces, or with invisible characters (U+200B
    /// and the other Unicode format characters) put inside it.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.key.is_empty() {
            return Cow::Borrowed(text);
        }
        let decoded = Decoded::new(text);
        let spans = decoded.runs_of(&self.runs, MIN_RUN.min(self.key.len()));
        let mut out = if spans.is_empty() {
            Cow::Borrowed(text)
        } else {
            let mut s = String::with_capacity(text.len());
            let mut at = 0;
            for (start, end) in spans {
                s.push_str(&text[at..start]);
                s.push_str(REDACTED);
                at = end;
            }
            s.push_str(&text[at..]);
            Cow::Owned(s)
        };
        for core in &self.base64 {
            if out.contains(core.as_str()) {
                out = Cow::Owned(out.replace(core.as_str(), REDACTED));
            }
        }
        out
    }
}

/// The fewest consecutive characters of a key that are redacted where they
/// stand alone: fewer are too likely in any text to say anything.
pub const MIN_RUN: usize = 8;

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

/// A text decoded unit by unit (`\uXXXX`, `\/`, `%XX` or one character),
/// format characters left out, each decoded byte remembering where its unit
/// stood in the original.
struct Decoded {
    /// The decoded bytes, lower-cased ASCII.
    bytes: Vec<u8>,
    /// For each decoded byte, its unit's span in the original text.
    spans: Vec<(usize, usize)>,
}

impl Decoded {
    fn new(text: &str) -> Self {
        let raw = text.as_bytes();
        let hex = |s: &[u8]| {
            std::str::from_utf8(s)
                .ok()
                .and_then(|h| u32::from_str_radix(h, 16).ok())
        };
        let (mut bytes, mut spans) = (Vec::with_capacity(raw.len()), Vec::with_capacity(raw.len()));
        let mut i = 0;
        while i < raw.len() {
            let unit: (Option<u8>, usize) = match raw[i] {
                b'\\' if raw.get(i + 1) == Some(&b'u') => {
                    match raw.get(i + 2..i + 6).and_then(hex) {
                        Some(c) if c < 0x80 => (Some(c as u8), 6),
                        Some(c) if char::from_u32(c).is_some_and(is_format) => (None, 6),
                        _ => (Some(raw[i]), 1),
                    }
                }
                b'\\' if matches!(raw.get(i + 1), Some(b'/' | b'\\' | b'"')) => {
                    (Some(raw[i + 1]), 2)
                }
                b'%' => match raw.get(i + 1..i + 3).and_then(hex) {
                    Some(c) => (Some(c as u8), 3),
                    None => (Some(raw[i]), 1),
                },
                b if b < 0x80 => (Some(b), 1),
                _ => {
                    // A character beyond ASCII: left out when invisible, else
                    // kept whole (it is in no key of ASCII).
                    let c = text[i..].chars().next().expect("a character starts here");
                    let len = c.len_utf8();
                    if is_format(c) {
                        (None, len)
                    } else {
                        bytes.extend_from_slice(&raw[i..i + len]);
                        spans.extend(std::iter::repeat_n((i, i + len), len));
                        i += len;
                        continue;
                    }
                }
            };
            if let (Some(byte), len) = unit {
                bytes.push(byte.to_ascii_lowercase());
                spans.push((i, i + len));
            }
            i += unit.1;
        }
        Self { bytes, spans }
    }

    /// The original spans of every stretch of the text made of `runs` (of
    /// `n` bytes each), widened to whole units, overlapping stretches merged.
    fn runs_of(&self, runs: &HashSet<Box<[u8]>>, n: usize) -> Vec<(usize, usize)> {
        let mut found: Vec<(usize, usize)> = Vec::new();
        for (start, window) in self.bytes.windows(n).enumerate() {
            if !runs.contains(window) {
                continue;
            }
            let (from, to) = (self.spans[start].0, self.spans[start + n - 1].1);
            match found.last_mut() {
                Some(last) if from <= last.1 => last.1 = last.1.max(to),
                _ => found.push((from, to)),
            }
        }
        found
    }
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
}
