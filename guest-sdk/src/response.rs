//! The result of a successful call, with its RFC 0248 `attempts`.

use callai_wire::{Attempts, CallResult, FinishReason, ToolCall, Usage};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A successful call.
#[derive(Debug, Clone, PartialEq)]
pub struct Response(CallResult);

impl From<CallResult> for Response {
    fn from(result: CallResult) -> Self {
        Self(result)
    }
}

impl Response {
    /// The text of a text call.
    pub fn content(&self) -> Option<&str> {
        self.0.content.as_deref()
    }

    /// The schema-valid JSON of a structured call.
    pub fn data(&self) -> Option<&Value> {
        self.0.data.as_ref()
    }

    /// The data of a structured call, deserialised.
    pub fn data_as<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        T::deserialize(self.0.data.as_ref().unwrap_or(&Value::Null))
    }

    /// The tool calls of the answer, each with arguments the host checked
    /// against its tool's `parameters` (empty when the model answered in
    /// text). Decode one with [`crate::arguments_as`].
    pub fn tool_calls(&self) -> &[ToolCall] {
        self.0.tool_calls.as_deref().unwrap_or_default()
    }

    /// The final attempt's usage (RFC 0248 §A.4).
    pub fn usage(&self) -> Option<Usage> {
        self.0.usage
    }

    /// The final attempt's finish reason.
    pub fn finish_reason(&self) -> Option<FinishReason> {
        self.0.finish_reason
    }

    /// The model that answered.
    pub fn model(&self) -> Option<&str> {
        self.0.model.as_deref()
    }

    /// Every provider request this call made. `None` when the host does not
    /// advertise `callAccounting.attempts`.
    pub fn attempts(&self) -> Option<Attempts> {
        self.0.attempts
    }

    /// The result as its wire type.
    pub fn as_wire(&self) -> &CallResult {
        &self.0
    }

    /// The result's wire JSON (camelCase), fields absent when the host left them out.
    pub fn to_json(&self) -> Value {
        self.0.to_json()
    }
}
