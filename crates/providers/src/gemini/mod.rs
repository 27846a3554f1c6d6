//! Google's Gemini API (the Generative Language API's `generateContent`
//! and `streamGenerateContent?alt=sse`, the key in `x-goog-api-key`): the
//! system instruction apart, the conversation as `contents` of `user` and
//! `model` turns made of parts (text, `inlineData` images, `functionCall`,
//! `functionResponse`), native structured output as `responseMimeType:
//! application/json` with `responseJsonSchema`, the call's tools as
//! `functionDeclarations` with a `toolConfig` mode, the attempt's budget
//! as `maxOutputTokens`, and the call's thinking as `thinkingConfig`.

mod answer;
pub(crate) mod embeddings;
#[cfg(test)]
mod tests;
mod thinking;

use super::adapter::{Delivery, ModelPath, WireFormat};
use super::embeddings::EmbeddingsFormat;
use super::http::ApiKey;
use super::upstream::{KeyHeader, Upstream};
use answer::{Folded, Response};
use callai_engine::{ProviderFailure, ProviderReply, ProviderRequest};
use callai_wire::{Image, ImageSource, Message, Role, StructuredOutput, ToolChoice as Choice};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::marker::PhantomData;

/// The Gemini API wire format, its embeddings served by `E` (the Gemini
/// API's `batchEmbedContents`, or Vertex AI's `:predict`).
#[derive(Debug)]
pub struct GeminiWire<E = embeddings::GeminiEmbeddings>(PhantomData<E>);

/// A `generateContent` request body, borrowing from the request.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    contents: Vec<Content<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<Content<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tools<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<ToolConfig<'a>>,
    /// The host's [`GenerationConfig`], with the fields of the config's
    /// `extraBody.generationConfig` it does not set.
    generation_config: Value,
    /// The rest of the config's `extraBody` (`safetySettings`,
    /// `cachedContent`, …).
    #[serde(flatten)]
    extra: Cow<'a, Map<String, Value>>,
}

/// One turn, or the system instruction (which has no role).
#[derive(Serialize)]
struct Content<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    parts: Vec<Part<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum Part<'a> {
    Text(Cow<'a, str>),
    InlineData {
        #[serde(rename = "mimeType")]
        mime_type: &'a str,
        data: &'a str,
    },
    FileData {
        #[serde(rename = "mimeType")]
        mime_type: &'static str,
        #[serde(rename = "fileUri")]
        file_uri: &'a str,
    },
    FunctionCall {
        #[serde(skip_serializing_if = "str::is_empty")]
        id: &'a str,
        name: &'a str,
        args: Cow<'a, RawValue>,
    },
    FunctionResponse {
        #[serde(skip_serializing_if = "str::is_empty")]
        id: &'a str,
        name: &'a str,
        response: Cow<'a, RawValue>,
    },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Tools<'a> {
    function_declarations: Vec<Declaration<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Declaration<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    parameters_json_schema: &'a Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolConfig<'a> {
    function_calling_config: CallingConfig<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CallingConfig<'a> {
    mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    allowed_function_names: Option<[&'a str; 1]>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig<'a> {
    max_output_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    response_mime_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_json_schema: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_config: Option<thinking::ThinkingConfig>,
}

/// A tool's result as the object `response` needs: the result itself when
/// it is a JSON object, else `{"result": TEXT}` (Gemini's own shape for a
/// plain result).
fn response(text: &str) -> Cow<'_, RawValue> {
    let trimmed = text.trim();
    if trimmed.starts_with('{')
        && let Ok(raw) = serde_json::from_str::<&RawValue>(trimmed)
    {
        return Cow::Borrowed(raw);
    }
    let wrapped =
        serde_json::to_string(&serde_json::json!({ "result": text })).expect("a string serializes");
    Cow::Owned(RawValue::from_string(wrapped).expect("just serialized"))
}

/// An image's part: inline bytes, or a URL as `fileData` (its type read
/// from its name; JPEG when it says none).
fn image(image: &Image) -> Part<'_> {
    match image.source() {
        Ok(ImageSource::Data { media_type, base64 }) => Part::InlineData {
            mime_type: media_type,
            data: base64,
        },
        Ok(ImageSource::Url(_)) | Err(_) => {
            let path = image.url.split(['?', '#']).next().unwrap_or_default();
            let ext = path.rsplit('.').next().unwrap_or_default();
            let mime_type = match ext.to_ascii_lowercase().as_str() {
                "png" => "image/png",
                "webp" => "image/webp",
                "gif" => "image/gif",
                "heic" => "image/heic",
                _ => "image/jpeg",
            };
            Part::FileData {
                mime_type,
                file_uri: &image.url,
            }
        }
    }
}

/// The name of the tool call `id` of an earlier turn (a function response
/// names its function).
fn called<'a>(messages: &'a [Message], id: &str) -> &'a str {
    messages
        .iter()
        .flat_map(|m| &m.tool_calls)
        .find(|c| c.id == id)
        .map_or("", |c| c.name.as_str())
}

/// The parts of message `m` of `messages`.
fn parts<'a>(messages: &'a [Message], m: &'a Message) -> Vec<Part<'a>> {
    if m.role == Role::Tool {
        let id = m.tool_call_id.as_deref().unwrap_or_default();
        return vec![Part::FunctionResponse {
            id,
            name: called(messages, id),
            response: response(&m.content),
        }];
    }
    let text = (!m.content.is_empty()).then(|| Part::Text(Cow::Borrowed(&m.content)));
    m.images
        .iter()
        .map(image)
        .chain(text)
        .chain(m.tool_calls.iter().map(|c| Part::FunctionCall {
            id: &c.id,
            name: &c.name,
            args: super::adapter::object(&c.arguments),
        }))
        .collect()
}

/// The tools of a body and how the model must use them.
fn tools(r: &ProviderRequest) -> (Vec<Tools<'_>>, Option<ToolConfig<'_>>) {
    let Some(offered) = r.tools.as_ref() else {
        return (Vec::new(), None);
    };
    let declarations = offered
        .tools
        .iter()
        .map(|t| Declaration {
            name: &t.name,
            description: t.description.as_deref(),
            parameters_json_schema: &t.parameters,
        })
        .collect();
    let (mode, allowed) = match &offered.choice {
        Choice::Auto => ("AUTO", None),
        Choice::None => ("NONE", None),
        Choice::Required => ("ANY", None),
        Choice::Tool(name) => ("ANY", Some([name.as_str()])),
    };
    let config = ToolConfig {
        function_calling_config: CallingConfig {
            mode,
            allowed_function_names: allowed,
        },
    };
    let tools = vec![Tools {
        function_declarations: declarations,
    }];
    (tools, Some(config))
}

/// Whether `model` can name an endpoint: letters, digits, `.`, `-`, `_`
/// (no `/`, `?` or `:` that would make another path of the key's host).
fn plain(model: &str) -> bool {
    !model.is_empty()
        && model
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// The model name of `model` (`models/gemini-2.5-flash`, as Google's own
/// listings name it, too), or why it can name no endpoint.
pub(crate) fn model_name(model: &str) -> Result<&str, String> {
    let name = model.strip_prefix("models/").unwrap_or(model);
    match plain(name) {
        true => Ok(name),
        false => Err(format!(
            "the model {model:?} is not a Gemini model name (letters, digits, '.', '-', '_')"
        )),
    }
}

impl<E: EmbeddingsFormat> WireFormat for GeminiWire<E> {
    /// Unused: every endpoint names its model ([`WireFormat::path_for`]).
    const PATH: &'static str = "/models";
    /// A call's `thinking` becomes `thinkingConfig`; earlier turns'
    /// thinking blocks (another provider's signatures) are not sent.
    const THINKING: bool = true;
    type Embeddings = E;
    const NATIVE_TERMS: &'static [&'static str] = &[
        "responseJsonSchema",
        "response_json_schema",
        "responseMimeType",
        "response_mime_type",
        "JSON mode",
    ];

    fn takes_reasoning(model: &str) -> bool {
        thinking::thinks(model)
    }

    fn path_for(model: &str, delivery: Delivery) -> Option<Result<ModelPath, String>> {
        let name = match model_name(model) {
            Ok(name) => name,
            Err(why) => return Some(Err(why)),
        };
        Some(Ok(match delivery {
            Delivery::Whole => (format!("/models/{name}:generateContent"), &[]),
            Delivery::Streamed => (
                format!("/models/{name}:streamGenerateContent"),
                &[("alt", "sse")],
            ),
        }))
    }

    fn headers(key: Option<&ApiKey>, key_header: KeyHeader) -> Vec<(&'static str, String)> {
        key.map(|k| key_header.header(k.expose()))
            .into_iter()
            .collect()
    }

    /// The request body for one attempt: system-role messages join the
    /// system instruction; the others are `user` and `model` turns (a
    /// tool's result is the user's), consecutive turns of one role merged.
    fn body(_model: &str, r: &ProviderRequest, _: Delivery, upstream: &Upstream) -> Vec<u8> {
        // Thinking blocks and breakpoints are another API's; Gemini's
        // assistant is the `model`.
        let (system, said) = crate::conversation::conversation(r);
        let mut contents: Vec<Content<'_>> = Vec::new();
        for m in said {
            let role = if m.role == "assistant" {
                "model"
            } else {
                "user"
            };
            let parts = parts(&r.messages, m.message);
            match contents.last_mut() {
                Some(last) if last.role == Some(role) => last.parts.extend(parts),
                _ => contents.push(Content {
                    role: Some(role),
                    parts,
                }),
            }
        }
        let system_instruction = (!system.is_empty()).then(|| Content {
            role: None,
            parts: vec![Part::Text(Cow::Owned(system.join("\n\n")))],
        });
        let native = r
            .structured
            .as_ref()
            .filter(|s| s.mode == StructuredOutput::Native);
        let (tools, tool_config) = tools(r);
        let own = GenerationConfig {
            max_output_tokens: r.max_tokens,
            temperature: r.temperature,
            stop_sequences: &r.stop_sequences,
            response_mime_type: native.map(|_| "application/json"),
            response_json_schema: native.map(|s| &*s.schema),
            thinking_config: thinking::config(r),
        };
        let own = serde_json::to_value(own).expect("a generationConfig serializes");
        let (generation_config, extra) = thinking::merged(own, &upstream.extra_body);
        let body = Body {
            contents,
            system_instruction,
            tools,
            tool_config,
            generation_config,
            extra,
        };
        serde_json::to_vec(&body).expect("a generateContent body serializes")
    }

    type Answer = Response;
    type Event = Response;

    fn event(kind: &str, data: &str) -> serde_json::Result<Self::Event> {
        super::adapter::by_data(kind, data)
    }
    type Folded = Folded;

    fn reply(answer: Response) -> Result<ProviderReply, ProviderFailure> {
        let mut folded = Folded::default();
        folded.fold(answer)?;
        folded.into_reply(false)
    }

    /// One streamed chunk: a `GenerateContentResponse` of its own, whose
    /// parts add to the reply's.
    fn fold(acc: &mut Folded, event: Response) -> Result<Option<String>, ProviderFailure> {
        acc.fold(event)
    }

    fn done(_: &mut Folded) {}

    fn finish(acc: Folded) -> Result<ProviderReply, ProviderFailure> {
        acc.into_reply(true)
    }
}
