//! Lenient JSON recovery: before a reply counts as a parse failure, strip a
//! markdown fence or find the outermost JSON object in it. A recovery is not
//! a retry; it emits `envelope.recovery.applied`.
//!
//! Replies come from providers the host does not control, so the work is
//! linear in the reply's length: braces are matched in one pass with a
//! stack, and at most [`MAX_CANDIDATES`] objects are tried, each parse
//! linear in its span.

use serde_json::Value;

/// The most `{...}` spans tried as JSON in one reply.
pub const MAX_CANDIDATES: usize = 32;

/// Which lenient path recovered a reply (`envelope.recovery.applied.path`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryPath {
    /// The reply parsed as it was.
    Direct,
    /// The JSON sat inside a ```json fence.
    MarkdownFence,
    /// The JSON was the outermost object inside other text.
    BraceWalker,
}

impl RecoveryPath {
    /// The event's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::MarkdownFence => "markdown-fence",
            Self::BraceWalker => "brace-walker",
        }
    }
}

/// Bytes examined by a recovery: what its linearity is judged by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work(pub u64);

/// Parses `text` as JSON, leniently. `Err` carries the direct parse error.
pub fn recover(text: &str) -> Result<(Value, RecoveryPath), String> {
    recover_counting(text, &mut Work::default())
}

/// [`recover`], adding the bytes it examined to `work`.
pub fn recover_counting(text: &str, work: &mut Work) -> Result<(Value, RecoveryPath), String> {
    work.0 += text.len() as u64;
    match serde_json::from_str::<Value>(text.trim()) {
        Ok(v) => Ok((v, RecoveryPath::Direct)),
        Err(e) => fenced(text, work)
            .map(|v| (v, RecoveryPath::MarkdownFence))
            .or_else(|| outermost_object(text, work).map(|v| (v, RecoveryPath::BraceWalker)))
            .ok_or_else(|| format!("not valid JSON ({e})")),
    }
}

/// The first fenced block (```` ``` ```` or ```` ```json ````) that parses.
fn fenced(text: &str, work: &mut Work) -> Option<Value> {
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        // Skip the info string (e.g. `json`) up to the end of the line.
        let body_start = after.find('\n').map_or(after.len(), |i| i + 1);
        let body = &after[body_start..];
        let close = body.find("```")?;
        work.0 += (open + 3 + body_start + close) as u64;
        if let Ok(v) = serde_json::from_str(body[..close].trim()) {
            return Some(v);
        }
        rest = &body[close + 3..];
    }
    None
}

/// The earliest `{` whose balanced object parses: the outermost object.
fn outermost_object(text: &str, work: &mut Work) -> Option<Value> {
    matched_objects(text.as_bytes(), work)
        .into_iter()
        .take(MAX_CANDIDATES)
        .find_map(|(open, close)| {
            work.0 += (close + 1 - open) as u64;
            serde_json::from_str::<Value>(&text[open..=close]).ok()
        })
}

/// Every balanced `{...}` span outside strings, by where it opens: one pass
/// with a stack of open braces.
fn matched_objects(bytes: &[u8], work: &mut Work) -> Vec<(usize, usize)> {
    work.0 += bytes.len() as u64;
    let mut open = Vec::new();
    let mut spans = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            // A quote only opens a string inside an object: prose between
            // objects may hold stray quotes.
            b'"' if !open.is_empty() => in_string = true,
            b'{' => open.push(i),
            b'}' => {
                if let Some(start) = open.pop() {
                    spans.push((start, i));
                }
            }
            _ => {}
        }
    }
    spans.sort_unstable();
    spans
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn direct_json_is_direct() {
        assert_eq!(
            recover(" {\"a\": 1} \n").unwrap(),
            (json!({"a": 1}), RecoveryPath::Direct)
        );
    }

    #[test]
    fn a_fence_is_stripped() {
        let text = "Here you go:\n```json\n{\"a\": [1, 2]}\n```\nanything else?";
        assert_eq!(
            recover(text).unwrap(),
            (json!({"a": [1, 2]}), RecoveryPath::MarkdownFence)
        );
        let bare = "```\n{\"b\": true}\n```";
        assert_eq!(recover(bare).unwrap().1, RecoveryPath::MarkdownFence);
    }

    #[test]
    fn the_outermost_object_is_found_in_prose() {
        let text = r#"Sure! {"scene": "a {brace} in \"quotes\"", "n": {"x": 1}} Hope that's "it"."#;
        let (v, path) = recover(text).unwrap();
        assert_eq!(path, RecoveryPath::BraceWalker);
        assert_eq!(v["n"]["x"], 1);
        assert_eq!(v["scene"], "a {brace} in \"quotes\"");
    }

    #[test]
    fn a_broken_first_object_falls_through_to_a_later_one_or_an_inner_one() {
        assert_eq!(
            recover(r#"{not json} then {"ok": true}"#).unwrap().0,
            json!({"ok": true})
        );
        assert_eq!(
            recover(r#"{broken {"inner": 1} still broken}"#).unwrap().0,
            json!({"inner": 1})
        );
    }

    #[test]
    fn prose_and_truncated_json_are_parse_errors() {
        assert!(recover("I think the scene is lovely.").is_err());
        assert!(recover("{\"scene\": \"cut off").is_err());
        assert!(recover("}}}{{{").is_err());
        assert!(recover("").unwrap_err().contains("not valid JSON"));
    }

    #[test]
    fn the_work_is_linear_in_the_reply_whatever_it_holds() {
        // Replies built to make a naive walker quadratic: many unmatched or
        // nested braces, many small broken objects, long fences.
        let n = 200_000;
        for hostile in [
            "{".repeat(n),
            "{}".repeat(n / 2),
            format!("{}{}", "{".repeat(n / 2), "}".repeat(n / 2)),
            "{x} ".repeat(n / 4),
            "```\n{\n```\n".repeat(n / 10),
            format!("{}\"{}", "{".repeat(n / 2), "\\\"".repeat(n / 4)),
        ] {
            let mut work = Work::default();
            let _ = recover_counting(&hostile, &mut work);
            let len = hostile.len() as u64;
            assert!(
                work.0 <= (MAX_CANDIDATES as u64 + 4) * len,
                "{} bytes examined for a reply of {len}",
                work.0
            );
        }
    }
}
