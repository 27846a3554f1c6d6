//! The run viewer at `/ui` (issue 35, items 6 and 7), in a real browser:
//! headless Chromium from the distribution's packages, driven through
//! chromedriver by fantoccini, against a real `serve` whose provider is a
//! loopback fake. A tenant's call is retried once for truncation; each page
//! must load without a console error and show that call, its attempts in
//! order with their reasons and costs, the tenant's budget after it, and
//! the provider's requests by reason.
//!
//! `CALLAI_UI_SCREENSHOTS=DIR` keeps a screenshot of each page there (the
//! docs' pictures are made so).

use callai_tests::fake_server::FakeServer;
use callai_tests::serve::{TestServer, truncating};
use callai_tests::wire::Api;
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) const ADMIN: &str = "tok-admin-ui";
pub(crate) const ACME: &str = "tok-acme-ui";

/// chromedriver on a loopback port, stopped when dropped.
pub(crate) struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts chromedriver, failing with how to install it when it is missing.
pub(crate) async fn chromedriver() -> Driver {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let child = Command::new("chromedriver")
        .args([format!("--port={port}"), "--allowed-ips=127.0.0.1".into()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "chromedriver could not start ({e}): the viewer's test needs the distribution's \
                 browser, `apt-get install chromium chromium-driver` (.ci/run installs them)"
            )
        });
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "chromedriver did not listen in 20 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    driver
}

/// A headless Chromium session whose console is kept for [`console_errors`].
pub(crate) async fn browser(driver: &Driver) -> Client {
    browser_with(driver, &[]).await
}

/// [`browser`], Chromium started with `extra` arguments too.
pub(crate) async fn browser_with(driver: &Driver, extra: &[&str]) -> Client {
    let mut args = vec![
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1100,900",
    ];
    args.extend_from_slice(extra);
    let mut caps = serde_json::Map::new();
    caps.insert("goog:chromeOptions".into(), json!({ "args": args }));
    caps.insert("goog:loggingPrefs".into(), json!({"browser": "ALL"}));
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("a Chromium session")
}

/// chromedriver's `se/log`: the browser's console since the last read
/// (fantoccini has no command of its own for it).
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }
    fn method_and_body(&self, _: &url::Url) -> (reqwest::Method, Option<String>) {
        (reqwest::Method::POST, Some(r#"{"type":"browser"}"#.into()))
    }
}

/// The console's errors since the last read.
pub(crate) async fn console_errors(client: &Client) -> Vec<String> {
    let entries = client.issue_cmd(BrowserLog).await.expect("the console");
    entries
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["level"] == "SEVERE")
        .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Opens `hash` of the viewer and waits until `ready` is on the page; the
/// page must have logged no error.
pub(crate) async fn open(client: &Client, url: &str, hash: &str, ready: &str) -> String {
    client.goto(&format!("{url}/ui/#/{hash}")).await.unwrap();
    let text = wait_for_text(client, ready).await;
    let errors = console_errors(client).await;
    assert!(errors.is_empty(), "#/{hash} logged errors: {errors:?}");
    if let Some(dir) = std::env::var_os("CALLAI_UI_SCREENSHOTS") {
        let name = hash.split(['/', '?']).next().unwrap_or("calls");
        let name = if hash.contains('/') {
            format!("{name}-one")
        } else {
            name.to_owned()
        };
        let png = client.screenshot().await.unwrap();
        std::fs::write(
            std::path::Path::new(&dir).join(format!("ui-{name}.png")),
            png,
        )
        .unwrap();
    }
    text
}

/// Clicks what `xpath` finds, found again if the page rendered it anew
/// between the find and the click (a list drawn again as its data comes
/// leaves the element found stale); 10 s at most.
async fn click_fresh(client: &Client, xpath: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = client.find(Locator::XPath(xpath)).await.unwrap();
        match found.click().await {
            Ok(()) => return,
            Err(e) if e.is_stale_element_reference() && Instant::now() < deadline => {}
            Err(e) => panic!("clicking {xpath}: {e}"),
        }
    }
}

/// The text of `<main>` once it holds `want` (10 s at most).
pub(crate) async fn wait_for_text(client: &Client, want: &str) -> String {
    wait_until(client, want, |text| text.contains(want)).await
}

/// The text of `<main>` once `ready` holds of it (10 s at most).
pub(crate) async fn wait_until(
    client: &Client,
    what: &str,
    ready: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = client
            .find(Locator::Css("main"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if ready(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "no {what:?} on the page; it shows:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Gives the viewer `token` through its form, as a user does.
pub(crate) async fn use_token(client: &Client, token: &str) {
    let input = client.find(Locator::Id("token")).await.unwrap();
    input.send_keys(token).await.unwrap();
    let submit = client
        .find(Locator::Css("#token-form button[type=submit]"))
        .await
        .unwrap();
    submit.click().await.unwrap();
}

/// A server with an admin token, tenant `acme` under a budget of 10
/// requests and 1.00 USD a day, and provider `p` priced, answering
/// `replies`.
async fn server(dir: &tempfile::TempDir, fake: &FakeServer) -> TestServer {
    let toml = format!(
        "[server]\ntokenEnv = \"ADMIN\"\n\
         [providers.p]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"\"\nmodel = \"m-1\"\n\
         prices = {{ input = 2.0, output = 10.0, currency = \"USD\" }}\n\
         [defaults]\nprovider = \"p\"\n[retry]\nbackoffBaseMs = 1\nbackoffMaxMs = 2\n\
         [tenants.acme]\ntokenEnv = \"ACME\"\n[tenants.acme.budget]\nrequests = 10\ncost = 1.0\nwindow = \"1d\"\n",
        fake.url()
    );
    TestServer::start_with(&toml, Some(&dir.path().join("runs.db")), |k| match k {
        "ADMIN" => Some(ADMIN.into()),
        "ACME" => Some(ACME.into()),
        _ => None,
    })
    .await
}

/// A server ([`server`]) after tenant `acme`'s call, retried once for
/// truncation (its id returned), and a pack run `r-ui` of the admin's
/// through the mock.
pub(crate) async fn calls_made() -> (TestServer, FakeServer, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeServer::start(vec![
        Api::OpenAi.reply("{\"a\": ", None, "length", Some(100)),
        Api::OpenAi.reply("{\"a\": 1}", None, "stop", Some(20)),
    ])
    .await;
    let server = server(&dir, &fake).await;
    let request = json!({"request": {"messages": [{"role": "user", "content": "hi"}], "maxTokens": 100,
                                     "responseSchema": {"type": "object", "required": ["a"]}}});
    let call = server.exchange("/v1/call", &request, Some(ACME)).await;
    assert_eq!(call.status, 200, "{}", call.body);
    let id = call.headers.get("x-callai-call-id").unwrap().to_owned();
    // A pack run of the admin's, through the mock: one call of 2 attempts.
    let (mut input, script) = truncating(2);
    input["provider"] = json!("mock");
    let run = json!({"pack": "echo-attempts", "input": input, "script": script, "runId": "r-ui"});
    let started = server.exchange("/v1/runs", &run, Some(ADMIN)).await;
    assert_eq!(started.status, 200, "{}", started.body);

    (server, fake, id, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_page_shows_the_call_its_attempts_the_budget_and_the_providers_requests() {
    let (server, _fake, id, _dir) = calls_made().await;
    let driver = chromedriver().await;
    let client = browser(&driver).await;
    let url = &server.url;

    // With no token, the page says what to do; then the admin's is given.
    client.goto(&format!("{url}/ui/")).await.unwrap();
    wait_for_text(&client, "Give the admin's or a tenant's token").await;
    let _refused_fetch_logged = console_errors(&client).await;
    use_token(&client, ADMIN).await;

    let calls = open(&client, url, "calls", &id).await;
    assert!(calls.contains("acme") && calls.contains("USD"), "{calls}");

    // The call's timeline: two attempts, in order, priced each at its own tokens.
    let one = open(&client, url, &format!("calls/{id}"), "Attempts").await;
    let attempts = client.find_all(Locator::Css("li.attempt")).await.unwrap();
    let mut reasons = Vec::new();
    for a in &attempts {
        reasons.push(a.attr("data-reason").await.unwrap().unwrap_or_default());
    }
    assert_eq!(reasons, ["first", "truncation"], "{one}");
    // 11 input and 100 output tokens at 2 and 10 per million; then 11 and 20.
    let first = attempts[0].text().await.unwrap();
    let second = attempts[1].text().await.unwrap();
    assert!(
        first.contains("0.001022 USD") && first.contains("token limit 100"),
        "{first}"
    );
    assert!(
        second.contains("0.000222 USD") && second.contains("token limit 200"),
        "{second}"
    );
    assert!(one.contains("0.001244 USD"), "{one}");
    // Without `[runlog] keepText`, the prompt and each answer show as their
    // hashes, saying why there is no text.
    assert!(one.contains("the prompt's text is not kept"), "{one}");
    assert!(second.contains("the answer's text is not kept"), "{second}");

    // The budget after it: 2 of 10 requests spent.
    let tenants = open(&client, url, "tenants", "Window: 1d").await;
    let acme = tenants.split("acme's budget").nth(1).unwrap_or_default();
    assert!(acme.contains("Requests 10 2 0 8"), "{tenants}");
    // In money: the call's bill, 0.001244 of 1.00, in its currency, each
    // amount the exact decimal the host wrote.
    assert!(
        acme.contains("Cost 1 USD 0.001244 USD 0 USD 0.998756 USD"),
        "{tenants}"
    );
    assert!(tenants.contains("admin has no budget"), "{tenants}");
    assert!(
        client.find(Locator::Css("svg.chart rect")).await.is_ok(),
        "no spend bar"
    );

    let providers = open(&client, url, "providers", "Reason Requests").await;
    assert!(
        providers.contains("first 1") && providers.contains("truncation 1"),
        "{providers}"
    );

    let runs = open(&client, url, "runs", "r-ui").await;
    assert!(runs.contains("admin"), "{runs}");
    let run = open(&client, url, "runs/r-ui", "Events").await;
    assert!(run.contains("Status\nok"), "{run}");
    assert!(run.contains("provider.usage"), "{run}");
    let run_calls = client.find_all(Locator::Css("main table")).await.unwrap();
    assert_eq!(run_calls.len(), 2, "a table of calls and one of events");
    let calls_text = run_calls[0].text().await.unwrap();
    assert!(
        calls_text.contains("run") && calls_text.contains(" 2 "),
        "{calls_text}"
    );

    // A tenant's token, given in the form, shows its own budget only.
    open(&client, url, "tenants", "Window: 1d").await;
    use_token(&client, ACME).await;
    let own = wait_until(&client, "acme's budget alone", |t| {
        t.contains("acme's budget") && !t.contains("admin")
    })
    .await;
    assert!(own.contains("Requests 10 2 0 8"), "{own}");
    let errors = console_errors(&client).await;
    assert!(errors.is_empty(), "{errors:?}");
    let page: Value = client
        .execute(
            "return document.querySelectorAll('nav a[aria-current=page]').length",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(page, json!(1), "one page is marked current");

    client.close().await.unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_nothing_yet_says_so_on_every_page() {
    // No token and no call: the laptop's first look.
    let server = TestServer::start("").await;
    let driver = chromedriver().await;
    let client = browser(&driver).await;
    let url = &server.url;
    open(&client, url, "calls", "No calls yet").await;
    open(&client, url, "runs", "No pack run has made a call yet").await;
    open(&client, url, "tenants", "admin has no budget").await;
    open(
        &client,
        url,
        "providers",
        "No provider request in the last hour",
    )
    .await;
    // A call id nobody holds is named in a plain error, not a blank page
    // (the browser logs the 404 itself).
    client
        .goto(&format!("{url}/ui/#/calls/call_0000"))
        .await
        .unwrap();
    let missing = wait_for_text(&client, "no call").await;
    assert!(missing.contains("call_0000"), "{missing}");
    client.close().await.unwrap();
    server.shutdown().await;
}

/// Issue 56, item 6: a run id two tenants each used is two runs on the
/// admin's runs page, and each opens as its own tenant's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_run_id_of_two_tenants_is_two_runs_each_opened_as_its_own() {
    let toml = "[server]\ntokenEnv = \"ADMIN\"\n\
                [tenants.north]\ntokenEnv = \"NORTH\"\n[tenants.south]\ntokenEnv = \"SOUTH\"\n";
    let server = TestServer::start_with(toml, None, |k| match k {
        "ADMIN" => Some(ADMIN.into()),
        "NORTH" => Some("tok-north-ui".into()),
        "SOUTH" => Some("tok-south-ui".into()),
        _ => None,
    })
    .await;
    // The same run id, north's with one attempt, south's with two.
    for (token, attempts) in [("tok-north-ui", 1), ("tok-south-ui", 2)] {
        let (mut input, script) = truncating(attempts);
        input["provider"] = json!("mock");
        let run =
            json!({"pack": "echo-attempts", "input": input, "script": script, "runId": "r-same"});
        let started = server.exchange("/v1/runs", &run, Some(token)).await;
        assert_eq!(started.status, 200, "{}", started.body);
    }
    let driver = chromedriver().await;
    let client = browser(&driver).await;
    let url = &server.url;
    client.goto(&format!("{url}/ui/")).await.unwrap();
    wait_for_text(&client, "Give the admin's or a tenant's token").await;
    let _refused_fetch_logged = console_errors(&client).await;
    use_token(&client, ADMIN).await;
    open(&client, url, "runs", "r-same").await;
    let rows = client
        .find_all(Locator::Css("main table tbody tr"))
        .await
        .unwrap();
    let mut shown = Vec::new();
    for row in &rows {
        shown.push(row.text().await.unwrap());
    }
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert!(shown.iter().any(|r| r.contains("north")) && shown.iter().any(|r| r.contains("south")));
    // Each row opens its own tenant's run: south's made two requests.
    for (tenant, requests) in [("north", "1"), ("south", "2")] {
        let row = format!("//main//tr[td[contains(., '{tenant}')]]//a");
        click_fresh(&client, &row).await;
        let run = wait_for_text(&client, "Events").await;
        assert!(run.contains(&format!("of {tenant}")), "{run}");
        assert!(
            run.contains(&format!("Provider requests\n{requests}")),
            "{run}"
        );
        let errors = console_errors(&client).await;
        assert!(errors.is_empty(), "{errors:?}");
        client.back().await.unwrap();
        wait_for_text(&client, "Recent runs").await;
    }
    client.close().await.unwrap();
    server.shutdown().await;
}
