"""A griffe extension for the reference: the docstrings' Sphinx roles as code spans.

The package's docstrings cross-reference with Sphinx roles (``:class:`~conduit_mcp.X```),
which MkDocs does not read; left alone they would show as literal text. Each role becomes a
Markdown code span of the name it shows (the last part when it starts with ``~``), and a
reST literal (````x````) a single-backtick span. Loaded by mkdocs.yml's mkdocstrings options.
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


def rewrite(text: str) -> str:
    """Turn Sphinx roles and reST literals into Markdown code spans."""
    return _DOUBLE_COLON.sub(":", _LITERAL.sub(r"`\1`", _ROLE.sub(_role, text)))


class SphinxRoles(griffe.Extension):
    """Rewrite every docstring once it is loaded."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
