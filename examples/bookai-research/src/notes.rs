//! The book's research notes, which the two tools read.

use serde_json::{Value, json};

/// (id, title, text)
const NOTES: [(&str, &str, &str); 4] = [
    (
        "n1",
        "Skerry lighthouse, 1921",
        "The Skerry light was lit by paraffin until 1921, when an acetylene lamp \
         and a sun valve made the keeper's night watch unnecessary.",
    ),
    (
        "n2",
        "Keepers' letters",
        "Keepers wrote to the Northern Lighthouse Board weekly; letters went out with \
         the relief boat, which could not land in a westerly gale for weeks at a time.",
    ),
    (
        "n3",
        "Fog signals",
        "A fog signal sounded twice every ninety seconds; keepers logged each hour of fog.",
    ),
    (
        "n4",
        "Relief boat",
        "The relief boat came every fortnight with stores, mail and the relieving keeper.",
    ),
];

/// The notes whose title or text mentions any word of `query`.
pub(crate) fn search(query: &str) -> Value {
    let words: Vec<String> = query
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .filter(|w| w.len() > 2)
        .collect();
    let found: Vec<Value> = NOTES
        .iter()
        .filter(|(_, title, text)| {
            let hay = format!("{title} {text}").to_lowercase();
            words.iter().any(|w| hay.contains(w.as_str()))
        })
        .map(|(id, title, _)| json!({"id": id, "title": title}))
        .collect();
    json!({"notes": found})
}

/// The note `id`, in full.
pub(crate) fn read(id: &str) -> Option<String> {
    NOTES
        .iter()
        .find(|(i, _, _)| *i == id)
        .map(|(_, title, text)| format!("{title}: {text}"))
}
