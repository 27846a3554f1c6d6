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

/// What stands where a key was.
pub const REDACTED: &str = "[redacted]";

/// Finds a key in its foreseeable encodings.
#[derive(Clone, Default)]
pub struct Redactor {
    /// The key, lower-cased ASCII (matched case-insensitively).
    key: Vec<u8>,
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
        Self {
            key: raw.to_ascii_lowercase(),
            base64,
        }
    }

    /// `text` with every occurrence of the key, in any encoding above,
    /// replaced by `[redacted]`.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.key.is_empty() {
            return Cow::Borrowed(text);
        }
        let decoded = Decoded::new(text);
        let spans = decoded.find(&self.key);
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

/// A text decoded unit by unit (`\uXXXX`, `\/`, `%XX` or one byte), each
/// unit remembering where it stood in the original.
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
            let (byte, len) = match raw[i] {
                b'\\' if raw.get(i + 1) == Some(&b'u') => {
                    match raw.get(i + 2..i + 6).and_then(hex).filter(|c| *c < 0x80) {
                        Some(c) => (c as u8, 6),
                        None => (raw[i], 1),
                    }
                }
                b'\\' if matches!(raw.get(i + 1), Some(b'/' | b'\\' | b'"')) => (raw[i + 1], 2),
                b'%' => match raw.get(i + 1..i + 3).and_then(hex) {
                    Some(c) => (c as u8, 3),
                    None => (raw[i], 1),
                },
                b => (b, 1),
            };
            bytes.push(byte.to_ascii_lowercase());
            spans.push((i, i + len));
            i += len;
        }
        Self { bytes, spans }
    }

    /// The original spans of every (non-overlapping) occurrence of
    /// `needle`, widened to whole characters.
    fn find(&self, needle: &[u8]) -> Vec<(usize, usize)> {
        let mut found = Vec::new();
        let mut from = 0;
        while let Some(pos) = self.bytes[from..]
            .windows(needle.len())
            .position(|w| w == needle)
        {
            let start = from + pos;
            let end = start + needle.len();
            found.push((self.spans[start].0, self.spans[end - 1].1));
            from = end;
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
        for text in ["", "plain text", "%zz \\uZZZZ \\", "ünïcödé ✓ sk-test/"] {
            assert_eq!(r.redact(text), text);
        }
        assert_eq!(Redactor::new(None).redact(KEY), KEY);
        assert_eq!(format!("{r:?}"), "Redactor([redacted])");
    }
}
