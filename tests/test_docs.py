"""The documents in docs/ that code comments cite exist, with the sections they cite.

Comments cite the design as ``docs/<page>.md, "<section title>"``. A renamed page or section
would leave those citations pointing nowhere; these tests find every citation in the package,
the tests and the benchmarks, and check it against the headings of the page.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

# The pages other modules cite, and the sections of the connection page they rely on.
PAGES = ("architecture", "actor-tree", "connection", "cache", "porting", "testing", "tls")
CONNECTION_SECTIONS = (
    "States",
    "Era discovery",
    "Requests",
    "Notifications",
    "Listens and resource subscriptions",
    "Cache",
    "HTTP outcomes",
    "Server-to-client requests",
    "Crash reports",
)

# docs/<page>.md, optionally in backticks, optionally followed by `, "<section>"`.
_CITATION = re.compile(r'docs/([\w-]+)\.md`*(?:,\s*"([^"]+)")?')
# A line break inside a comment or docstring: the newline, the indent and a comment mark.
_BREAK = re.compile(r"\n[ \t]*(?:#:?[ \t]*)?")


def _headings(page: str) -> set[str]:
    text = (DOCS / f"{page}.md").read_text(encoding="utf-8")
    return {m.group(1).strip() for m in re.finditer(r"^#{1,6}\s+(.+)$", text, re.M)}


def _citations() -> list[tuple[str, str, str | None]]:
    found = []
    for folder in ("conduit_mcp", "tests", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = _BREAK.sub(" ", path.read_text(encoding="utf-8"))
            for m in _CITATION.finditer(text):
                found.append((str(path.relative_to(ROOT)), m.group(1), m.group(2)))
    return found


@pytest.mark.parametrize("page", PAGES)
def test_each_cited_page_exists_with_a_title(page: str) -> None:
    text = (DOCS / f"{page}.md").read_text(encoding="utf-8")
    assert text.startswith("# "), f"docs/{page}.md must start with its title"


def test_the_connection_page_has_the_sections_code_cites() -> None:
    missing = [s for s in CONNECTION_SECTIONS if s not in _headings("connection")]
    assert not missing, f"docs/connection.md lacks the sections {missing}"


def test_every_citation_in_the_code_names_an_existing_page_and_section() -> None:
    citations = _citations()
    assert citations, "no docs/ citation found: the scan is broken"
    broken = []
    for where, page, section in citations:
        if not (DOCS / f"{page}.md").is_file():
            broken.append(f"{where}: docs/{page}.md does not exist")
        elif section is not None and section not in _headings(page):
            broken.append(f'{where}: docs/{page}.md has no section "{section}"')
    assert not broken, "\n".join(broken)


def test_links_between_the_pages_resolve() -> None:
    broken = []
    for path in sorted(DOCS.glob("*.md")):
        for target in re.findall(r"\]\(([\w-]+\.md)\)", path.read_text(encoding="utf-8")):
            if not (DOCS / target).is_file():
                broken.append(f"{path.name} -> {target}")
    assert not broken, broken
