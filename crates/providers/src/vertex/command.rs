//! `tokenCommand`: an access token printed by a command the operator names
//! (`gcloud auth print-access-token`), run by `sh -c` with no input.

use std::process::Stdio;
use std::time::Duration;

/// The most of a command's output read as a token.
const MAX_TOKEN: usize = 8 << 10;

/// Runs `command`, and its output trimmed is the token; why not (it
/// failed to start, ran past `timeout`, exited non-zero with what it said
/// on stderr, or printed nothing or too much). The output is never shown.
pub(super) async fn run(command: &str, timeout: Duration) -> Result<String, String> {
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("could not start sh: {e}"))?;
    let output = tokio::time::timeout(timeout, child.wait_with_output())
        .await
        .map_err(|_| format!("did not finish in {} ms", timeout.as_millis()))?
        .map_err(|e| format!("could not be read: {e}"))?;
    if !output.status.success() {
        let said = super::said(&String::from_utf8_lossy(&output.stderr));
        return Err(format!("exited with {}: {said}", output.status));
    }
    let token = std::str::from_utf8(&output.stdout)
        .map_err(|_| "printed something that is not text".to_owned())?
        .trim();
    if token.is_empty() {
        return Err("printed no token".into());
    }
    if token.len() > MAX_TOKEN || token.chars().any(char::is_whitespace) {
        return Err("printed more than one token".into());
    }
    Ok(token.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_now(command: &str, timeout: Duration) -> Result<String, String> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(run(command, timeout))
    }

    #[test]
    fn the_token_is_the_commands_output_trimmed() {
        let second = Duration::from_secs(10);
        assert_eq!(
            run_now("printf ' ya29.abc\\n'", second).unwrap(),
            "ya29.abc"
        );
        let e = run_now("echo oops >&2; exit 3", second).unwrap_err();
        assert!(e.contains("exit status: 3") && e.contains("oops"), "{e}");
        assert!(run_now("true", second).unwrap_err().contains("no token"));
        assert!(
            run_now("echo a b", second)
                .unwrap_err()
                .contains("more than one")
        );
        let e = run_now("sleep 5", Duration::from_millis(100)).unwrap_err();
        assert!(e.contains("did not finish in 100 ms"), "{e}");
    }
}
