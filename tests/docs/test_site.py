"""The site builds strict and covers the public API: every public name has a reference entry,
no private name has one, every client option has a row in the limits table, and the README
is a front page (short, no link out of the repository, nothing only it says)."""

from __future__ import annotations

import importlib
import re
import typing
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PUBLIC_MODULES = ("conduit_mcp", "conduit_mcp.otp", "conduit_mcp.testing")


def inventory(site: Path) -> set[str]:
    """The objects the reference documents, from mkdocstrings' objects.inv."""
    data = (site / "objects.inv").read_bytes()
    body = zlib.decompress(data.split(b"\n", 4)[4]).decode()
    return {line.split()[0] for line in body.splitlines() if " py:" in line}


def public_names() -> list[str]:
    names = []
    for module in PUBLIC_MODULES:
        for name in importlib.import_module(module).__all__:
            names.append(f"{module}.{name}")
    return names


def test_every_public_name_has_a_reference_entry(built_site: Path) -> None:
    documented = inventory(built_site)
    missing = [name for name in public_names() if name not in documented]
    assert not missing, f"add these to a page under docs/reference/: {missing}"


def test_the_reference_documents_no_private_name(built_site: Path) -> None:
    private = set()
    for page in (built_site / "reference").rglob("*.html"):
        for anchor in re.findall(r'id="(conduit_mcp\.[\w.]+)"', page.read_text("utf-8")):
            last = anchor.rsplit(".", 1)[-1]
            if last.startswith("_") and not (last.startswith("__") and last.endswith("__")):
                private.add(anchor)
            if last == "__all__":
                private.add(anchor)
    assert not private, sorted(private)


def test_the_reference_shows_methods_and_their_examples(built_site: Path) -> None:
    documented = inventory(built_site)
    for method in ("call_tool", "list_all_tools", "await_ready", "ping"):
        for front in ("Client", "AsyncClient", "FutureClient"):
            assert f"conduit_mcp.{front}.{method}" in documented
    html = (built_site / "reference" / "client" / "index.html").read_text("utf-8")
    assert ":class:`" not in html, "a Sphinx role was left unrewritten (scripts/griffe_roles.py)"


def _limits_rows() -> set[str]:
    text = (DOCS / "limits.md").read_text(encoding="utf-8")
    rows = set()
    for line in text.splitlines():
        if line.startswith("| `"):
            rows |= set(re.findall(r"`(\w+)`", line.split("|")[1]))
    return rows


def test_every_client_option_has_a_row_in_the_limits_table() -> None:
    from conduit_mcp import ClientOptions

    options = set(typing.get_type_hints(ClientOptions)) | {"name"}
    missing = sorted(options - _limits_rows())
    assert not missing, f"add rows to docs/limits.md for {missing}"


@pytest.mark.parametrize("spec", ["Stdio", "Http", "InProcess"])
def test_every_transport_argument_has_a_row_in_the_limits_tables(spec: str) -> None:
    import inspect

    import conduit_mcp

    params = set(inspect.signature(getattr(conduit_mcp, spec)).parameters) - {"self"}
    missing = sorted(params - _limits_rows())
    assert not missing, f"add rows to docs/limits.md for {spec}'s {missing}"


def test_the_readme_is_a_front_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 200
    for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if not link.startswith("https://"):
            assert (ROOT / link).exists(), f"README links to {link}, which does not exist"
    assert "](docs/quickstart.md)" in readme


@pytest.mark.parametrize("path", [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))], ids=str)
def test_no_page_points_outside_the_repository(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for needle in ("../shared", "DESIGN.md", "shared/reference", "seeds/"):
        assert needle not in text, f"{path.name} refers to {needle}, outside the repository"
    assert not re.search(r"\bseed \d{3}\b", text), f"{path.name} cites a seed"


def test_every_page_is_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = [p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")]
    missing = [p for p in pages if f" {p}" not in nav]
    assert not missing, f"add to mkdocs.yml's nav: {missing}"


def _raised_reasons() -> set[tuple[str, str]]:
    """Every ``Error(kind, reason, ...)`` with literal arguments in the package (the scripted
    servers under conduit_mcp/testing/ excepted: they are not the client)."""
    import ast

    pairs = set()
    for path in (ROOT / "conduit_mcp").rglob("*.py"):
        if "testing" in path.relative_to(ROOT).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            func = getattr(node, "func", None)
            name = getattr(func, "id", getattr(func, "attr", None))
            if isinstance(node, ast.Call) and name == "Error" and len(node.args) >= 2:
                kind, reason = node.args[:2]
                if isinstance(kind, ast.Constant) and isinstance(reason, ast.Constant):
                    pairs.add((kind.value, reason.value))
    return pairs


def test_every_kind_and_reason_the_client_raises_is_on_the_errors_page() -> None:
    import conduit_mcp

    page = (DOCS / "errors.md").read_text(encoding="utf-8")
    missing_kinds = [k for k in conduit_mcp.KINDS if f"| `{k}` |" not in page]
    assert not missing_kinds, f"docs/errors.md has no row for the kinds {missing_kinds}"
    pairs = _raised_reasons()
    assert len(pairs) > 50, "the scan is broken"
    # A config error's reason is the option's name: the page says so, Limits lists them.
    missing = sorted(p for p in pairs if p[0] != "config" and f"`{p[1]}`" not in page)
    assert not missing, f"add these (kind, reason) to docs/errors.md: {missing}"
