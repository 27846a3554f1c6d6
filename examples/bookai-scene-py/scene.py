"""The scene the node asks for, and its own closed-world check: stricter
than the schema the host validates, as a real pack's is. The rules, and
their messages, of examples/bookai-scene/src/scene.rs."""

from __future__ import annotations

import json
from typing import Any

MOODS = ["calm", "tense", "joyful", "melancholy"]
FIELDS = ["title", "scene", "characters", "mood"]


def _debug_list(items: list[str]) -> str:
    """How Rust's ``{:?}`` shows a list of strings."""
    return "[" + ", ".join(json.dumps(i, ensure_ascii=False) for i in items) + "]"


def schema() -> dict[str, Any]:
    """The schema sent with the request: the host checks shape and types."""
    return {
        "type": "object",
        "required": FIELDS,
        "properties": {
            "title": {"type": "string"},
            "scene": {"type": "string"},
            "characters": {"type": "array", "items": {"type": "string"}},
            "mood": {"type": "string"},
        },
    }


def validate(data: Any) -> str | None:
    """The node's own check, closed-world; a message when it fails."""
    if not isinstance(data, dict):
        return "the scene must be a JSON object"
    extra = next((k for k in data if k not in FIELDS), None)
    if extra is not None:
        return f"unexpected field {json.dumps(extra, ensure_ascii=False)}: only {_debug_list(FIELDS)} are allowed"

    def text(k: str) -> str:
        v = data.get(k)
        return v if isinstance(v, str) else ""

    if text("title").strip() == "":
        return "title must be a non-empty string"
    if len(text("scene")) < 20:
        return "scene must be at least 20 characters"
    if text("mood") not in MOODS:
        return f"mood must be one of {_debug_list(MOODS)}"
    characters = data.get("characters")
    if not isinstance(characters, list) or not characters or any(not isinstance(n, str) for n in characters):
        return "characters must be a non-empty list of names"
    return None
