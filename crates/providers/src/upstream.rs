//! What goes upstream beyond the call itself, as a provider's config says:
//! the field the token limit is sent in (`maxTokensField`), extra headers
//! and query parameters (an Azure `api-version`, an OpenRouter referer),
//! and fields merged into each request body (`extraBody`). Checked at
//! start-up: none may carry the key, and a body field the host sets itself
//! is refused, naming it.

use callai_engine::config::{ConfigError, invalid};
use callai_engine::wire::TokenLimitField;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// `maxTokensField`: which field carries an attempt's output budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    /// `max_tokens`.
    MaxTokens,
    /// `max_completion_tokens` (OpenAI's reasoning models take only it).
    MaxCompletionTokens,
    /// By the model: `max_completion_tokens` for OpenAI's reasoning
    /// families (o1, o3, o4, gpt-5 and their dated names), `max_tokens`
    /// for every other.
    #[default]
    Auto,
}

impl MaxTokensField {
    /// Whether a request to `model` sends `max_completion_tokens`; under
    /// `auto`, a client that sent it (a drop-in's) keeps it, as every
    /// OpenAI chat model takes it, while a client's `max_tokens` goes by
    /// the model (a reasoning model refuses it).
    pub fn completion_tokens_for(self, model: &str, client: Option<TokenLimitField>) -> bool {
        match self {
            Self::MaxTokens => false,
            Self::MaxCompletionTokens => true,
            Self::Auto => {
                client == Some(TokenLimitField::MaxCompletionTokens) || reasoning_family(model)
            }
        }
    }
}

/// `keyHeader`: the header the API key travels in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyHeader {
    /// `Authorization: Bearer KEY` (OpenAI and most compatible servers).
    #[serde(rename = "authorization")]
    Authorization,
    /// `api-key: KEY` (Azure OpenAI's API keys).
    #[serde(rename = "api-key")]
    ApiKey,
    /// `x-api-key: KEY` (Anthropic).
    #[serde(rename = "x-api-key")]
    XApiKey,
    /// `x-goog-api-key: KEY` (Google's Gemini API).
    #[serde(rename = "x-goog-api-key")]
    XGoogApiKey,
}

impl KeyHeader {
    /// The header carrying `key`.
    pub fn header(self, key: &str) -> (&'static str, String) {
        match self {
            Self::Authorization => ("authorization", format!("Bearer {key}")),
            Self::ApiKey => ("api-key", key.to_owned()),
            Self::XApiKey => ("x-api-key", key.to_owned()),
            Self::XGoogApiKey => ("x-goog-api-key", key.to_owned()),
        }
    }
}

/// Whether `model` (its last `/` segment: `openai/o3` too) is of OpenAI's
/// reasoning families, which refuse `max_tokens`.
pub(crate) fn reasoning_family(model: &str) -> bool {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    ["o1", "o3", "o4", "gpt-5"].iter().any(|family| {
        name.strip_prefix(family)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '.', '_']))
    })
}

/// What a provider's config adds to every request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Upstream {
    /// The token limit's field.
    pub max_tokens_field: MaxTokensField,
    /// Merged into each body.
    pub extra_body: Map<String, Value>,
}

/// The body fields each kind's requests set themselves.
const HOST_SET: [&str; 22] = [
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "stop",
    "stop_sequences",
    "response_format",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "stream",
    "stream_options",
    "system",
    "input_schema",
    "output_config",
    // The Responses API's (`api = "responses"`), and a reasoning effort.
    "input",
    "instructions",
    "max_output_tokens",
    "text",
    "reasoning",
    "reasoning_effort",
];

/// Headers a config may not set: the key travels in its own, and the
/// others are the host's.
const HOST_HEADERS: [&str; 6] = [
    "authorization",
    "x-api-key",
    "api-key",
    "content-type",
    "content-length",
    "anthropic-version",
];

/// Checks what the section `name` adds upstream; `key` is the API key it
/// will send (none may hold it).
pub fn check(
    name: &str,
    headers: &BTreeMap<String, String>,
    query: &BTreeMap<String, String>,
    extra_body: &Map<String, Value>,
    key: Option<&str>,
) -> Result<(), ConfigError> {
    let at = |section: &str, field: &str| format!("providers.{name}.{section}.{field}");
    let holds_key = |value: &str| key.is_some_and(|k| !k.is_empty() && value.contains(k));
    for (header, value) in headers {
        let lower = header.to_ascii_lowercase();
        if HOST_HEADERS.contains(&lower.as_str()) {
            return Err(invalid(
                &at("headers", header),
                "is set by the host (the key goes in apiKeyEnv)".into(),
            ));
        }
        if reqwest::header::HeaderName::from_bytes(header.as_bytes()).is_err()
            || reqwest::header::HeaderValue::from_str(value).is_err()
        {
            return Err(invalid(
                &at("headers", header),
                "is not a header name and value HTTP allows".into(),
            ));
        }
        if holds_key(value) {
            return Err(invalid(
                &at("headers", header),
                "holds the API key: the key goes in apiKeyEnv only".into(),
            ));
        }
    }
    for (param, value) in query {
        if holds_key(value) {
            return Err(invalid(
                &at("query", param),
                "holds the API key: the key goes in apiKeyEnv only".into(),
            ));
        }
    }
    for (field, value) in extra_body {
        if HOST_SET.contains(&field.as_str()) {
            return Err(invalid(
                &at("extraBody", field),
                "is set by the host on every request; it cannot be overridden".into(),
            ));
        }
        if holds_key(&value.to_string()) {
            return Err(invalid(
                &at("extraBody", field),
                "holds the API key: the key goes in apiKeyEnv only".into(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_picks_completion_tokens_for_the_reasoning_families() {
        for model in [
            "o1",
            "o1-mini",
            "o3-2025-04-16",
            "o4-mini",
            "gpt-5",
            "gpt-5-mini",
            "gpt-5.1",
            "openai/o3",
        ] {
            let client = Some(TokenLimitField::MaxTokens);
            assert!(
                MaxTokensField::Auto.completion_tokens_for(model, client),
                "{model}: a reasoning model refuses max_tokens, whatever the client sent"
            );
        }
        for model in [
            "gpt-4o-mini",
            "gpt-4.1",
            "o10x",
            "llama3",
            "claude-sonnet-4-5",
            "gpt-50",
        ] {
            assert!(
                !MaxTokensField::Auto.completion_tokens_for(model, None),
                "{model}"
            );
            assert!(
                MaxTokensField::Auto
                    .completion_tokens_for(model, Some(TokenLimitField::MaxCompletionTokens)),
                "{model}: the client's max_completion_tokens is kept"
            );
        }
        // A field the operator set wins over the client's.
        let client = Some(TokenLimitField::MaxCompletionTokens);
        assert!(MaxTokensField::MaxCompletionTokens.completion_tokens_for("llama3", None));
        assert!(!MaxTokensField::MaxTokens.completion_tokens_for("o3", client));
    }

    #[test]
    fn what_the_host_sets_and_the_key_are_refused_naming_them() {
        let map = |k: &str, v: &str| BTreeMap::from([(k.to_owned(), v.to_owned())]);
        let none = BTreeMap::new();
        let body = Map::new();
        let field = |r: Result<(), ConfigError>| r.unwrap_err().key().map(str::to_owned);
        assert_eq!(
            field(check("a", &map("Authorization", "x"), &none, &body, None)).as_deref(),
            Some("providers.a.headers.Authorization")
        );
        assert_eq!(
            field(check("a", &none, &map("k", "sk-1"), &body, Some("sk-1"))).as_deref(),
            Some("providers.a.query.k")
        );
        let mut extra = Map::new();
        extra.insert("messages".into(), Value::Null);
        assert_eq!(
            field(check("a", &none, &none, &extra, None)).as_deref(),
            Some("providers.a.extraBody.messages")
        );
        let mut fine = Map::new();
        fine.insert("top_k".into(), Value::from(3));
        assert!(
            check(
                "a",
                &map("x-title", "app"),
                &map("api-version", "1"),
                &fine,
                Some("sk")
            )
            .is_ok()
        );
    }
}
