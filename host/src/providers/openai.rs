//! OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp
//! server, LM Studio). Native structured output is
//! `response_format: {type: "json_schema"}`.

use super::http::{HttpClient, tokens};
use crate::provider::{
    BoxFuture, FailureKind, Provider, ProviderFailure, ProviderReply, ProviderRequest, StopReason,
};
use crate::request::Role;
use crate::result::StructuredMode;
use serde_json::{Value, json};

/// An OpenAI-compatible provider.
#[derive(Debug)]
pub struct OpenAi {
    http: HttpClient,
    base_url: String,
    model: String,
    native: bool,
}

impl OpenAi {
    /// A provider at `base_url` (e.g. `https://api.openai.com/v1`).
    pub fn new(http: HttpClient, base_url: &str, model: &str, native: bool) -> Self {
        Self {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            model: model.to_owned(),
            native,
        }
    }

    /// The request body for one attempt.
    pub fn body(&self, r: &ProviderRequest) -> Value {
        let mut messages = Vec::new();
        if let Some(system) = &r.system_prompt {
            messages.push(json!({"role": "system", "content": system}));
        }
        for m in &r.messages {
            let role = match m.role {
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::System => "system",
            };
            messages.push(json!({"role": role, "content": m.content}));
        }
        let mut body = json!({
            "model": r.model.as_deref().unwrap_or(&self.model),
            "messages": messages,
            "max_tokens": r.max_tokens,
        });
        if let Some(t) = r.temperature {
            body["temperature"] = t.into();
        }
        if !r.stop_sequences.is_empty() {
            body["stop"] = r.stop_sequences.clone().into();
        }
        if let Some(s) = &r.structured
            && s.mode == StructuredMode::Native
        {
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": s.schema, "strict": false},
            });
        }
        body
    }

    /// Reads a chat-completions response.
    pub fn reply(response: &Value) -> Result<ProviderReply, ProviderFailure> {
        let choice = response.pointer("/choices/0").ok_or_else(|| {
            ProviderFailure::new(
                FailureKind::Transient,
                Some(200),
                "the response has no choices",
            )
        })?;
        let message = &choice["message"];
        let refusal = message["refusal"].as_str().filter(|r| !r.is_empty());
        let stop = match (refusal, choice["finish_reason"].as_str()) {
            (Some(_), _) => StopReason::Refusal,
            (None, Some("stop")) => StopReason::Stop,
            (None, Some("length")) => StopReason::Length,
            (None, Some("content_filter")) => StopReason::ContentFilter,
            (None, Some("tool_calls" | "function_call")) => StopReason::ToolCall,
            _ => StopReason::Other,
        };
        let content = refusal.or(message["content"].as_str()).unwrap_or_default();
        let usage = response.get("usage");
        Ok(ProviderReply {
            content: content.to_owned(),
            stop,
            input_tokens: tokens(usage.and_then(|u| u.get("prompt_tokens"))),
            output_tokens: tokens(usage.and_then(|u| u.get("completion_tokens"))),
            model: response["model"].as_str().map(str::to_owned),
        })
    }
}

impl Provider for OpenAi {
    fn name(&self) -> &str {
        "openai"
    }

    fn default_model(&self) -> &str {
        &self.model
    }

    fn supports_native(&self) -> bool {
        self.native
    }

    fn complete<'a>(
        &'a self,
        request: &'a ProviderRequest,
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderFailure>> {
        Box::pin(async move {
            let url = format!("{}/chat/completions", self.base_url);
            let auth = self.http.key().map(|k| format!("Bearer {}", k.expose()));
            let headers: Vec<(&str, &str)> =
                auth.iter().map(|a| ("authorization", a.as_str())).collect();
            let body = self.body(request);
            self.http
                .attempt(
                    &url,
                    &headers,
                    &body,
                    request,
                    &["response_format", "json_schema"],
                    Self::reply,
                )
                .await
        })
    }
}
