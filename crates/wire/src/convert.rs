//! Conversions between these types and the bindings a WIT generator makes of
//! the `openwop:callai/types` interface. The host (wasmtime's `bindgen!`)
//! and the guest SDK (`wit_bindgen::generate!`) each generate their own
//! copies of those types; one invocation of [`wit_conversions!`] in each
//! makes every `From` between them and the wire types, so the mapping is
//! written once.

/// Implements `From` both ways between the wire types and the generated
/// types of `openwop:callai/types` found at `$wit` (a path to the generated
/// module), plus `TryFrom<$wit::CallRequest> for CallRequest` (its schema
/// text must parse).
#[macro_export]
macro_rules! wit_conversions {
    ($wit:path) => {
        const _: () = {
            use $crate::__private::serde_json;
            use $wit as wit;

            impl From<wit::Role> for $crate::Role {
                fn from(v: wit::Role) -> Self {
                    match v {
                        wit::Role::User => Self::User,
                        wit::Role::Assistant => Self::Assistant,
                        wit::Role::System => Self::System,
                    }
                }
            }
            $crate::__wit_enum!(
                wit::FinishReason,
                FinishReason {
                    Stop,
                    Length,
                    ContentFilter,
                    ToolCall,
                    Other
                }
            );
            $crate::__wit_enum!(wit::StructuredOutput, StructuredOutput { Native, Prompt });
            $crate::__wit_enum!(
                wit::ErrorCode,
                ErrorCode {
                    ValidationError,
                    PolicyDenied,
                    EnvelopeInvalid,
                    EnvelopeTruncationUnrecoverable,
                    EnvelopeRefusal,
                    ProviderUnavailable,
                    ProviderRejected,
                    LimitExceeded
                }
            );
            impl From<wit::Message> for $crate::Message {
                fn from(m: wit::Message) -> Self {
                    Self::new(m.role.into(), m.content)
                }
            }

            // The 0.1.0 record has no tool calls: a request with them goes
            // through the JSON entry (`call-ai-json`), which carries them.
            // A tool's result, should one be converted, is its text as the
            // user's.
            impl From<$crate::Message> for wit::Message {
                fn from(m: $crate::Message) -> Self {
                    let role = match m.role {
                        $crate::Role::User | $crate::Role::Tool => wit::Role::User,
                        $crate::Role::Assistant => wit::Role::Assistant,
                        $crate::Role::System => wit::Role::System,
                    };
                    Self {
                        role,
                        content: m.content,
                    }
                }
            }
            $crate::__wit_record!(
                wit::RetryPolicy,
                RetryPolicy {
                    max_attempts: same,
                    grow_max_tokens: same
                }
            );
            $crate::__wit_record!(
                wit::Usage,
                Usage {
                    input_tokens: same,
                    output_tokens: same,
                    total_tokens: same
                }
            );
            $crate::__wit_record!(
                wit::Attempts,
                Attempts {
                    count: same,
                    output_tokens: same,
                    usage_complete: same,
                    structured_output: option
                }
            );
            $crate::__wit_record!(
                wit::AccountingFlags,
                CallAccounting {
                    attempts: same,
                    retry_policy: same
                }
            );

            impl From<$crate::CallResult> for wit::CallResult {
                fn from(r: $crate::CallResult) -> Self {
                    Self {
                        content: r.content,
                        data: r.data.map(|d| d.to_string()),
                        usage: r.usage.map(Into::into),
                        finish_reason: r.finish_reason.map(Into::into),
                        model: r.model,
                        attempts: r.attempts.map(Into::into),
                    }
                }
            }

            impl From<wit::CallResult> for $crate::CallResult {
                fn from(r: wit::CallResult) -> Self {
                    Self {
                        content: r.content,
                        // Data is JSON the host parsed and validated; text
                        // that is not JSON is kept as a string.
                        data: r.data.map(|d| {
                            serde_json::from_str(&d).unwrap_or(serde_json::Value::String(d))
                        }),
                        tool_calls: None,
                        usage: r.usage.map(Into::into),
                        finish_reason: r.finish_reason.map(Into::into),
                        model: r.model,
                        attempts: r.attempts.map(Into::into),
                        thinking: Vec::new(),
                        cached_input_tokens: None,
                        reasoning_tokens: None,
                    }
                }
            }

            impl From<$crate::CallError> for wit::CallError {
                fn from(e: $crate::CallError) -> Self {
                    Self {
                        code: e.code.into(),
                        message: e.message,
                        details: e.details.map(|d| serde_json::Value::Object(d).to_string()),
                    }
                }
            }

            impl From<wit::CallError> for $crate::CallError {
                fn from(e: wit::CallError) -> Self {
                    Self {
                        code: e.code.into(),
                        message: e.message,
                        details: e.details.and_then(|d| serde_json::from_str(&d).ok()),
                    }
                }
            }

            impl From<$crate::CallRequest> for wit::CallRequest {
                fn from(r: $crate::CallRequest) -> Self {
                    Self {
                        provider: r.provider,
                        model: r.model,
                        system_prompt: r.system_prompt,
                        messages: r.messages.into_iter().map(Into::into).collect(),
                        temperature: r.temperature,
                        max_tokens: r.max_tokens,
                        stop_sequences: r.stop_sequences,
                        response_schema: r.response_schema.map(|s| s.to_string()),
                        retry: r.retry.map(Into::into),
                    }
                }
            }

            impl TryFrom<wit::CallRequest> for $crate::CallRequest {
                type Error = $crate::CallError;

                fn try_from(r: wit::CallRequest) -> Result<Self, Self::Error> {
                    let response_schema = r
                        .response_schema
                        .map(|text| {
                            serde_json::from_str(&text).map_err(|e| {
                                $crate::CallError::validation(
                                    "responseSchema",
                                    format!("is not valid JSON: {e}"),
                                )
                            })
                        })
                        .transpose()?;
                    Ok(Self {
                        provider: r.provider,
                        model: r.model,
                        system_prompt: r.system_prompt,
                        messages: r.messages.into_iter().map(Into::into).collect(),
                        temperature: r.temperature,
                        max_tokens: r.max_tokens,
                        stop_sequences: r.stop_sequences,
                        response_schema,
                        retry: r.retry.map(Into::into),
                        tools: None,
                        tool_choice: None,
                        parallel_tool_calls: None,
                        token_limit_field: None,
                        prompt_cache: None,
                        thinking: None,
                        embedding: None,
                        reasoning_effort: None,
                    })
                }
            }
        };
    };
}

/// `From` both ways between two fieldless enums with the same variants.
#[doc(hidden)]
#[macro_export]
macro_rules! __wit_enum {
    ($wit:path, $name:ident { $($variant:ident),* $(,)? }) => {
        impl From<$wit> for $crate::$name {
            fn from(v: $wit) -> Self {
                use $wit as W;
                match v { $(W::$variant => Self::$variant),* }
            }
        }
        impl From<$crate::$name> for $wit {
            fn from(v: $crate::$name) -> Self {
                match v { $($crate::$name::$variant => Self::$variant),* }
            }
        }
    };
}

/// `From` both ways between two records with the same fields; each field
/// is copied (`same`), converted (`into`) or converted inside an `Option`.
#[doc(hidden)]
#[macro_export]
macro_rules! __wit_record {
    ($wit:path, $name:ident { $($field:ident : $how:ident),* $(,)? }) => {
        impl From<$wit> for $crate::$name {
            fn from(v: $wit) -> Self {
                Self { $($field: $crate::__wit_field!($how, v.$field)),* }
            }
        }
        impl From<$crate::$name> for $wit {
            fn from(v: $crate::$name) -> Self {
                Self { $($field: $crate::__wit_field!($how, v.$field)),* }
            }
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __wit_field {
    (same, $e:expr) => {
        $e
    };
    (into, $e:expr) => {
        $e.into()
    };
    (option, $e:expr) => {
        $e.map(Into::into)
    };
}
