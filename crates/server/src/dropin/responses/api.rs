//! The Responses API as a [`DropinApi`]: a request mapped onto the
//! engine's, a result answered as a `response`, a stream framed as its
//! typed events.

use super::answer::{self, ResponseObject};
use super::events::ResponseFramer;
use super::input;
use super::request::{self, Echo, ResponsesRequest};
use crate::dropin::api::{AnswerExtension, Api, DropinApi, Mapped, Streaming};
use crate::error::ApiError;
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
        let (mut system, messages) = input::conversation(r.input()?)?;
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
            reasoning_effort: r.reasoning_effort().map(str::to_owned),
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
