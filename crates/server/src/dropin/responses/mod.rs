//! `POST /v1/responses`: the OpenAI Responses API, mapped onto a
//! ctx.callAI request as the other drop-ins are: `input` (a string, or
//! message, function-call and function-call-output items) and
//! `instructions` into the conversation, function `tools` and
//! `tool_choice`, `text.format` into the response schema,
//! `max_output_tokens` into the output budget the host grows on
//! truncation. The answer is a `response` whose `id` is the call's, with
//! the final attempt's `usage` and the `callai` extension; streamed, the
//! API's typed events. What the host cannot honour is refused naming its
//! field (see [`request`]).

mod answer;
mod events;
mod input;
mod request;

pub use events::ResponseFramer;
pub use request::{Echo, ResponsesRequest};

use super::api::{AnswerExtension, Api, DropinApi, Mapped, Streaming};
use crate::error::ApiError;
use answer::{Reasoning, ResponseObject};
use callai_engine::wire::{CallRequest, CallResult};
use serde::Serialize;
use std::borrow::Cow;

/// The OpenAI Responses API.
pub struct Responses;

impl DropinApi for Responses {
    const API: Api = Api::Responses;
    const ID_PREFIX: &'static str = "resp_";
    type Request = ResponsesRequest;
    type Framer = ResponseFramer;
    type Echo = Echo;

    fn map(mut r: ResponsesRequest) -> Result<(Mapped, Echo), ApiError> {
        r.refuse_unhonoured()?;
        let Some(input) = r.input.take() else {
            return Err(ApiError::invalid("input", "is required"));
        };
        let (mut system, messages) = input::conversation(input)?;
        if let Some(instructions) = &r.instructions {
            system.insert(0, instructions.clone());
        }
        let request = CallRequest {
            system_prompt: (!system.is_empty()).then(|| system.join("\n\n")),
            messages,
            max_tokens: r.max_output_tokens,
            temperature: r.temperature,
            response_schema: r.response_schema(),
            tools: request::tools(r.tools.as_deref().unwrap_or_default())?,
            tool_choice: r.tool_choice.as_ref().map(request::choice).transpose()?,
            parallel_tool_calls: r.parallel_tool_calls,
            ..CallRequest::default()
        };
        let streaming = match r.stream {
            Some(true) => Streaming::On {
                include_usage: true,
            },
            _ => Streaming::Off,
        };
        let echo = r.echo();
        let mapped = Mapped {
            request,
            extension: r.callai.take().unwrap_or_default(),
            streaming,
            model: r.model,
        };
        Ok((mapped, echo))
    }

    fn answer<'a>(
        model: &'a str,
        id: &'a str,
        result: &'a CallResult,
        callai: AnswerExtension,
        echo: &'a Echo,
    ) -> impl Serialize + 'a {
        let (status, incomplete_details) = answer::status(result);
        ResponseObject {
            callai: Some(callai),
            created_at: echo.created_at,
            error: None,
            id,
            incomplete_details,
            model,
            object: "response",
            output: Cow::Owned(answer::output(id, result)),
            reasoning: Reasoning::default(),
            status,
            usage: answer::usage(result),
            echo,
        }
    }

    fn framer(
        model: String,
        id: String,
        _: Streaming,
        _: Option<&CallResult>,
        echo: Echo,
    ) -> ResponseFramer {
        ResponseFramer::new(id, model, echo)
    }
}
