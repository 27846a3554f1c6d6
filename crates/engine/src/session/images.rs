//! No image bytes in a run log: a request's key keeps each inline image
//! as its SHA-256 and size. Replay compares keys made the same way, so a
//! run replays when its images are the same bytes.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Replaces each `data:` URL under `messages[].images[]` of a request's
/// JSON by its media type, the SHA-256 of its text and its length. A URL
/// the provider fetches is kept: it is not the image.
pub(crate) fn without_image_bytes(key: &mut Value) {
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
}
