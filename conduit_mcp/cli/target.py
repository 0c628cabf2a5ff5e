"""Which server to talk to: the command after ``--``, ``--url``, or an ``mcpServers`` entry.

The configuration file is the one desktop MCP hosts use::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."],
                  "env": {"DEBUG": "1"}, "cwd": "/srv"},
        "remote": {"url": "https://mcp.example.com/mcp", "headers": {"X-Key": "..."}}
    }}

(``"servers"`` is accepted as well, the key VS Code's ``mcp.json`` uses.) Every mistake in it is
a :class:`~conduit_mcp.cli.parser.UsageError` that names the file, the entry and the field.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from ..errors import Error
from ..transports.http_spec import Http
from ..transports.stdio_spec import Stdio
from .parser import UsageError

Transport = Stdio | Http

HOW = "give the server as: -- COMMAND [ARGS...], --url URL, or --config FILE [--server NAME]"


def transport_of(
    args: argparse.Namespace, server_command: Sequence[str] | None, err: TextIO | None = None
) -> Transport:
    """The transport spec the options describe; :class:`UsageError` when they do not add up.

    ``err`` is where ``--oauth`` prints the authorization URL (default: stderr).
    """
    given = [
        name
        for name, present in (
            ("-- COMMAND", server_command is not None),
            ("--url", args.url is not None),
            ("--config", args.config is not None),
        )
        if present
    ]
    if args.server is not None and args.config is None:
        raise UsageError("--server names an entry of --config FILE; give the file too", HOW)
    if not given:
        raise UsageError("no server given", HOW)
    if len(given) > 1:
        raise UsageError(f"give one server, not {' and '.join(given)}", HOW)
    env = _pairs(args.env, "=", "--env", "NAME=VALUE")
    headers = _pairs(args.header, ":", "--header", "'NAME: VALUE'")
    from .oauth import check_options

    check_options(args)
    if args.oauth and (
        args.bearer is not None or any(k.lower() == "authorization" for k in headers)
    ):
        raise UsageError(
            "--oauth gets the tokens itself; it does not take --bearer or an Authorization "
            "--header",
            "drop one of them",
        )
    stream = err if err is not None else sys.stderr
    if server_command is not None:
        if not server_command or not server_command[0]:
            raise UsageError(
                "the server command after -- is empty",
                "put the command that starts the server after --, e.g. -- python -m my_server",
            )
        _no_http_options(args, "a stdio server")
        return _stdio(server_command[0], server_command[1:], env, None, args.inherit_env)
    if args.url is not None:
        _no_stdio_options(args, env, "an HTTP server (--url)")
        return _http(args.url, headers, args.bearer, verify=args.cacert, auth=_oauth(args, stream))
    return _from_config(args, env, headers, stream)


def _oauth(args: argparse.Namespace, err: TextIO) -> Any:
    if not args.oauth:
        return None
    from .oauth import oauth_of

    return oauth_of(args, err)


def _pairs(items: Sequence[str], sep: str, option: str, shape: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items:
        name, found, value = item.partition(sep)
        if not found or not name.strip():
            # The item itself is not echoed: it may be a secret given the wrong way.
            raise UsageError(f"{option} takes {shape}; one of them has no {sep!r}")
        pairs[name.strip()] = value.strip() if sep == ":" else value
    return pairs


def _no_http_options(args: argparse.Namespace, what: str) -> None:
    if args.bearer is not None or args.header or args.cacert is not None or args.oauth:
        raise UsageError(
            f"--bearer, --header, --cacert and --oauth are for HTTP; {what} does not take them",
            "give a stdio server what it needs with --env NAME=VALUE",
        )


def _no_stdio_options(args: argparse.Namespace, env: Mapping[str, str], what: str) -> None:
    if env or args.inherit_env:
        raise UsageError(
            f"--env and --inherit-env set a stdio server's environment; {what} has none",
            "give an HTTP server credentials with --bearer TOKEN or --header 'NAME: VALUE'",
        )


def _stdio(
    command: str,
    args: Sequence[str],
    env: Mapping[str, str],
    cwd: str | None,
    inherit_env: bool,
) -> Stdio:
    try:
        return Stdio(command, list(args), env=dict(env) or None, cwd=cwd, inherit_env=inherit_env)
    except Error as exc:
        raise UsageError(exc.message) from None


def _http(
    url: str,
    headers: Mapping[str, str],
    bearer: str | None,
    where: str = "",
    *,
    verify: str | None = None,
    auth: Any = None,
) -> Http:
    try:
        return Http(url, headers=dict(headers) or None, bearer=bearer, verify=verify, auth=auth)
    except Error as exc:
        message = exc.message
        if exc.reason == "http.verify":
            raise UsageError(f"--cacert: {message}") from None
        if exc.reason == "http.url":
            message = f"{message} (got {redacted(url)!r})"
        raise UsageError(
            f"{where}: {message}" if where else message,
            "e.g. --url http://127.0.0.1:8000/mcp",
        ) from None


def redacted(url: str) -> str:
    """The URL without a password or query, which may carry a secret.

    >>> redacted("https://ada:pw@mcp.example.com:8443/mcp?key=s3cret")
    'https://mcp.example.com:8443/mcp'
    """
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path, "", ""))
    except ValueError:
        return "<unparsable URL>"


def _from_config(
    args: argparse.Namespace, env: Mapping[str, str], headers: Mapping[str, str], err: TextIO
) -> Transport:
    path = args.config
    try:
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
    except OSError as exc:
        raise UsageError(f"cannot read --config {path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"--config {path} is not valid JSON: {exc}") from None
    servers = _servers(document, path)
    name = args.server
    if name is None:
        if len(servers) != 1:
            raise UsageError(
                f"--config {path} has {len(servers)} servers; choose one with --server NAME",
                "servers: " + (", ".join(sorted(servers)) or "(none)"),
            )
        name = next(iter(servers))
    entry = servers.get(name)
    if entry is None:
        raise UsageError(
            f"--config {path} has no server {name!r}",
            "servers: " + (", ".join(sorted(servers)) or "(none)"),
        )
    where = f"--config {path}, server {name!r}"
    if not isinstance(entry, dict):
        raise UsageError(f"{where}: an entry must be a JSON object")
    if "url" in entry:
        if entry.get("type") == "sse":
            raise UsageError(
                f"{where}: the HTTP+SSE transport (type 'sse', MCP 2024-11-05) is not supported",
                "use the server's streamable HTTP endpoint",
            )
        _no_stdio_options(args, env, f"{where} (an HTTP server)")
        url = entry["url"]
        if not isinstance(url, str):
            raise UsageError(f"{where}: 'url' must be a string")
        merged = {**_string_map(entry, "headers", where), **headers}
        if args.oauth and any(k.lower() == "authorization" for k in merged):
            raise UsageError(
                f"{where}: --oauth gets the tokens itself; the entry's Authorization header "
                "would replace them",
                "drop --oauth, or the entry's Authorization header",
            )
        return _http(url, merged, args.bearer, where, verify=args.cacert, auth=_oauth(args, err))
    if "command" not in entry:
        raise UsageError(f"{where}: an entry needs 'command' (stdio) or 'url' (HTTP)")
    _no_http_options(args, f"{where} (a stdio server)")
    command = entry["command"]
    argv = entry.get("args", [])
    cwd = entry.get("cwd")
    if not isinstance(command, str) or not command:
        raise UsageError(f"{where}: 'command' must be a non-empty string")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise UsageError(f"{where}: 'args' must be a list of strings")
    if cwd is not None and not isinstance(cwd, str):
        raise UsageError(f"{where}: 'cwd' must be a string")
    merged_env = {**_string_map(entry, "env", where), **env}
    return _stdio(command, argv, merged_env, cwd, args.inherit_env)


def _servers(document: Any, path: str) -> dict[str, Any]:
    if isinstance(document, dict):
        for key in ("mcpServers", "servers"):
            servers = document.get(key)
            if isinstance(servers, dict):
                return servers
    raise UsageError(
        f'--config {path} has no "mcpServers" object',
        'expected {"mcpServers": {"NAME": {"command": ..., "args": [...]} or {"url": ...}}}',
    )


def _string_map(entry: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    value = entry.get(key) or {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise UsageError(f"{where}: {key!r} must map names to strings")
    return dict(value)
