//! A streamed response: the Responses API's typed events, each with its
//! `sequence_number`, in the order OpenAI sends them: `response.created`
//! and `response.in_progress`; the message item added, its `output_text`
//! part added, each piece of text as a delta, the text done, the part done,
//! the item done; each function call added, its arguments (whole, once
//! judged) and done; then `response.completed` (or `.incomplete`, or
//! `.failed`) carrying the whole response with its `usage` and the
//! `callai` extension.

use super::answer::{
    self, OutputItem, OutputText, ResponseError, ResponseObject, function_call, item_id,
};
use super::request::Echo;
use crate::dropin::api::{AnswerExtension, Framer};
use crate::dropin::sse::Frame;
use crate::error::ApiError;
use callai_engine::wire::{CallResult, ToolCall};
use serde::Serialize;
use std::borrow::Cow;

/// The events of one streamed response.
pub struct ResponseFramer {
    pub(super) id: String,
    pub(super) model: String,
    pub(super) echo: Echo,
    /// The next event's `sequence_number`.
    sequence: u64,
    /// The items whose events went out, as they stand.
    output: Vec<OutputItem<'static>>,
    /// The text of the message item still open, if one is.
    open: Option<String>,
}

/// One event: its `type`, its `sequence_number`, and its own fields.
#[derive(Serialize)]
struct Event<T: Serialize> {
    #[serde(rename = "type")]
    kind: &'static str,
    sequence_number: u64,
    #[serde(flatten)]
    body: T,
}

/// The fields of an event about one item.
#[derive(Serialize)]
struct ItemEvent<'a> {
    item: &'a OutputItem<'a>,
    output_index: usize,
}

/// The fields of an event about a message's one text part.
#[derive(Serialize)]
struct PartEvent<'a> {
    content_index: usize,
    item_id: &'a str,
    output_index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    part: Option<OutputText<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delta: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    logprobs: Option<[(); 0]>,
}

/// The fields of an event about a function call's arguments.
#[derive(Serialize)]
struct ArgumentsEvent<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delta: Option<&'a str>,
    item_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    output_index: usize,
}

/// The fields of an event carrying the whole response.
#[derive(Serialize)]
struct Whole<'a> {
    response: ResponseObject<'a>,
}

/// The frame of event `kind`, number `n`, with `body`.
fn encode(kind: &'static str, n: u64, body: impl Serialize) -> Frame {
    let event = Event {
        kind,
        sequence_number: n,
        body,
    };
    let data = serde_json::to_string(&event).expect("an event always serialises");
    (Some(kind), data)
}

impl ResponseFramer {
    pub(super) fn new(id: String, model: String, echo: Echo) -> Self {
        Self {
            id,
            model,
            echo,
            sequence: 0,
            output: Vec::new(),
            open: None,
        }
    }

    /// The frame of event `kind` with `body`, next in sequence.
    fn event(&mut self, kind: &'static str, body: impl Serialize) -> Frame {
        let n = self.next();
        encode(kind, n, body)
    }

    /// The next event's `sequence_number`, taken.
    fn next(&mut self) -> u64 {
        self.sequence += 1;
        self.sequence - 1
    }

    /// The response as it stands, with `status`.
    fn whole<'a>(
        &'a self,
        status: &'static str,
        extra: (Option<answer::ResponseUsage>, Option<answer::Incomplete>),
        error: Option<ResponseError<'a>>,
        callai: Option<AnswerExtension>,
    ) -> Whole<'a> {
        Whole {
            response: ResponseObject {
                callai,
                created_at: self.echo.created_at,
                error,
                id: &self.id,
                incomplete_details: extra.1,
                model: &self.model,
                object: "response",
                output: Cow::Borrowed(&self.output),
                status,
                usage: extra.0,
                echo: &self.echo,
            },
        }
    }

    /// The events of the message item's opening, when none is open.
    fn open_message(&mut self, frames: &mut Vec<Frame>) {
        if self.open.is_some() {
            return;
        }
        let (output_index, item_id) = (self.output.len(), item_id(&self.id, "msg", 0));
        let item = OutputItem::Message {
            content: Vec::new(),
            id: item_id.clone(),
            role: "assistant",
            status: "in_progress",
        };
        frames.push(self.event(
            "response.output_item.added",
            ItemEvent {
                item: &item,
                output_index,
            },
        ));
        let part = PartEvent {
            content_index: 0,
            item_id: &item_id,
            output_index,
            part: Some(OutputText::new(Cow::Borrowed(""))),
            delta: None,
            text: None,
            logprobs: None,
        };
        frames.push(self.event("response.content_part.added", part));
        self.open = Some(String::new());
    }

    /// The events of the open message item's end, with `status`.
    fn close_message(&mut self, status: &'static str, frames: &mut Vec<Frame>) {
        let Some(text) = self.open.take() else {
            return;
        };
        let (output_index, item_id) = (self.output.len(), item_id(&self.id, "msg", 0));
        let done = PartEvent {
            content_index: 0,
            item_id: &item_id,
            output_index,
            part: None,
            delta: None,
            text: Some(&text),
            logprobs: Some([]),
        };
        frames.push(self.event("response.output_text.done", done));
        let part = PartEvent {
            content_index: 0,
            item_id: &item_id,
            output_index,
            part: Some(OutputText::new(Cow::Borrowed(&text))),
            delta: None,
            text: None,
            logprobs: None,
        };
        frames.push(self.event("response.content_part.done", part));
        let item = OutputItem::Message {
            content: vec![OutputText::new(Cow::Owned(text))],
            id: item_id,
            role: "assistant",
            status,
        };
        frames.push(self.event(
            "response.output_item.done",
            ItemEvent {
                item: &item,
                output_index,
            },
        ));
        self.output.push(item);
    }

    /// The events of one judged function call, the `n`th.
    fn call(&mut self, n: usize, call: &ToolCall, frames: &mut Vec<Frame>) {
        let output_index = self.output.len();
        let mut item = function_call(&self.id, n, call, "in_progress");
        if let OutputItem::FunctionCall { arguments, .. } = &mut item {
            *arguments = Cow::Borrowed("");
        }
        frames.push(self.event(
            "response.output_item.added",
            ItemEvent {
                item: &item,
                output_index,
            },
        ));
        let item_id = item_id(&self.id, "fc", n);
        let delta = ArgumentsEvent {
            arguments: None,
            delta: Some(&call.arguments),
            item_id: &item_id,
            name: None,
            output_index,
        };
        frames.push(self.event("response.function_call_arguments.delta", delta));
        let done = ArgumentsEvent {
            arguments: Some(&call.arguments),
            delta: None,
            item_id: &item_id,
            name: Some(&call.name),
            output_index,
        };
        frames.push(self.event("response.function_call_arguments.done", done));
        let item = OutputItem::FunctionCall {
            arguments: Cow::Owned(call.arguments.clone()),
            call_id: Cow::Owned(call.id.clone()),
            id: item_id,
            name: Cow::Owned(call.name.clone()),
            status: "completed",
        };
        frames.push(self.event(
            "response.output_item.done",
            ItemEvent {
                item: &item,
                output_index,
            },
        ));
        self.output.push(item);
    }
}

impl Framer for ResponseFramer {
    fn start(&mut self) -> Vec<Frame> {
        let n = self.next();
        let created = encode(
            "response.created",
            n,
            self.whole("in_progress", (None, None), None, None),
        );
        let n = self.next();
        let going = encode(
            "response.in_progress",
            n,
            self.whole("in_progress", (None, None), None, None),
        );
        vec![created, going]
    }

    fn text(&mut self, text: &str) -> Vec<Frame> {
        let mut frames = Vec::new();
        self.open_message(&mut frames);
        if text.is_empty() {
            return frames;
        }
        let item_id = item_id(&self.id, "msg", 0);
        let delta = PartEvent {
            content_index: 0,
            item_id: &item_id,
            output_index: self.output.len(),
            part: None,
            delta: Some(text),
            text: None,
            logprobs: Some([]),
        };
        frames.push(self.event("response.output_text.delta", delta));
        self.open.get_or_insert_with(String::new).push_str(text);
        frames
    }

    fn tool_calls(&mut self, calls: &[ToolCall]) -> Vec<Frame> {
        let mut frames = Vec::new();
        self.close_message("completed", &mut frames);
        for (n, call) in calls.iter().enumerate() {
            self.call(n, call, &mut frames);
        }
        frames
    }

    fn end(&mut self, result: &CallResult) -> Vec<Frame> {
        let (status, incomplete) = answer::status(result);
        let mut frames = Vec::new();
        self.close_message(status, &mut frames);
        let kind = match status {
            "completed" => "response.completed",
            _ => "response.incomplete",
        };
        let callai = Some(AnswerExtension::of(result));
        let n = self.next();
        let whole = self.whole(status, (answer::usage(result), incomplete), None, callai);
        frames.push(encode(kind, n, whole));
        frames
    }

    fn error(&mut self, error: &ApiError) -> Vec<Frame> {
        let mut frames = Vec::new();
        self.close_message("incomplete", &mut frames);
        let n = self.next();
        let whole = self.whole("failed", (None, None), Some(ResponseError::of(error)), None);
        frames.push(encode("response.failed", n, whole));
        frames
    }
}
