"""The command line's grammar: subcommands, their options, and the server command after ``--``.

Everything after the first ``--`` is the server's own command line and is split off before
argparse sees anything, so a server argument that looks like one of ours (``--url``,
``--json``, ``--help``) stays the server's.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

#: Exit codes, documented in ``--help`` and docs/cli.md.
EXIT_OK = 0
EXIT_TOOL_ERROR = 1
EXIT_USAGE = 2
EXIT_CONNECTION = 3
EXIT_REQUEST = 4
EXIT_INTERRUPTED = 130

EXIT_CODES = f"""\
exit codes:
  {EXIT_OK}    success
  {EXIT_TOOL_ERROR}    the tool ran and reported an error (isError: true)
  {EXIT_USAGE}    usage: bad arguments, options, JSON or configuration file
  {EXIT_CONNECTION}    no connection: the server could not be started or reached, refused the
       credentials, or went away (--config without --server: any of its servers; what
       the others gave is printed all the same)
  {EXIT_REQUEST}    the server answered the request with an error, broke the protocol, or did
       not answer within --timeout
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)
"""

DESCRIPTION = """\
Talk to any MCP server from the shell: a stdio server is the command after --, a streamable
HTTP server is --url, a server of a desktop host's configuration file is --config/--server.
--config FILE without --server talks to every server of the file at once: tools, prompts and
resources of all of them (names qualified by the entry's name, as files.read), call
SERVER.TOOL, status as a table of the servers.
"""

EXAMPLES = """\
examples:
  conduit-mcp tools -- python -m my_server
  conduit-mcp call echo '{"message": "hi"}' -- npx -y @modelcontextprotocol/server-everything
  conduit-mcp tools --url http://127.0.0.1:8000/mcp --bearer "$TOKEN"
  conduit-mcp tools --url https://mcp.example.com/mcp --oauth    # authorize in a browser
  conduit-mcp logout --url https://mcp.example.com/mcp           # forget the OAuth tokens
  conduit-mcp tools --config ~/.config/Claude/claude_desktop_config.json --server files
  conduit-mcp tools --config mcp.json                 # every server's tools, as files.read
  conduit-mcp call files.read '{"path": "a.txt"}' --config mcp.json
  conduit-mcp status --config mcp.json                # a table of the servers
  conduit-mcp read file:///etc/hosts --json -- python -m my_server
"""

PROTOCOLS = "auto, modern, legacy, or a version such as 2025-11-25"
DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class Invocation:
    """What was asked: the parsed options and the server command given after ``--``."""

    args: argparse.Namespace
    server_command: tuple[str, ...] | None  # None: no ``--`` was given


class UsageError(Exception):
    """Bad input on the command line or in the configuration file (exit code 2)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise :class:`UsageError` instead of exiting.

    So ``main(argv)`` returns a code a test can read, and every usage error is printed the
    same way (with the subcommand's usage line and a pointer to its ``--help``).
    """

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, f"{self.format_usage().strip()}\nsee: {self.prog} --help")


def _connection_options() -> _Parser:
    """The options every server subcommand shares: where the server is and how to talk."""
    common = _Parser(add_help=False)
    where = common.add_argument_group("server (one of: -- COMMAND, --url, --config)")
    where.add_argument("--url", help="a streamable HTTP server's MCP endpoint")
    where.add_argument(
        "--bearer",
        metavar="TOKEN",
        help="send Authorization: Bearer TOKEN (HTTP only)",
    )
    where.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an HTTP header to send with every request (repeatable; HTTP only)",
    )
    where.add_argument(
        "--cacert",
        metavar="FILE",
        help="trust the CAs in this PEM file (or OpenSSL CA folder) instead of the system's "
        "(HTTP only; docs/tls.md)",
    )
    where.add_argument(
        "--config",
        metavar="FILE",
        help='a desktop host\'s configuration file (JSON with "mcpServers"); without '
        "--server, every server of it",
    )
    where.add_argument(
        "--server",
        metavar="NAME",
        help="the one entry of --config to use (without it: all of them, names qualified as "
        "SERVER.NAME; a file of one server needs no --server)",
    )
    where.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a variable for a stdio server's environment (repeatable)",
    )
    where.add_argument(
        "--inherit-env",
        action="store_true",
        help="give a stdio server this shell's whole environment, not the minimal one "
        "(HOME, LOGNAME, PATH, SHELL, TERM, USER) plus --env",
    )
    oauth = common.add_argument_group(
        "OAuth (HTTP only; needs the oauth extra: pip install -e '.[oauth]' from a clone)"
    )
    oauth.add_argument(
        "--oauth",
        action="store_true",
        help="authorize with OAuth 2.1 in a browser (a redirect listener on 127.0.0.1); the "
        "URL is printed too, for a headless shell. Tokens are kept in "
        "$XDG_DATA_HOME/conduit-mcp/tokens.json (default ~/.local/share/...; 0600), so the "
        "next command refreshes instead of asking again",
    )
    oauth.add_argument(
        "--client-id", metavar="ID", help="a client ID registered at the authorization server"
    )
    oauth.add_argument(
        "--client-secret-env",
        metavar="NAME",
        help="the environment variable holding --client-id's secret (never the secret itself)",
    )
    oauth.add_argument(
        "--scope",
        action="append",
        default=[],
        metavar="SCOPE",
        help="a scope to ask for (repeatable, or several in one, space- or comma-separated); "
        "default: what the server asks for",
    )
    oauth.add_argument(
        "--no-browser",
        action="store_true",
        help="only print the authorization URL; do not open a browser",
    )
    how = common.add_argument_group("connection")
    # None: not given, so a config entry's own "conduit" option (or the default) applies.
    how.add_argument("--protocol", default=None, help=f"{PROTOCOLS} (default: auto)")
    how.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help=f"deadline for connecting, and for the request (default: {DEFAULT_TIMEOUT:g})",
    )
    out = common.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print the raw JSON result (for scripts)")
    out.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log the client's conduit_mcp.* loggers on stderr (-v: INFO, -vv: DEBUG)",
    )
    return common


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0: {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``conduit-mcp`` parser with one subparser per command."""
    parser = _Parser(
        prog="conduit-mcp",
        description=DESCRIPTION,
        epilog=EXAMPLES + "\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from .._version import __version__

    parser.add_argument("--version", action="version", version=f"conduit-mcp {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    common = _connection_options()

    def command(name: str, help_text: str, usage_tail: str = "") -> argparse.ArgumentParser:
        return commands.add_parser(
            name,
            help=help_text,
            description=help_text,
            parents=[common],
            usage=f"conduit-mcp {name}{usage_tail} [options] (-- COMMAND [ARGS...] | --url URL"
            " | --config FILE [--server NAME])",
            epilog=EXIT_CODES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    command("tools", "list the server's tools (name and the first line of the description)")
    call = command("call", "call a tool and print its result's content", " TOOL [ARGUMENTS]")
    call.add_argument("tool", metavar="TOOL", help="the tool's name")
    call.add_argument(
        "arguments",
        metavar="ARGUMENTS",
        nargs="?",
        default=None,
        help='the arguments as a JSON object, e.g. \'{"a": 1}\' ("-": read it from stdin)',
    )
    call.add_argument(
        "--no-progress", action="store_true", help="do not draw the progress bar on stderr"
    )
    command("prompts", "list the server's prompts")
    prompt = command("prompt", "get a prompt and print its messages", " NAME [ARGUMENTS]")
    prompt.add_argument("name", metavar="NAME", help="the prompt's name")
    prompt.add_argument(
        "arguments",
        metavar="ARGUMENTS",
        nargs="?",
        default=None,
        help='the arguments as a JSON object of strings, e.g. \'{"name": "Ada"}\'',
    )
    command("resources", "list the server's resources and resource templates")
    read = command("read", "read a resource and print its text", " URI")
    read.add_argument("uri", metavar="URI", help="the resource's URI")
    command("ping", "check that the server answers (and how fast)")
    command("status", "connect and show the negotiated era, version and server information")
    logout = commands.add_parser(
        "logout",
        help="forget the OAuth tokens --oauth kept for a server (nothing is sent to it)",
        description="forget the OAuth tokens --oauth kept for a server (nothing is sent to it)",
        usage="conduit-mcp logout --url URL",
    )
    logout.add_argument("--url", required=True, help="the server's MCP endpoint, as given to --url")
    commands.add_parser(
        "demo",
        help="drive the embedded test server (stdio, HTTP, then HTTP behind OAuth): what "
        "`make demo` runs",
        description="drive the embedded test server (stdio, HTTP, then HTTP behind OAuth): "
        "what `make demo` runs",
    )
    return parser


def parse(argv: Sequence[str]) -> Invocation:
    """Split ``argv`` at the first ``--`` and parse the part before it.

    Raises :class:`UsageError` for bad input, and ``SystemExit(0)`` for ``--help`` and
    ``--version`` (argparse prints them).
    """
    args = list(argv)
    server: tuple[str, ...] | None = None
    if "--" in args:
        at = args.index("--")
        args, server = args[:at], tuple(args[at + 1 :])
    parsed = build_parser().parse_args(args)
    if parsed.command is None:
        raise UsageError(
            "give a command: tools, call, prompts, prompt, resources, read, ping, status, "
            "logout or demo",
            "see: conduit-mcp --help",
        )
    if hasattr(parsed, "timeout"):
        parsed.timeout_given = parsed.timeout is not None
        if parsed.timeout is None:
            parsed.timeout = DEFAULT_TIMEOUT
    return Invocation(parsed, server)
