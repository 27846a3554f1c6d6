//! No image bytes kept: a request's key in a run log keeps each inline
//! image as its media type, SHA-256 and size (replay compares keys made
//! the same way, so a run replays when its images are the same bytes), and
//! any other JSON a host keeps (a run's input, a trace's text) can have
//! its `data:` URLs replaced the same way.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Replaces each `data:` URL under `messages[].images[]` of a request's
/// JSON by its media type, the SHA-256 of its text and its length. A URL
/// the provider fetches is kept: it is not the image.
pub fn without_image_bytes(key: &mut Value) {
    let Some(messages) = key.get_mut("messages").and_then(Value::as_array_mut) else {
        return;
    };
    let images = messages
        .iter_mut()
        .filter_map(|m| m.get_mut("images").and_then(Value::as_array_mut))
        .flatten();
    for image in images {
        let Some(url) = image.get("url").and_then(Value::as_str) else {
            continue;
        };
        let Some(rest) = url.strip_prefix("data:") else {
            continue;
        };
        let media_type = rest.split([';', ',']).next().unwrap_or_default().to_owned();
        let digest = hex::encode(Sha256::digest(url.as_bytes()));
        let length = url.len();
        let Some(fields) = image.as_object_mut() else {
            continue;
        };
        fields.remove("url");
        fields.insert(
            "inline".into(),
            json!({"mediaType": media_type, "sha256": digest, "urlBytes": length}),
        );
    }
}

/// A `data:` URL of base64 bytes as a short text that says what it was
/// and not its bytes: `data:MEDIA;sha256=HEX;bytes=N` (N the URL's length).
/// Any other text as it is (`None`).
pub fn digest_of_data_url(text: &str) -> Option<String> {
    let rest = text.strip_prefix("data:")?;
    let (head, _) = rest.split_once(',')?;
    if !head.ends_with(";base64") {
        return None;
    }
    let media_type = head.split(';').next().unwrap_or_default();
    let digest = hex::encode(Sha256::digest(text.as_bytes()));
    Some(format!(
        "data:{media_type};sha256={digest};bytes={}",
        text.len()
    ))
}

/// Replaces every `data:` URL of base64 bytes anywhere in `value` (a run's
/// input, any JSON) by [`digest_of_data_url`]'s text; whether any was.
pub fn data_urls_digested(value: &mut Value) -> bool {
    match value {
        Value::String(text) => match digest_of_data_url(text) {
            Some(digest) => {
                *text = digest;
                true
            }
            None => false,
        },
        // Every one is digested: no short cut at the first.
        Value::Array(items) => items
            .iter_mut()
            .map(data_urls_digested)
            .fold(false, |a, d| a | d),
        Value::Object(fields) => fields
            .values_mut()
            .map(data_urls_digested)
            .fold(false, |a, d| a | d),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_images_are_kept_as_a_hash_and_a_size_and_urls_as_they_are() {
        let data = format!("data:image/png;base64,{}", "QUJD".repeat(1000));
        let mut key = json!({"messages": [
            {"role": "user", "content": "look", "images": [{"url": data, "detail": "low"},
                                                           {"url": "https://example.com/a.png"}]},
            {"role": "assistant", "content": "a cat"}]});
        let mut again = key.clone();
        without_image_bytes(&mut key);
        let text = key.to_string();
        assert!(!text.contains("QUJD"), "{text}");
        let inline = &key["messages"][0]["images"][0];
        assert_eq!(inline["inline"]["mediaType"], "image/png");
        assert_eq!(inline["inline"]["urlBytes"], data.len());
        assert_eq!(inline["detail"], "low");
        assert_eq!(
            key["messages"][0]["images"][1]["url"],
            "https://example.com/a.png"
        );
        // The same bytes make the same key; others do not.
        without_image_bytes(&mut again);
        assert_eq!(key, again);
        let mut other = json!({"messages": [{"role": "user", "content": "look",
            "images": [{"url": data.replace("QUJD", "QUJE")}]}]});
        without_image_bytes(&mut other);
        assert_ne!(
            other["messages"][0]["images"][0],
            key["messages"][0]["images"][0]
        );
    }

    #[test]
    fn data_urls_anywhere_become_their_digest_and_other_text_stays() {
        let data = format!("data:image/jpeg;base64,{}", "QUJD".repeat(100));
        let mut input = json!({"premise": "a cat", "photos": [data, {"cover": data}],
                               "note": "data:text/plain,hello", "n": 3});
        assert!(data_urls_digested(&mut input));
        let text = input.to_string();
        assert!(!text.contains("QUJD"), "{text}");
        let digest = input["photos"][0].as_str().unwrap();
        assert!(
            digest.starts_with("data:image/jpeg;sha256=")
                && digest.ends_with(&format!(";bytes={}", data.len())),
            "{digest}"
        );
        assert_eq!(input["photos"][1]["cover"], input["photos"][0]);
        assert_eq!(
            input["note"], "data:text/plain,hello",
            "not base64: not an image"
        );
        assert!(!data_urls_digested(&mut json!({"a": "b"})));
    }
}
