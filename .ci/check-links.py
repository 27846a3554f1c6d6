#!/usr/bin/env python3
"""Checks every relative link of the README and the book: the file it
names exists, and so does the heading its #anchor names. Links to other
sites are left alone (CI has no network beyond the package registries)."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def prose(path: Path) -> str:
    """The file without its code blocks (a link in code is not a link)."""
    out, code = [], False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            code = not code
        elif not code:
            out.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


def slug(heading: str) -> str:
    """The anchor GitHub and mdBook give a heading."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    headings = (l.lstrip("#") for l in path.read_text().splitlines() if l.startswith("#"))
    return {slug(h) for h in headings}


def main() -> int:
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs/src").glob("*.md"))]
    broken = []
    for page in pages:
        for target in LINK.findall(prose(page)):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.relative_to(ROOT)}: {target}: no heading #{anchor}")
    for line in broken:
        print(line)
    print(f"{len(pages)} pages, {len(broken)} broken links")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
