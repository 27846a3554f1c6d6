//! Lenient JSON recovery: before a reply counts as a parse failure, strip a
//! markdown fence or find the outermost JSON object in it. A recovery is not
//! a retry; it emits `envelope.recovery.applied`.

use serde_json::Value;

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

/// Parses `text` as JSON, leniently. `Err` carries the direct parse error.
pub fn recover(text: &str) -> Result<(Value, RecoveryPath), String> {
    let direct = serde_json::from_str::<Value>(text.trim());
    match direct {
        Ok(v) => Ok((v, RecoveryPath::Direct)),
        Err(e) => fenced(text)
            .map(|v| (v, RecoveryPath::MarkdownFence))
            .or_else(|| outermost_object(text).map(|v| (v, RecoveryPath::BraceWalker)))
            .ok_or_else(|| format!("not valid JSON ({e})")),
    }
}

/// The first fenced block (```` ``` ```` or ```` ```json ````) that parses.
fn fenced(text: &str) -> Option<Value> {
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        // Skip the info string (e.g. `json`) up to the end of the line.
        let body_start = after.find('\n').map_or(after.len(), |i| i + 1);
        let body = &after[body_start..];
        let close = body.find("```")?;
        if let Ok(v) = serde_json::from_str(body[..close].trim()) {
            return Some(v);
        }
        rest = &body[close + 3..];
    }
    None
}

/// The earliest `{` whose balanced object parses: the outermost object.
fn outermost_object(text: &str) -> Option<Value> {
    let bytes = text.as_bytes();
    let mut start = 0;
    while let Some(offset) = text[start..].find('{') {
        let open = start + offset;
        if let Some(close) = matching_brace(bytes, open)
            && let Ok(v) = serde_json::from_str::<Value>(&text[open..=close])
        {
            return Some(v);
        }
        start = open + 1;
    }
    None
}

/// The index of the `}` balancing the `{` at `open`, skipping strings.
fn matching_brace(bytes: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate().skip(open) {
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
            b'"' => in_string = true,
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
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
        let text = r#"Sure! {"scene": "a {brace} in \"quotes\"", "n": {"x": 1}} Hope that helps."#;
        let (v, path) = recover(text).unwrap();
        assert_eq!(path, RecoveryPath::BraceWalker);
        assert_eq!(v["n"]["x"], 1);
        assert_eq!(v["scene"], "a {brace} in \"quotes\"");
    }

    #[test]
    fn a_broken_first_object_falls_through_to_a_later_one() {
        let text = r#"{not json} then {"ok": true}"#;
        assert_eq!(recover(text).unwrap().0, json!({"ok": true}));
    }

    #[test]
    fn prose_and_truncated_json_are_parse_errors() {
        assert!(recover("I think the scene is lovely.").is_err());
        assert!(recover("{\"scene\": \"cut off").is_err());
        assert!(recover("}}}{{{").is_err());
        assert!(recover("").unwrap_err().contains("not valid JSON"));
    }
}
