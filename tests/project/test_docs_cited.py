"""Code comments cite the repo's own docs, and every cited section exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [p for d in ("specmon", "tests", "benchmarks") for p in (ROOT / d).rglob("*.py")]
OUTSIDE = re.compile(r"aiperf-semantics|tuning-math|shared/reference")
CITATION = re.compile(r"docs/(\w+)\.md §([\d.]+)(?:-§([\d.]+))?")


def _sections(doc: Path) -> set[str]:
    """'2', '8.1', ... from headings like '## 2. Title' and '### 8.1 `file`'."""
    found = re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", doc.read_text(encoding="utf-8"), re.M)
    return set(found)


def test_no_comment_cites_a_file_outside_the_repo() -> None:
    offenders = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in SOURCES
        if p.name != Path(__file__).name
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE.search(line) and "Path(" not in line and "open(" not in line
    ]
    assert offenders == []


def test_every_cited_docs_section_exists() -> None:
    sections = {doc.stem: _sections(doc) for doc in (ROOT / "docs").glob("*.md")}
    assert {"1", "8.4", "11"} <= sections["metrics"] and {"2", "8"} <= sections["tuning"]
    missing = []
    for p in SOURCES:
        for doc, first, last in CITATION.findall(p.read_text(encoding="utf-8")):
            for number in filter(None, (first.rstrip("."), last.rstrip("."))):
                if number not in sections.get(doc, set()):
                    missing.append(f"{p.relative_to(ROOT)}: docs/{doc}.md §{number}")
    assert missing == []
