//! The top-level fields of a request that are none of the spec's. The
//! RFC's compatibility rule lets a host ignore them, but one may be a
//! misspelt field (`response_schema`, `max_tokens`) whose loss turns the
//! call into another: a host can name each, with the field it looks like.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The request's fields, as the wire spells them.
pub const REQUEST_FIELDS: [&str; 12] = [
    "provider",
    "model",
    "systemPrompt",
    "messages",
    "temperature",
    "maxTokens",
    "stopSequences",
    "responseSchema",
    "retry",
    "tools",
    "toolChoice",
    "parallelToolCalls",
];

/// A field of a request that the spec does not define.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnknownField {
    /// The field as sent.
    pub name: String,
    /// The spec's field it looks like, when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub did_you_mean: Option<String>,
}

impl std::fmt::Display for UnknownField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` is not a field of a ctx.callAI request", self.name)?;
        match &self.did_you_mean {
            Some(known) => write!(f, " (did you mean `{known}`?)"),
            None => Ok(()),
        }
    }
}

/// The top-level fields of `request` (a JSON object) that are not the
/// spec's, in byte order.
pub fn unknown_fields(request: &Value) -> Vec<UnknownField> {
    let Some(object) = request.as_object() else {
        return Vec::new();
    };
    named(
        object
            .keys()
            .filter(|k| !REQUEST_FIELDS.contains(&k.as_str()))
            .cloned()
            .collect(),
    )
}

/// `names` (keys that are not the spec's) in byte order, once each, with
/// the field each looks like.
pub(crate) fn named(mut names: Vec<String>) -> Vec<UnknownField> {
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|name| UnknownField {
            did_you_mean: near_miss(&name).map(str::to_owned),
            name,
        })
        .collect()
}

/// The spec's field `name` was likely meant to be: the same but for case,
/// `_` and `-` (`response_schema`), or at most two edits away (`mesages`).
fn near_miss(name: &str) -> Option<&'static str> {
    let fold = |s: &str| -> String {
        s.chars()
            .filter(|c| !matches!(c, '_' | '-'))
            .flat_map(char::to_lowercase)
            .collect()
    };
    let folded = fold(name);
    REQUEST_FIELDS
        .iter()
        .map(|known| (known, edits(&folded, &fold(known))))
        .filter(|(_, d)| *d <= 2)
        .min_by_key(|(_, d)| *d)
        .map(|(known, _)| *known)
}

/// The Levenshtein distance of `a` and `b` (short names: the plain table).
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_named_with_the_field_they_look_like() {
        let request = json!({"messages": [], "response_schema": {}, "max_tokens": 5,
                             "mesages": [], "colour": "red"});
        let found: Vec<(String, Option<String>)> = unknown_fields(&request)
            .into_iter()
            .map(|u| (u.name, u.did_you_mean))
            .collect();
        let found: Vec<(&str, Option<&str>)> = found
            .iter()
            .map(|(n, d)| (n.as_str(), d.as_deref()))
            .collect();
        assert_eq!(
            found,
            [
                ("colour", None),
                ("max_tokens", Some("maxTokens")),
                ("mesages", Some("messages")),
                ("response_schema", Some("responseSchema")),
            ]
        );
        assert!(unknown_fields(&json!({"messages": [], "retry": {}})).is_empty());
    }
}
