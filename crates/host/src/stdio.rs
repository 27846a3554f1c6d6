//! What a pack writes to its standard output and error (`console.log`,
//! Python's `print` and `logging`, Rust's `println!`): kept as lines and
//! handed to the run's log, `pack.log` events at `info` (stdout) and `warn`
//! (stderr), within the run's log limits (`limits.maxLogLines`,
//! `maxLogBytes`). wasmtime-wasi's memory pipe would do the keeping, but it
//! traps the guest once full; this stream never fails a write: what does
//! not fit before the run's log takes it is dropped and counted.

use bytes::Bytes;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// One of the pack's two output streams.
#[derive(Debug, Clone)]
pub(crate) struct PackOutput {
    inner: Arc<Mutex<Pending>>,
    /// The level its lines are logged at.
    pub(crate) level: &'static str,
}

#[derive(Debug)]
struct Pending {
    bytes: Vec<u8>,
    /// The most it keeps between two takes.
    cap: usize,
    dropped: u64,
}

impl PackOutput {
    fn new(level: &'static str, cap: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Pending {
                bytes: Vec::new(),
                cap,
                dropped: 0,
            })),
            level,
        }
    }

    fn push(&self, bytes: &[u8]) {
        let mut pending = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let room = pending.cap.saturating_sub(pending.bytes.len());
        let kept = bytes.len().min(room);
        pending.bytes.extend_from_slice(&bytes[..kept]);
        pending.dropped += (bytes.len() - kept) as u64;
    }

    /// The whole lines written since the last take (and, at the `end`,
    /// the last line without its newline), as text; then a line that
    /// says how many bytes did not fit, when some did not.
    pub(crate) fn take_lines(&self, end: bool) -> Vec<String> {
        let mut pending = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let whole = match end {
            true => pending.bytes.len(),
            false => pending
                .bytes
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |i| i + 1),
        };
        let taken: Vec<u8> = pending.bytes.drain(..whole).collect();
        let mut lines: Vec<String> = String::from_utf8_lossy(&taken)
            .lines()
            .map(str::to_owned)
            .collect();
        if pending.dropped > 0 {
            lines.push(format!(
                "[{} bytes of output dropped: over limits.maxLogBytes]",
                std::mem::take(&mut pending.dropped)
            ));
        }
        lines
    }
}

/// The pack's standard output and error.
#[derive(Debug, Clone)]
pub(crate) struct PackStdio {
    pub(crate) stdout: PackOutput,
    pub(crate) stderr: PackOutput,
}

impl PackStdio {
    /// Streams that keep at most `cap` bytes each between two takes.
    pub(crate) fn new(cap: u64) -> Self {
        let cap = usize::try_from(cap).unwrap_or(usize::MAX);
        Self {
            stdout: PackOutput::new("info", cap),
            stderr: PackOutput::new("warn", cap),
        }
    }
}

impl IsTerminal for PackOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for PackOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for PackOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        // Every write is taken (what does not fit is counted, not refused).
        Ok(64 << 10)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for PackOutput {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for PackOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.push(bytes);
        Poll::Ready(Ok(bytes.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::PackOutput;

    #[test]
    fn whole_lines_are_taken_and_what_does_not_fit_is_counted() {
        let out = PackOutput::new("info", 16);
        out.push(b"one\ntw");
        assert_eq!(out.take_lines(false), ["one"]);
        out.push(b"o\nthree");
        assert_eq!(out.take_lines(false), ["two"]);
        assert_eq!(out.take_lines(true), ["three"]);
        out.push(b"0123456789abcdefXYZ\n");
        assert_eq!(
            out.take_lines(true),
            [
                "0123456789abcdef",
                "[4 bytes of output dropped: over limits.maxLogBytes]"
            ]
        );
        assert!(out.take_lines(true).is_empty());
    }
}
