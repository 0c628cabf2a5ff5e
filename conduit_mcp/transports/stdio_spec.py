"""What to spawn for a stdio server: a frozen value, validated once (see Stdio)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import Error


@dataclass(frozen=True, slots=True)
class Stdio:
    """A server started as a subprocess, speaking newline-delimited JSON-RPC on its stdio.

    >>> spec = Stdio("python", ["-m", "my_server"], env={"TOKEN": "s3cret"})
    >>> "s3cret" in repr(spec)
    False
    >>> Stdio("server", ["--token=s3cret"])
    Stdio(command='server', cwd=None, inherit_env=True, stderr_limit=65536, close_grace=2.0)

    ``env`` is added to the parent's environment unless ``inherit_env=False`` (then it is the
    whole environment, plus ``PATH`` when ``env`` has none). ``stderr_limit`` bounds the
    bytes of the server's stderr kept for ``Client.stderr()`` (the oldest are dropped).
    ``close_grace`` is how long ``close`` waits after closing stdin and after SIGTERM before
    the next step (SIGTERM, then SIGKILL).
    """

    command: str
    args: Sequence[str] = field(default=(), repr=False)  # may carry a --token=...
    env: Mapping[str, str] | None = field(default=None, repr=False)
    cwd: str | None = None
    inherit_env: bool = True
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
        if self.cwd is not None and not isinstance(self.cwd, (str, os.PathLike)):
            raise Error("config", "stdio.cwd", "Stdio cwd must be a path")
        if not isinstance(self.stderr_limit, int) or self.stderr_limit < 0:
            raise Error("config", "stdio.stderr_limit", "stderr_limit must be an int >= 0")
        if not isinstance(self.close_grace, (int, float)) or self.close_grace < 0:
            raise Error("config", "stdio.close_grace", "close_grace must be a number >= 0")

    def environment(self) -> dict[str, str]:
        """The environment the child gets."""
        if self.inherit_env:
            merged = dict(os.environ)
            merged.update(self.env or {})
            return merged
        env = dict(self.env or {})
        env.setdefault("PATH", os.environ.get("PATH", "/usr/bin:/bin"))
        return env
