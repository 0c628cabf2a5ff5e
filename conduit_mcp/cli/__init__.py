"""``conduit-mcp``: list, call, read and check any MCP server from the shell.

``main(argv)`` returns the exit code (documented in ``conduit-mcp --help``) instead of exiting,
so tests and other programs can call it; ``python -m conduit_mcp`` and the ``conduit-mcp``
script exit with it. Modules: ``parser`` (the grammar and exit codes), ``target`` (which
server: ``--``, ``--url``, ``--config``), ``commands`` (connect, run, report),
``hub_commands`` (the same commands for every server of a ``--config`` file, through a
``conduit_mcp.Hub``), ``output`` (tables, text, the progress bar), ``oauth`` (``--oauth`` and
``logout``), ``demo``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from .parser import EXIT_CONNECTION, EXIT_INTERRUPTED, EXIT_USAGE, UsageError, parse

__all__ = ["main"]


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        try:
            invocation = parse(argv)
        except SystemExit as done:  # --help / --version: argparse printed them
            return done.code if isinstance(done.code, int) else 0
        args = invocation.args
        if args.command == "demo":
            if invocation.server_command is not None:
                raise UsageError("demo starts its own server; it takes no command after --")
            from .demo import demo

            return demo()
        if args.command == "logout":
            if invocation.server_command is not None:
                raise UsageError("logout takes --url URL, no command after --")
            from .oauth import logout

            return logout(args.url, out)
        if args.verbose:
            import logging

            handler = logging.StreamHandler(err)
            handler.setFormatter(
                logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s")
            )
            package = logging.getLogger("conduit_mcp")
            package.addHandler(handler)
            package.setLevel(logging.DEBUG if args.verbose > 1 else logging.INFO)
        from .commands import run
        from .target import Several, target_of

        target = target_of(args, invocation.server_command, err)
        if isinstance(target, Several):
            from .hub_commands import run_hub

            return run_hub(args, target, out, err)
        return run(args, target, out, err)
    except UsageError as exc:
        err.write(f"error: usage: {exc.message}\n")
        if exc.hint:
            err.write(f"hint: {exc.hint}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug of ours: say so in one line, not a traceback
        from ..errors import Error

        if isinstance(exc, Error):
            err.write(f"error: {exc}\n")
            return EXIT_CONNECTION
        err.write(
            f"error: internal ({type(exc).__name__}): conduit-mcp failed unexpectedly; "
            "please report it with the command line you ran\n"
        )
        return EXIT_CONNECTION
