//! Budgets in money (issue 35 #5): `[tenants.NAME.budget] cost` is
//! reserved from the worst case of the call's own policy priced at the
//! dearest target it may reach, refused naming `cost` in the budget's
//! currency, and charged what the attempts really cost, each at its own
//! price (one without usage at its worst case), the same amount the
//! answer's `x-callai-cost` says. A call that may reach a target with no
//! price in the budget's currency is refused before any request.

use callai_tests::fake_server::FakeServer;
use callai_tests::serve::{Exchange, TestServer};
use callai_tests::wire::Api;
use serde_json::{Value, json};

const TOKEN: &str = "tok-bookai";

/// `p` at 2 and 10 per million tokens, `r` at 2 and 30, `q` unpriced;
/// bookai may spend 0.015 USD a day.
fn config(p: &str, q: &str, r: &str) -> String {
    let provider = |name: &str, url: &str, prices: &str| {
        format!(
            "[providers.{name}]\nkind = \"openai\"\nbaseUrl = \"{url}\"\napiKeyEnv = \"\"\nmodel = \"m\"\n{prices}\n"
        )
    };
    [
        provider("p", p, "prices = { input = 2.0, output = 10.0 }"),
        provider("q", q, ""),
        provider("r", r, "prices = { input = 2.0, output = 30.0 }"),
        "[defaults]\nprovider = \"p\"\n".into(),
        "[models.dear]\ntargets = [\"p/m\", \"r/m\"]\n".into(),
        "[models.open]\ntargets = [\"p/m\", \"q/m\"]\n".into(),
        "[tenants.bookai]\ntokenEnv = \"BOOKAI_TOKEN\"\n[tenants.bookai.budget]\ncost = 0.015\n"
            .into(),
    ]
    .concat()
}

/// `serve` with [`config`] (`r` at `p`'s address) and an SQLite run log
/// in the directory it returns.
async fn serve(p: &FakeServer, q: &FakeServer) -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let toml = config(p.url(), q.url(), p.url());
    let server = TestServer::start_with(&toml, Some(&dir.path().join("runs.db")), |k| {
        (k == "BOOKAI_TOKEN").then(|| TOKEN.into())
    })
    .await;
    (server, dir)
}

/// A text call of `max_attempts` to `to` (`provider` or `model`).
fn call(max_attempts: u32, to: (&str, &str)) -> Value {
    let mut request = json!({"messages": [{"role": "user", "content": "hi"}], "maxTokens": 1000,
                             "retry": {"maxAttempts": max_attempts}});
    request[to.0] = json!(to.1);
    json!({"request": request})
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

fn header(answer: &Exchange, name: &str) -> Option<f64> {
    answer.headers.get(name).map(|v| v.parse().unwrap())
}

/// One attempt's worst case at `p`: 82 input tokens (the text's 2 bytes
/// and the overheads around it) at 2e-6, 1000 output at 1e-5.
const WORST_AT_P: f64 = 82.0 * 2e-6 + 1000.0 * 1e-5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_in_money_holds_the_worst_case_and_charges_what_the_bill_says() {
    let replies = vec![
        Api::OpenAi.reply("a scene", None, "stop", Some(20)),
        // No usage: charged at its worst case.
        Api::OpenAi.reply("another", None, "stop", None),
    ];
    let (p, q) = (
        FakeServer::start(replies).await,
        FakeServer::start(vec![]).await,
    );
    let (server, _dir) = serve(&p, &q).await;

    // Two attempts may cost 0.020328: more than the 0.015 there is.
    let r = server
        .exchange("/v1/call", &call(2, ("provider", "p")), Some(TOKEN))
        .await;
    assert_eq!(r.status, 429, "{}", r.body);
    let error = &r.body["error"];
    assert_eq!(error["code"], "budget_exceeded");
    let details = &error["details"];
    assert_eq!(
        (&details["budget"], &details["currency"]),
        (&json!("cost"), &json!("USD"))
    );
    assert!(close(details["left"].as_f64().unwrap(), 0.015), "{details}");
    assert!(
        close(details["needed"].as_f64().unwrap(), 2.0 * WORST_AT_P),
        "{details}"
    );
    assert_eq!(details["fitsMaxAttempts"], 1, "one attempt fits");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("0.020328 USD, 0.015 USD is left"),
        "{message}"
    );
    assert!(p.received().is_empty(), "refused before any request");

    // One attempt: 11 input and 20 output tokens, 0.000222.
    let r = server
        .exchange("/v1/call", &call(1, ("provider", "p")), Some(TOKEN))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let billed = header(&r, "x-callai-cost").unwrap();
    assert!(close(billed, 0.000222), "{billed}");
    assert_eq!(
        r.headers.get("x-callai-budget-remaining-cost"),
        Some("0.014778"),
        "a decimal in the currency's units, as x-callai-cost"
    );
    assert_eq!(
        header(&r, "x-callai-budget-remaining-requests"),
        None,
        "unlimited"
    );

    // No usage reported: charged its worst case, and the bill says so.
    let r = server
        .exchange("/v1/call", &call(1, ("provider", "p")), Some(TOKEN))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(close(header(&r, "x-callai-cost").unwrap(), WORST_AT_P));
    assert_eq!(r.body["cost"]["complete"], false, "{}", r.body);
    let left = header(&r, "x-callai-budget-remaining-cost").unwrap();
    assert!(close(left, 0.015 - 0.000222 - WORST_AT_P), "{left}");

    // What is left no longer holds one attempt.
    let r = server
        .exchange("/v1/call", &call(1, ("provider", "p")), Some(TOKEN))
        .await;
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.body["error"]["details"]["budget"], "cost");
    assert_eq!(r.body["error"]["details"].get("fitsMaxAttempts"), None);
    assert_eq!(p.received().len(), 2, "two requests reached the provider");

    let budget = settled(&server).await;
    assert_eq!(budget["currency"], "USD");
    assert!(close(budget["limits"]["cost"].as_f64().unwrap(), 0.015));
    let spent = budget["spent"]["cost"].as_f64().unwrap();
    assert!(close(spent, 0.000222 + WORST_AT_P), "{budget}");
    assert_eq!(budget["spent"]["requests"], 2);
    assert!(close(
        budget["remaining"]["cost"].as_f64().unwrap(),
        0.015 - spent
    ));
    assert_eq!(budget["remaining"]["requests"], Value::Null, "unlimited");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_priced_at_the_dearest_target_it_may_reach_or_refused_unpriced() {
    let (p, q) = (
        FakeServer::start(vec![]).await,
        FakeServer::start(vec![]).await,
    );
    let (server, _dir) = serve(&p, &q).await;

    // `dear` may fall back to r, whose output costs 3e-5: one attempt may
    // cost 0.030164 there, which 0.015 does not hold.
    let r = server
        .exchange("/v1/call", &call(1, ("model", "dear")), Some(TOKEN))
        .await;
    assert_eq!(r.status, 429, "{}", r.body);
    let needed = r.body["error"]["details"]["needed"].as_f64().unwrap();
    assert!(close(needed, 82.0 * 2e-6 + 1000.0 * 3e-5), "{needed}");

    // q has no price: a call that may reach it cannot be held to money.
    for to in [("provider", "q"), ("model", "open")] {
        let r = server.exchange("/v1/call", &call(1, to), Some(TOKEN)).await;
        assert_eq!(r.status, 403, "{to:?}: {}", r.body);
        let error = &r.body["error"];
        assert_eq!(error["code"], "policy_denied");
        assert_eq!(error["details"]["reason"], "budget_unpriced");
        assert_eq!(error["details"]["provider"], "q");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains("has no price in USD") && message.contains("[providers.q.prices]"),
            "{message}"
        );
    }
    assert!(
        p.received().is_empty() && q.received().is_empty(),
        "no request reached a provider"
    );
    server.shutdown().await;
}

/// The budget of `GET /v1/budget` once every call has settled in the
/// database (a host settles its chunk a moment after its calls go idle).
async fn settled(server: &TestServer) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let b = server
            .send_as("GET", "/v1/budget", None, Some(TOKEN))
            .await
            .body;
        if b["budget"]["reserved"]["cost"] == 0.0 {
            return b["budget"].clone();
        }
        assert!(std::time::Instant::now() < deadline, "never settled: {b}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
