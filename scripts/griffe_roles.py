"""A griffe extension for the reference: the docstrings' reST habits as Markdown.

The package's docstrings cross-reference with Sphinx roles (``:class:`~conduit_mcp.X```) and
write doctests straight into the text, which MkDocs does not read: left alone, a role shows as
literal text and a ``>>>`` line as a quotation. Each role becomes a code span of the name it
shows (the last part when it starts with ``~``), a reST literal (````x````) a code span, an
``Example::`` its plain colon, and each run of doctest lines (with the output after it) a
fenced ``pycon`` block. Loaded by mkdocs.yml's mkdocstrings options; pytest still runs the
doctests from the source, unchanged.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|data|attr|mod|exc|obj|const):`(~?)([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")
# reST's "Example::" introduces an indented block; Markdown needs only the blank line.
_DOUBLE_COLON = re.compile(r"(?<=\S)::$", re.M)


def _role(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


def fence_doctests(text: str) -> str:
    """Wrap each doctest (``>>>`` lines and their output, up to a blank line) in a fence."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if not stripped.startswith(">>>"):
            out.append(line)
            i += 1
            continue
        indent = len(line) - len(stripped)
        block = []
        while i < len(lines) and lines[i].strip():
            block.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i].lstrip())
            i += 1
        if out and out[-1].strip():
            out.append("")
        out += ["```pycon", *block, "```"]
    return "\n".join(out)


def rewrite(text: str) -> str:
    """The reST habits above, as Markdown (doctests fenced first: their code stays as is)."""
    parts = re.split(r"(```pycon\n.*?\n```)", fence_doctests(text), flags=re.S)
    for n in range(0, len(parts), 2):
        parts[n] = _DOUBLE_COLON.sub(":", _LITERAL.sub(r"`\1`", _ROLE.sub(_role, parts[n])))
    return "".join(parts)


class SphinxRoles(griffe.Extension):
    """Rewrite every docstring once it is loaded."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
