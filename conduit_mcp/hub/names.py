"""Qualified names: ``<server><separator><name>``, the hooks that replace them, and the
closest names an unknown one resembles (pure functions).

Names are qualified by the config key, never by the server's self-reported name: two copies
of one server report the same name, and a server's name is not the user's choice.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from ..errors import Error

__all__ = ["MODEL_SAFE", "Naming", "closest"]

#: The tool-name rule of the model APIs that forbid dots (``^[a-zA-Z0-9_-]{1,64}$``).
MODEL_SAFE: Final = r"^[a-zA-Z0-9_-]{1,64}$"

Qualify = Callable[[str, str], str]
Unqualify = Callable[[str], "tuple[str, str] | None"]


@dataclass(frozen=True, slots=True)
class Naming:
    """How the Hub names what its servers list.

    >>> n = Naming(".")
    >>> n.qualify("files", "read"), n.unqualify("files.read.all"), n.unqualify("read")
    ('files.read', ('files', 'read.all'), None)
    >>> m = Naming("__", pattern=MODEL_SAFE)
    >>> m.qualify("files", "read"), m.acceptable("files__read"), m.acceptable("files.read")
    ('files__read', True, False)
    """

    separator: str = "."
    qualify_hook: Qualify | None = None
    unqualify_hook: Unqualify | None = None
    pattern: str | None = None

    def qualify(self, server: str, name: str) -> str:
        if self.qualify_hook is not None:
            return self.qualify_hook(server, name)
        return f"{server}{self.separator}{name}"

    def unqualify(self, qualified: str) -> tuple[str, str] | None:
        if self.unqualify_hook is not None:
            return self.unqualify_hook(qualified)
        server, found, name = qualified.partition(self.separator)
        if not found or not server or not name:
            return None
        return server, name

    def acceptable(self, qualified: str) -> bool:
        return self.pattern is None or re.fullmatch(self.pattern, qualified) is not None


def check_naming(
    separator: str, qualify: Qualify | None, unqualify: Unqualify | None, pattern: str | None
) -> Naming:
    """The Hub's naming options, checked in the caller's thread."""
    if not isinstance(separator, str) or not separator:
        raise Error("config", "separator", "option 'separator' must be a non-empty string")
    if (qualify is None) != (unqualify is None):
        raise Error(
            "config",
            "qualify",
            "give both qualify and unqualify (unqualify must undo qualify), or neither",
        )
    for name, hook in (("qualify", qualify), ("unqualify", unqualify)):
        if hook is not None and not callable(hook):
            raise Error("config", name, f"option {name!r} must be a function")
    if pattern is not None:
        try:
            re.compile(pattern)
        except (re.error, TypeError):
            raise Error(
                "config", "name_pattern", "option 'name_pattern' must be a regular expression"
            ) from None
    return Naming(separator, qualify, unqualify, pattern)


def closest(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The few candidates closest to ``name`` (difflib's ratio), best first.

    >>> closest("files.raed", ["files.read", "files.write", "git.log"])
    ['files.read', 'files.write']
    """
    return difflib.get_close_matches(name, list(candidates), n=n, cutoff=0.6)
