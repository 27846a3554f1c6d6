//! An image in a user's message: a `https` URL the provider fetches, or a
//! `data:` URL carrying the bytes. The host reads what it needs of one
//! (its kind, media type and size) without decoding it.

use crate::error::CallError;
use serde::{Deserialize, Serialize};

/// The media types a `data:` URL may carry: what both OpenAI and Anthropic
/// take.
pub const IMAGE_MEDIA_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// One image part of a message.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Image {
    /// `https://…`, or `data:image/png;base64,…`.
    pub url: String,
    /// OpenAI's `detail` (`auto`, `low`, `high`), passed on where a provider
    /// takes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Where an image's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageSource<'a> {
    /// At this `https` URL.
    Url(&'a str),
    /// Inline, base64.
    Data {
        /// `image/png`, …
        media_type: &'a str,
        /// The base64 text (standard alphabet, padded).
        base64: &'a str,
    },
}

impl Image {
    /// An image at `url` (`https://…` or a `data:` URL).
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            detail: None,
        }
    }

    /// Where its bytes are, or what is wrong with its URL.
    pub fn source(&self) -> Result<ImageSource<'_>, String> {
        if let Some(rest) = self.url.strip_prefix("data:") {
            let Some((media_type, base64)) = rest.split_once(";base64,") else {
                return Err("a data: URL must be data:MEDIA-TYPE;base64,DATA".into());
            };
            if !IMAGE_MEDIA_TYPES.contains(&media_type) {
                return Err(format!(
                    "media type {media_type:?} is not one of {IMAGE_MEDIA_TYPES:?}"
                ));
            }
            if !is_base64(base64) {
                return Err("the data of a data: URL is not padded standard base64".into());
            }
            return Ok(ImageSource::Data { media_type, base64 });
        }
        let scheme_ok = self
            .url
            .get(..8)
            .is_some_and(|s| s.eq_ignore_ascii_case("https://"));
        if scheme_ok && self.url.len() > 8 {
            Ok(ImageSource::Url(&self.url))
        } else {
            Err("must be an https:// URL or a data: URL".into())
        }
    }

    /// The size of the bytes a `data:` URL carries (`None` for a URL the
    /// provider fetches).
    pub fn data_bytes(&self) -> Option<u64> {
        match self.source() {
            Ok(ImageSource::Data { base64, .. }) => Some(decoded_len(base64)),
            _ => None,
        }
    }

    /// Checks the image at `field` (`messages[0].images[1]`).
    pub(crate) fn check(&self, field: &str) -> Result<(), CallError> {
        self.source()
            .map(|_| ())
            .map_err(|why| CallError::validation(format!("{field}.url"), why))?;
        match self.detail.as_deref() {
            None | Some("auto" | "low" | "high") => Ok(()),
            Some(other) => Err(CallError::validation(
                format!("{field}.detail"),
                format!("must be auto, low or high, got {other:?}"),
            )),
        }
    }
}

/// Whether `text` is padded standard base64 (RFC 4648 §4). Checked by hand
/// rather than decoded: the host never needs the bytes, only that a
/// provider will read them.
fn is_base64(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.is_empty() || !bytes.len().is_multiple_of(4) {
        return false;
    }
    let body = text.trim_end_matches('=');
    bytes.len() - body.len() <= 2
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// The bytes padded base64 `text` decodes to.
fn decoded_len(text: &str) -> u64 {
    let padding = text.len() - text.trim_end_matches('=').len();
    (text.len() / 4 * 3 - padding) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_https_or_data_of_an_image_type() {
        let ok = |url: &str| Image::new(url).source().is_ok();
        assert!(ok("https://example.com/cat.png"));
        assert!(ok("HTTPS://example.com/cat.png"));
        assert!(ok("data:image/png;base64,iVBORw0KGgo="));
        assert!(!ok("http://example.com/cat.png"), "not over TLS");
        assert!(!ok("file:///etc/passwd"));
        assert!(!ok("https://"));
        assert!(!ok("data:text/html;base64,PGI+"));
        assert!(!ok("data:image/png,raw"));
        assert!(!ok("data:image/png;base64,abc"), "not a multiple of 4");
        assert!(!ok("data:image/png;base64,ab-_"), "the URL-safe alphabet");
        assert!(!ok("data:image/png;base64,a==="));
    }

    #[test]
    fn the_size_is_what_the_data_decodes_to() {
        assert_eq!(
            Image::new("data:image/png;base64,AAAA").data_bytes(),
            Some(3)
        );
        assert_eq!(
            Image::new("data:image/png;base64,AAA=").data_bytes(),
            Some(2)
        );
        assert_eq!(
            Image::new("data:image/png;base64,AA==").data_bytes(),
            Some(1)
        );
        assert_eq!(Image::new("https://example.com/a.png").data_bytes(), None);
    }

    #[test]
    fn a_bad_detail_is_refused_naming_it() {
        let image = Image {
            url: "https://example.com/a.png".into(),
            detail: Some("ultra".into()),
        };
        let err = image.check("messages[0].images[0]").unwrap_err();
        assert_eq!(err.field(), Some("messages[0].images[0].detail"));
    }
}
