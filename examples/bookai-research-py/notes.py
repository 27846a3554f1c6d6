"""The book's research notes, which the two tools read (the notes of
examples/bookai-research, word for word)."""

from __future__ import annotations

from typing import Any

NOTES = [
    (
        "n1",
        "Skerry lighthouse, 1921",
        "The Skerry light was lit by paraffin until 1921, when an acetylene lamp "
        "and a sun valve made the keeper's night watch unnecessary.",
    ),
    (
        "n2",
        "Keepers' letters",
        "Keepers wrote to the Northern Lighthouse Board weekly; letters went out with "
        "the relief boat, which could not land in a westerly gale for weeks at a time.",
    ),
    ("n3", "Fog signals", "A fog signal sounded twice every ninety seconds; keepers logged each hour of fog."),
    ("n4", "Relief boat", "The relief boat came every fortnight with stores, mail and the relieving keeper."),
]


def search(query: str) -> dict[str, Any]:
    """The notes whose title or text mentions any word of ``query``."""
    words = [w.strip("".join(c for c in w if not c.isalnum())).lower() for w in query.split()]
    words = [w for w in words if len(w) > 2]
    found = [
        {"id": i, "title": title}
        for i, title, text in NOTES
        if any(w in f"{title} {text}".lower() for w in words)
    ]
    return {"notes": found}


def read(note_id: str) -> str | None:
    """The note ``note_id``, in full."""
    for i, title, text in NOTES:
        if i == note_id:
            return f"{title}: {text}"
    return None
