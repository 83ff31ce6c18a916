"""Every relative link of README.md, CONTRIBUTING.md and docs/ leads somewhere, and the
docs stay a length a newcomer reads in an hour.

The README is the front door and docs/ holds one page per reader (docs/design/ the
maintainers' notes): a link from one page to another, or to a heading
(`page.md#heading`), must name a file of the repository and a heading that page has
(GitHub's anchors: lower case, punctuation dropped, spaces as `-`).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DESIGN = sorted((ROOT / "docs" / "design").glob("*.md"))
EVERY_PAGE = [*PAGES, ROOT / "CONTRIBUTING.md", *DESIGN]
WORDS_AT_MOST = 25_000  # every page above together
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _without_code(text: str) -> str:
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(page: Path) -> set[str]:
    """GitHub's anchor of each heading of the page."""
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", _without_code(page.read_text()), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
        found.add(slug.replace(" ", "-"))
    return found


def test_the_pages_exist():
    names = {page.name for page in PAGES}
    assert {
        "concepts.md",
        "sql-reference.md",
        "operations.md",
        "upgrade.md",
        "reliability.md",
        "benchmarks.md",
    } <= names


def test_every_relative_link_resolves():
    broken = []
    for page in EVERY_PAGE:
        for target in LINK.findall(_without_code(page.read_text())):
            if re.match(r"[a-z]+:", target):
                continue  # an absolute URL
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []


def test_the_readme_links_every_page():
    readme = (ROOT / "README.md").read_text()
    for page in PAGES[1:]:
        assert f"(docs/{page.name})" in readme, f"README.md does not link docs/{page.name}"


def test_the_docs_together_stay_under_their_word_budget():
    words = sum(len(page.read_text().split()) for page in EVERY_PAGE)
    assert words <= WORDS_AT_MOST, f"{words} words in README, CONTRIBUTING and docs/"


def test_the_design_notes_exist_and_are_linked():
    assert DESIGN, "docs/design/ holds the maintainers' notes"
    linked = "".join(page.read_text() for page in EVERY_PAGE)
    for note in DESIGN:
        assert f"design/{note.name}" in linked, f"nothing links docs/design/{note.name}"
