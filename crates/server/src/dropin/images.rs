//! Images on the drop-ins: OpenAI's `image_url` parts, the Responses
//! API's `input_image` parts and Anthropic's `image` blocks, each read into
//! the engine's [`Image`] (a URL or a `data:` URL), checked where the
//! client can tell which part was wrong.

use super::parts::{ImageSourcePart, ImageUrlPart, TextOrParts};
use crate::error::ApiError;
use callai_engine::wire::Image;
use serde_json::value::RawValue;

/// The image of an OpenAI `image_url` part at `param`
/// (`messages[0].content[1]`).
pub fn from_image_url(param: &str, part: ImageUrlPart) -> Result<Image, ApiError> {
    let image = Image {
        url: part.url,
        detail: part.detail,
    };
    checked(image, &format!("{param}.image_url"))
}

/// The image of a Responses `input_image` part whose `image_url` (at
/// `param`) is `url`.
pub fn from_url(param: &str, url: String, detail: Option<String>) -> Result<Image, ApiError> {
    checked(Image { url, detail }, param)
}

/// The image of an Anthropic `image` block at `param`: its base64 bytes
/// as a `data:` URL, or its URL.
pub fn from_source(param: &str, source: Option<Box<RawValue>>) -> Result<Image, ApiError> {
    let field = format!("{param}.source");
    let source = source
        .map(|raw| serde_json::from_str::<ImageSourcePart>(raw.get()))
        .transpose()
        .map_err(|e| ApiError::invalid(&field, format!("not an image source: {e}")))?;
    let url = match source {
        Some(ImageSourcePart::Base64 { media_type, data }) => {
            format!("data:{media_type};base64,{data}")
        }
        Some(ImageSourcePart::Url { url }) => url,
        None => return Err(ApiError::invalid(&field, "is required")),
    };
    checked(Image::new(url), &field)
}

/// `image` when its URL is one a provider takes, else the refusal naming
/// `param`.
fn checked(image: Image, param: &str) -> Result<Image, ApiError> {
    match image.source() {
        Ok(_) => match image.detail.as_deref() {
            None | Some("auto" | "low" | "high") => Ok(image),
            Some(other) => Err(ApiError::invalid(
                &format!("{param}.detail"),
                format!("must be auto, low or high, got {other:?}"),
            )),
        },
        Err(why) => Err(ApiError::invalid(param, why)),
    }
}

/// A user's OpenAI content: its text parts joined, and its `image_url`
/// parts in order; any other part refused naming it.
pub fn user_content(param: &str, content: TextOrParts) -> Result<(String, Vec<Image>), ApiError> {
    let parts = match content {
        TextOrParts::Text(text) => return Ok((text, Vec::new())),
        TextOrParts::Parts(parts) => parts,
    };
    let (mut text, mut images) = (String::new(), Vec::new());
    for (j, part) in parts.into_iter().enumerate() {
        let param = format!("{param}[{j}]");
        match (part.kind.as_deref(), part.text, part.image_url) {
            (Some("text"), Some(t), _) => text.push_str(&t),
            (Some("image_url"), _, Some(image)) => images.push(from_image_url(&param, image)?),
            (Some("image_url"), _, None) => {
                return Err(ApiError::invalid(
                    &format!("{param}.image_url"),
                    "is required",
                ));
            }
            (kind, _, _) => {
                return Err(ApiError::invalid(
                    &param,
                    format!(
                        "a part of type {:?}: this host takes text and image_url parts",
                        kind.unwrap_or("?")
                    ),
                ));
            }
        }
    }
    Ok((text, images))
}
