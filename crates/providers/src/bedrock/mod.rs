//! Amazon Bedrock's Converse API (`bedrock-runtime`'s
//! `/model/MODEL/converse` and `/converse-stream`), which speaks for every
//! model Bedrock offers through it: the system prompt apart, the
//! conversation as `user` and `assistant` turns of content blocks (text,
//! images as bytes, `toolUse`, `toolResult`), the attempt's budget as
//! `inferenceConfig.maxTokens`, the call's tools as `toolConfig`, and
//! native structured output as a forced tool (`respond`), as on
//! Anthropic's own API ([`body`]). A client's prompt-caching breakpoints
//! become `cachePoint` blocks and its extended thinking is passed to the
//! model; the answer's reasoning comes back as thinking blocks. Requests
//! are signed with SigV4 ([`sign`]) or carry a Bedrock API key as a bearer
//! token.

mod answer;
mod body;
pub(crate) mod credentials;
pub(crate) mod sign;
#[cfg(test)]
mod tests;
mod tools;

use super::adapter::{Delivery, ModelPath, WireFormat};
use super::http::ApiKey;
use super::upstream::{KeyHeader, Upstream};
use answer::{Converse, Event, Folded};
use callai_engine::config::{ConfigError, invalid};
use callai_engine::{ProviderFailure, ProviderReply, ProviderRequest};
use callai_wire::ImageSource;

/// The forced tool of native structured output.
const TOOL: &str = "respond";

/// The Converse wire format.
#[derive(Debug)]
pub struct BedrockWire;

/// The model ID as one path segment: Bedrock's IDs hold `:` (a version)
/// and an ARN `/`, both percent-encoded, as AWS's SDKs send them.
fn segment(model: &str) -> String {
    url::form_urlencoded::byte_serialize(model.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// Checks a Bedrock section `name`'s `region` (required, spelt as AWS
/// spells one) and `profile` (a name, and not beside a Bedrock API key:
/// `key_named` says whether `apiKeyEnv` names one).
pub(crate) fn check_section(
    name: &str,
    region: Option<&str>,
    profile: Option<&str>,
    key_named: bool,
) -> Result<(), ConfigError> {
    let key = |k: &str| format!("providers.{name}.{k}");
    match profile {
        Some("") => return Err(invalid(&key("profile"), "is empty".into())),
        Some(_) if key_named => {
            let why = "signs with a profile's credentials, and apiKeyEnv names a Bedrock API \
                       key: leave one of them out";
            return Err(invalid(&key("profile"), why.into()));
        }
        _ => {}
    }
    let Some(region) = region else {
        let why = "is required for a Bedrock-kind provider (\"us-east-1\", …)";
        return Err(invalid(&key("region"), why.into()));
    };
    let plain = !region.is_empty()
        && region
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    match plain {
        true => Ok(()),
        false => Err(invalid(
            &key("region"),
            format!("is lower-case letters, digits and '-', got {region:?}"),
        )),
    }
}

impl WireFormat for BedrockWire {
    /// Unused: every endpoint names its model ([`WireFormat::path_for`]).
    const PATH: &'static str = "/model";
    const NATIVE_TERMS: &'static [&'static str] = &["toolChoice", "toolConfig", "tool_choice"];
    const PROMPT_CACHE: bool = true;
    const THINKING: bool = true;
    type Embeddings = crate::embeddings::NoEmbeddings;

    fn path_for(model: &str, delivery: Delivery) -> Option<Result<ModelPath, String>> {
        if model.is_empty() || model.chars().any(char::is_control) {
            return Some(Err(format!(
                "the model {model:?} is not a Bedrock model ID"
            )));
        }
        let action = match delivery {
            Delivery::Whole => "converse",
            Delivery::Streamed => "converse-stream",
        };
        Some(Ok((format!("/model/{}/{action}", segment(model)), &[])))
    }

    /// A Bedrock API key is a bearer token; SigV4 signs each request when
    /// there is none.
    fn headers(key: Option<&ApiKey>, key_header: KeyHeader) -> Vec<(&'static str, String)> {
        key.map(|k| key_header.header(k.expose()))
            .into_iter()
            .collect()
    }

    fn unsendable(request: &ProviderRequest) -> Option<String> {
        let url = request.messages.iter().enumerate().find_map(|(i, m)| {
            let j = m
                .images
                .iter()
                .position(|image| !matches!(image.source(), Ok(ImageSource::Data { .. })))?;
            Some((i, j))
        });
        url.map(|(i, j)| {
            format!(
                "messages[{i}].images[{j}]: Bedrock takes an image's bytes, not a URL (send it \
                 as a data: URL)"
            )
        })
    }

    fn body(_model: &str, r: &ProviderRequest, _: Delivery, upstream: &Upstream) -> Vec<u8> {
        body::body(r, upstream)
    }

    type Answer = Converse;
    type Event = Event;
    type Folded = Folded;

    fn reply(answer: Converse) -> Result<ProviderReply, ProviderFailure> {
        answer.into_reply()
    }

    fn event(kind: &str, data: &str) -> serde_json::Result<Event> {
        Event::read(kind, data)
    }

    fn fold(acc: &mut Folded, event: Event) -> Result<Option<String>, ProviderFailure> {
        acc.fold(event)
    }

    fn done(_: &mut Folded) {}

    fn finish(acc: Folded) -> Result<ProviderReply, ProviderFailure> {
        acc.into_reply()
    }

    /// A native structured request's answer is the input of its `respond`
    /// call: that call is the reply's text, not a tool call.
    fn settle(reply: &mut ProviderReply, request: &ProviderRequest) {
        super::adapter::settle_forced_tool(reply, request, TOOL);
    }
}
