"""Every relative link of the README and docs/ reaches a file, and its #anchor a heading of that file, as GitHub
makes a heading's anchor: lower case, punctuation dropped, spaces as hyphens, a repeated heading numbered -1, -2."""

import re
from pathlib import Path

from tests.conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCED = re.compile(r"^```.*?^```", re.M | re.S)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6}\s+(.*)$", FENCED.sub("", page.read_text()), re.M):
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return found


def broken(page: Path) -> list[str]:
    """The page's relative links whose file or anchor does not exist."""
    problems = []
    for target in LINK.findall(FENCED.sub("", page.read_text())):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            problems.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            problems.append(f"{target}: no such heading")
    return problems


def test_every_relative_link_and_anchor_of_the_docs_resolves():
    problems = {str(page.relative_to(ROOT)): found for page in PAGES if (found := broken(page))}
    assert not problems, problems


def test_the_anchor_of_a_heading_is_githubs():
    page = ROOT / "docs" / "rehearsal.md"
    assert {"reading-rehearsaljson", "the-class-day-labs", "the-hubs-user-scheduler"} <= anchors(page)
