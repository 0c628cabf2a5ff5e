"""What to spawn for a stdio server: a frozen value, validated once (see Stdio)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from ..errors import Error

#: The parent's variables a stdio server gets by default: the ones the official ``mcp``
#: client passes (``mcp.client.stdio.DEFAULT_INHERITED_ENV_VARS``), so a server configured for
#: a desktop host starts the same way here, and no secret of the parent (API keys, cloud
#: credentials, tokens) reaches a server nobody gave it to.
DEFAULT_INHERITED_ENV_VARS: Final[tuple[str, ...]] = (
    (
        "APPDATA",
        "HOMEDRIVE",
        "HOMEPATH",
        "LOCALAPPDATA",
        "PATH",
        "PATHEXT",
        "PROCESSOR_ARCHITECTURE",
        "SYSTEMDRIVE",
        "SYSTEMROOT",
        "TEMP",
        "USERNAME",
        "USERPROFILE",
    )
    if sys.platform == "win32"
    else ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
)


def default_environment() -> dict[str, str]:
    """The minimal environment: :data:`DEFAULT_INHERITED_ENV_VARS` that are set in the parent.

    A value starting with ``()`` (an exported shell function) is left out, as the official
    client does: it would run code in a shell the server starts.
    """
    return {
        key: value
        for key in DEFAULT_INHERITED_ENV_VARS
        if (value := os.environ.get(key)) is not None and not value.startswith("()")
    }


@dataclass(frozen=True, slots=True)
class Stdio:
    """A server started as a subprocess, speaking newline-delimited JSON-RPC on its stdio.

    >>> spec = Stdio("python", ["-m", "my_server"], env={"TOKEN": "s3cret"})
    >>> "s3cret" in repr(spec)
    False
    >>> Stdio("server", ["--token=s3cret"])
    Stdio(command='server', cwd=None, inherit_env=False, stderr_limit=65536, close_grace=2.0)

    The server's environment is a minimal one, ``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``,
    ``TERM`` and ``USER`` from the parent (what the official ``mcp`` client passes; see
    :data:`DEFAULT_INHERITED_ENV_VARS`), plus ``env``, which wins. The rest of the parent's
    environment (its API keys and tokens) never reaches the server unless ``inherit_env=True``
    (then ``env`` is added to the whole parent environment). Give a server what it needs
    through ``env``: ``env={"PYTHONPATH": ..., "API_KEY": ...}``.

    >>> env = Stdio("server", env={"TOKEN": "t"}).environment()
    >>> env["TOKEN"], set(env) <= {"TOKEN", *DEFAULT_INHERITED_ENV_VARS}
    ('t', True)

    ``stderr_limit`` bounds the
    bytes of the server's stderr kept for ``Client.stderr()`` (the oldest are dropped).
    ``close_grace`` is how long ``close`` waits after closing stdin and after SIGTERM before
    the next step (SIGTERM, then SIGKILL).
    """

    command: str
    args: Sequence[str] = field(default=(), repr=False)  # may carry a --token=...
    env: Mapping[str, str] | None = field(default=None, repr=False)
    cwd: str | None = None
    inherit_env: bool = False  # True: the whole parent environment (with its secrets)
    stderr_limit: int = 64 * 1024
    close_grace: float = 2.0

    def __post_init__(self) -> None:
        if not isinstance(self.command, str) or not self.command:
            raise Error("config", "stdio.command", "Stdio command must be a non-empty string")
        if isinstance(self.args, str) or not all(isinstance(a, str) for a in self.args):
            raise Error("config", "stdio.args", "Stdio args must be a sequence of strings")
        object.__setattr__(self, "args", tuple(self.args))
        if self.env is not None:
            if not isinstance(self.env, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in self.env.items()
            ):
                raise Error("config", "stdio.env", "Stdio env must map str to str")
            object.__setattr__(self, "env", dict(self.env))
        if not isinstance(self.inherit_env, bool):
            raise Error("config", "stdio.inherit_env", "Stdio inherit_env must be True or False")
        if self.cwd is not None and not isinstance(self.cwd, (str, os.PathLike)):
            raise Error("config", "stdio.cwd", "Stdio cwd must be a path")
        if not isinstance(self.stderr_limit, int) or self.stderr_limit < 0:
            raise Error("config", "stdio.stderr_limit", "stderr_limit must be an int >= 0")
        if not isinstance(self.close_grace, (int, float)) or self.close_grace < 0:
            raise Error("config", "stdio.close_grace", "close_grace must be a number >= 0")

    def environment(self) -> dict[str, str]:
        """The environment the child gets: the minimal one (or, with ``inherit_env``, this
        process's whole environment), then ``env`` over it.

        >>> env = Stdio("server", env={"API_KEY": "k", "PATH": "/opt/bin"}).environment()
        >>> env["API_KEY"], env["PATH"], "AWS_SECRET_ACCESS_KEY" in env
        ('k', '/opt/bin', False)
        """
        merged = dict(os.environ) if self.inherit_env else default_environment()
        merged.update(self.env or {})
        return merged
