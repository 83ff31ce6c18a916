"""The tree speaks of the product as it is: no development history a reader cannot look up.

Numbered work periods, issue numbers and the requirement files' names mean nothing outside
the team that wrote them; a reason is given in the present tense, and a rule from the
original requirements is named by what it says. Migrations are immutable (checksummed) and
keep their text; the changelog is where history belongs.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent
EXEMPT_PREFIXES = ("sql/migrations/",)
EXEMPT_FILES = {"CHANGELOG.md", "tests/runner/test_no_history.py"}
HISTORY = re.compile(
    r"session [0-9]+|issue #?[0-9]+|seed 00[01]"
    r"|before this change|the old code|earlier version",
    re.IGNORECASE,
)


def _tracked_text_files() -> list[Path]:
    names = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True)
        .stdout.decode()
        .split("\0")
    )
    files = []
    for name in names:
        if not name or name in EXEMPT_FILES or name.startswith(EXEMPT_PREFIXES):
            continue
        path = ROOT / name
        if path.is_file():
            files.append(path)
    return files


def test_no_development_history_in_the_tree():
    found = []
    for path in _tracked_text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # a binary file (an image)
        for number, line in enumerate(text.splitlines(), 1):
            match = HISTORY.search(line)
            if match:
                found.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)!r}")
    assert found == [], "development history in the tree:\n" + "\n".join(found)
