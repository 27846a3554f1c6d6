//! A Converse request's `toolConfig`: the call's tools, the forced
//! `respond` tool of native structured output, the tool choice, and the
//! client's prompt-caching breakpoints on tools as `cachePoint` entries.

use super::TOOL;
use super::body::CachePoint;
use callai_engine::ProviderRequest;
use callai_wire::{Role, ToolChoice as Choice};
use serde::Serialize;
use serde_json::Value;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ToolConfig<'a> {
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<ToolChoice<'a>>,
}

/// An entry of `tools`: a tool, or a cache point ending the tools before
/// it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum Tool<'a> {
    ToolSpec(ToolSpec<'a>),
    CachePoint(CachePoint<'a>),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolSpec<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    input_schema: Json<'a>,
}

#[derive(Serialize)]
struct Json<'a> {
    json: &'a Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum ToolChoice<'a> {
    Auto {},
    Any {},
    Tool { name: &'a str },
}

fn spec<'a>(name: &'a str, description: Option<&'a str>, schema: &'a Value) -> Tool<'a> {
    Tool::ToolSpec(ToolSpec {
        name,
        description,
        input_schema: Json { json: schema },
    })
}

/// The tool config: the call's tools (each followed by its cache point,
/// where the client set one) and, for native structured output, the
/// `respond` tool (forced when the call offers none). Converse has no
/// `none` choice: a call that allows no tool sends none, unless earlier
/// turns used them (Bedrock then needs them declared).
pub(super) fn tool_config<'a>(
    r: &'a ProviderRequest,
    native: Option<&'a Value>,
) -> Option<ToolConfig<'a>> {
    let offered = r.tools.as_ref();
    let used = r
        .messages
        .iter()
        .any(|m| m.role == Role::Tool || !m.tool_calls.is_empty());
    let none = offered.is_none_or(|t| t.choice == Choice::None);
    if none && native.is_none() && !used {
        return None;
    }
    let cache = r.prompt_cache.as_deref();
    let mut tools: Vec<Tool<'a>> = Vec::new();
    for (i, tool) in offered.iter().flat_map(|t| t.tools.iter()).enumerate() {
        tools.push(spec(
            &tool.name,
            tool.description.as_deref(),
            &tool.parameters,
        ));
        if let Some(point) = cache.and_then(|c| c.tool(i)) {
            tools.push(Tool::CachePoint(CachePoint::of(point)));
        }
    }
    if let Some(schema) = native {
        let what = Some("Respond with a value that satisfies the input schema.");
        tools.push(spec(TOOL, what, schema));
    }
    let tool_choice = match (offered.map(|t| &t.choice), native) {
        (None | Some(Choice::None), Some(_)) => Some(ToolChoice::Tool { name: TOOL }),
        (None | Some(Choice::None), None) => None,
        (Some(Choice::Auto), None) => Some(ToolChoice::Auto {}),
        (Some(Choice::Auto | Choice::Required), Some(_)) | (Some(Choice::Required), None) => {
            Some(ToolChoice::Any {})
        }
        (Some(Choice::Tool(name)), _) => Some(ToolChoice::Tool { name }),
    };
    Some(ToolConfig { tools, tool_choice })
}
