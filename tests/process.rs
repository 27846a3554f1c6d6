//! `callai serve` as a process of its own, as operators run it: started
//! from a config file with an environment, talked to over HTTP with a
//! caller's token, and killed (`kill -9` when a test says so) when dropped.

use serde_json::Value;
use std::process::Child;

/// A running `callai serve` process.
#[derive(Debug)]
pub struct Serve {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    client: reqwest::Client,
}

/// An answer: status, headers and the body as JSON (a string when it is
/// not JSON).
#[derive(Debug)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The headers.
    pub headers: reqwest::header::HeaderMap,
    /// The body.
    pub body: Value,
}

impl Serve {
    /// Starts the `callai` binary at `bin` as `serve --config CONFIG` on a
    /// loopback port of its choosing, with `envs`.
    pub fn start(bin: &str, config: &std::path::Path, envs: &[(&str, &str)]) -> Self {
        let config = config.to_str().expect("a path of text");
        let (child, addr) =
            crate::serve::spawn_serve(bin, &["--listen", "127.0.0.1:0", "--config", config], envs);
        Self {
            child,
            url: format!("http://{addr}"),
            client: crate::serve::http_client(),
        }
    }

    /// The process id, to read what it holds (`/proc/PID/status`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its resident memory now, in KiB (Linux's `VmRSS`).
    pub fn resident_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("the process's status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in kB")
    }

    /// Sends `method path` with `body` (JSON, when some) and `token`.
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        token: Option<&str>,
    ) -> Reply {
        self.send_bytes(
            method,
            path,
            body.map(|b| b.to_string().into_bytes()),
            token,
        )
        .await
    }

    /// Sends `method path` with raw `body` bytes and `token`.
    pub async fn send_bytes(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        token: Option<&str>,
    ) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let mut request = self.client.request(method, format!("{}{path}", self.url));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        let response = request.send().await.expect("the server answers");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.expect("a body");
        Reply {
            status,
            headers,
            body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
        }
    }

    /// `kill -9`: the process dies with whatever it had in flight.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.kill();
    }
}
