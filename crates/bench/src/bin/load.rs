//! A load generator for `callai serve`: `--calls N` POSTs of `--body` (a
//! JSON text, sent as `application/json`) to `--url` with `--concurrency C`
//! in flight, with the extra `--headers` (a JSON object) on each. With
//! `--watch-pid PID`, samples that process's resident memory while the
//! load runs. Prints one JSON object: wall time, runs/s, latency p50/p99,
//! failures, peak resident memory seen.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = callai_bench::args();
    let url: String = callai_bench::arg(&args, "url", String::new());
    let body: String = callai_bench::arg(&args, "body", String::new());
    let calls: usize = callai_bench::arg(&args, "calls", 1000);
    let concurrency: usize = callai_bench::arg(&args, "concurrency", 200);
    let watch: String = callai_bench::arg(&args, "watch-pid", String::new());
    let extra: String = callai_bench::arg(&args, "headers", "{}".to_owned());
    let extra: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&extra).expect("--headers is a JSON object");
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::CONTENT_TYPE,
        reqwest::header::HeaderValue::from_static("application/json"),
    );
    for (name, value) in extra {
        let value = value.as_str().expect("--headers values are strings");
        headers.insert(
            reqwest::header::HeaderName::try_from(name).expect("a header name"),
            reqwest::header::HeaderValue::try_from(value).expect("a header value"),
        );
    }
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .default_headers(headers)
        .timeout(Duration::from_secs(600))
        .build()
        .expect("a client");

    let peak = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = (!watch.is_empty()).then(|| {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                let rss = callai_bench::status_kib(&watch, "VmRSS");
                peak.fetch_max(rss, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    });

    let next = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..concurrency.min(calls) {
        let (client, url, body) = (client.clone(), url.clone(), body.clone());
        let (next, failures) = (next.clone(), failures.clone());
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < calls as u64 {
                let t = Instant::now();
                let ok = match client.post(&url).body(body.clone()).send().await {
                    Ok(r) => {
                        let ok = r.status().is_success();
                        let text = r.text().await.unwrap_or_default();
                        ok && !text.contains("\"status\":\"failed\"")
                    }
                    Err(_) => false,
                };
                if !ok {
                    failures.fetch_add(1, Ordering::Relaxed);
                }
                latencies.push(t.elapsed());
            }
            latencies
        }));
    }
    let mut latencies = Vec::with_capacity(calls);
    for w in workers {
        latencies.extend(w.await.expect("a worker"));
    }
    let wall = started.elapsed();
    done.store(true, Ordering::Relaxed);
    if let Some(s) = sampler {
        let _ = s.join();
    }
    latencies.sort();
    let out = serde_json::json!({
        "calls": calls,
        "concurrency": concurrency,
        "failures": failures.load(Ordering::Relaxed),
        "wall_s": wall.as_secs_f64(),
        "per_s": calls as f64 / wall.as_secs_f64(),
        "p50_ms": callai_bench::percentile_ms(&latencies, 50.0),
        "p99_ms": callai_bench::percentile_ms(&latencies, 99.0),
        "watched_peak_rss_kib": peak.load(Ordering::Relaxed),
    });
    println!("{out}");
}
