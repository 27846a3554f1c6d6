//! Each request is priced once, by the engine, at the host's prices: the
//! price book is asked once per target per call, and every watcher is
//! handed the same cost.

use crate::cost::{Cost, PerToken, PriceBook, TokenPrice};
use crate::observe::{CallObserver, CallStart, CallWatch, RequestEnd, RequestStart};
use crate::{EventLog, Host, HostConfig, MockProvider, MockScript};
use callai_wire::{CallError, CallRequest, CallResult, RetryField, StructuredOutput};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// One price for every model of `mock`, counting how often it is asked.
#[derive(Debug)]
struct CountingBook {
    price: TokenPrice,
    asked: AtomicU32,
}

impl PriceBook for CountingBook {
    fn price(&self, provider: &str, _model: &str) -> Option<&TokenPrice> {
        self.asked.fetch_add(1, Ordering::Relaxed);
        (provider == "mock").then_some(&self.price)
    }
}

/// A request's number and the cost it was handed.
type Seen = (u32, Option<Cost>);

/// Keeps the cost each request was handed, by request number.
#[derive(Default)]
struct Costs(Arc<Mutex<Vec<Seen>>>);

impl CallObserver for Costs {
    fn call_started(&self, _: &CallStart<'_>) -> Box<dyn CallWatch> {
        Box::new(Costs(self.0.clone()))
    }
}

impl CallWatch for Costs {
    fn request_started(&mut self, _: &RequestStart<'_>) {}
    fn request_finished(&mut self, r: &RequestStart<'_>, _: RequestEnd<'_>, cost: Option<&Cost>) {
        self.0.lock().unwrap().push((r.number, cost.cloned()));
    }
    fn call_finished(self: Box<Self>, _: Result<&CallResult, &CallError>) {}
}

fn call(host: &Host, observers: &[Arc<Costs>]) -> Result<CallResult, CallError> {
    let request = CallRequest::from_json(
        r#"{"messages": [{"role": "user", "content": "hi"}], "maxTokens": 100,
            "responseSchema": {"type": "object"}}"#,
        RetryField::Honoured,
    )
    .unwrap();
    let mut options = crate::CallOptions::default();
    let all = observers
        .iter()
        .fold(crate::observe::Observers::new(), |o, c| {
            o.with(c.clone() as crate::observe::SharedObserver)
        });
    options.observer = Some(Arc::new(all));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(host.call_with("n", &request, &EventLog::new(), options))
}

#[test]
fn each_request_is_priced_once_and_every_watcher_sees_that_cost() {
    // A truncation, then a reply without usage: priced at its worst case.
    let script = r#"[
        {"content": "{\"a\": ", "finishReason": "length", "outputTokens": 100, "inputTokens": 1000},
        {"content": "{\"a\": 1}", "finishReason": "stop"}
    ]"#;
    let mock = MockProvider::new(
        MockScript::from_json(script).unwrap(),
        StructuredOutput::Native,
    );
    let book = Arc::new(CountingBook {
        price: TokenPrice {
            input: PerToken::per_million(1.0),
            cached_input: PerToken::per_million(1.0),
            cache_write: PerToken::per_million(1.0),
            output: PerToken::per_million(10.0),
            currency: "USD".into(),
        },
        asked: AtomicU32::new(0),
    });
    let host = Host::builder(HostConfig::default())
        .mock(mock)
        .prices(book.clone())
        .build()
        .unwrap();
    let watchers = [Arc::new(Costs::default()), Arc::new(Costs::default())];
    let result = call(&host, &watchers).unwrap();
    assert_eq!(result.attempts.unwrap().count, 2);
    assert_eq!(
        book.asked.load(Ordering::Relaxed),
        1,
        "one lookup for the call's one target, not one per request or watcher"
    );
    let seen = watchers[0].0.lock().unwrap().clone();
    assert_eq!(seen, watchers[1].0.lock().unwrap().clone());
    let [(1, Some(first)), (2, Some(second))] = &seen[..] else {
        panic!("two priced requests: {seen:?}");
    };
    assert_eq!(first.nanos, 1000 * 1000 + 100 * 10_000);
    assert!(first.complete);
    // No usage: the grown budget (200 tokens) out, at its worst.
    assert!(!second.complete, "{second:?}");
    assert!(second.nanos > 200 * 10_000, "{second:?}");

    // A host without prices hands its watchers no cost.
    let unpriced = Host::builder(HostConfig::default())
        .mock(MockProvider::new(
            MockScript::from_json(script).unwrap(),
            StructuredOutput::Native,
        ))
        .build()
        .unwrap();
    let watcher = [Arc::new(Costs::default())];
    call(&unpriced, &watcher).unwrap();
    let seen = watcher[0].0.lock().unwrap().clone();
    assert_eq!(seen, vec![(1, None), (2, None)]);
}
