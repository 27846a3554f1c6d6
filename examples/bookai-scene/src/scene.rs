//! The scene the node asks for, and its own closed-world check: stricter
//! than the schema the host validates, as a real pack's is.

use serde_json::{Value, json};

/// The moods a scene may have.
pub const MOODS: [&str; 4] = ["calm", "tense", "joyful", "melancholy"];
const FIELDS: [&str; 4] = ["title", "scene", "characters", "mood"];

/// The schema sent with the request: the host checks shape and types.
pub fn schema() -> Value {
    json!({
        "type": "object",
        "required": FIELDS,
        "properties": {
            "title": {"type": "string"},
            "scene": {"type": "string"},
            "characters": {"type": "array", "items": {"type": "string"}},
            "mood": {"type": "string"}
        }
    })
}

/// The node's own check, closed-world: exactly these fields, a known mood,
/// at least one character, a scene of some length.
pub fn validate(data: &Value) -> Result<(), String> {
    let obj = data.as_object().ok_or("the scene must be a JSON object")?;
    if let Some(extra) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(format!(
            "unexpected field {extra:?}: only {FIELDS:?} are allowed"
        ));
    }
    let text = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or_default();
    if text("title").trim().is_empty() {
        return Err("title must be a non-empty string".into());
    }
    if text("scene").chars().count() < 20 {
        return Err("scene must be at least 20 characters".into());
    }
    if !MOODS.contains(&text("mood")) {
        return Err(format!("mood must be one of {MOODS:?}"));
    }
    let characters = obj.get("characters").and_then(Value::as_array);
    if characters.is_none_or(|c| c.is_empty() || c.iter().any(|n| !n.is_string())) {
        return Err("characters must be a non-empty list of names".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> Value {
        json!({"title": "Dusk", "scene": "The lamp came on over the water.", "characters": ["Ada"], "mood": "calm"})
    }

    #[test]
    fn a_good_scene_passes() {
        assert!(validate(&good()).is_ok());
    }

    #[test]
    fn each_closed_world_rule_is_enforced() {
        let mut extra = good();
        extra["notes"] = json!("x");
        let mut mood = good();
        mood["mood"] = json!("spooky");
        let mut nobody = good();
        nobody["characters"] = json!([]);
        let mut short = good();
        short["scene"] = json!("Too short.");
        for (bad, needle) in [
            (extra, "notes"),
            (mood, "mood"),
            (nobody, "characters"),
            (short, "scene"),
        ] {
            assert!(validate(&bad).unwrap_err().contains(needle));
        }
    }
}
