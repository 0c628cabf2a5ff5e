"""Which server to talk to: the command after ``--``, ``--url``, or ``--config``'s entries.

The configuration file is the one desktop MCP hosts use::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."],
                  "env": {"DEBUG": "1"}, "cwd": "/srv"},
        "remote": {"url": "https://mcp.example.com/mcp", "headers": {"X-Key": "..."}}
    }}

It is read by the Hub's loader, :func:`conduit_mcp.load_config` (one parser for the library
and the command line: ``"servers"``, ``type``/``transport``, ``disabled``, ``${VAR}``
expansion and the per-server ``"conduit"`` options mean the same to both). ``--server NAME``,
or a file of one server, gives one server (:class:`Target`); a file of several without
``--server`` gives them all (:class:`Several`), served by a Hub (``hub_commands``). Every
mistake is a :class:`~conduit_mcp.cli.parser.UsageError` that names the file, the entry and
the key.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..config import OPTION_NAMES
from ..errors import Error
from ..transports.http_spec import Http
from ..transports.stdio_spec import Stdio
from .parser import UsageError

if TYPE_CHECKING:
    from ..hub.config import HubConfig, ServerEntry

Transport = Stdio | Http

HOW = "give the server as: -- COMMAND [ARGS...], --url URL, or --config FILE [--server NAME]"


@dataclass(frozen=True, slots=True)
class Target:
    """One server: its transport, and the client options its config entry gives (none for
    ``--`` and ``--url``)."""

    transport: Transport
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Several:
    """``--config FILE`` of several servers and no ``--server``: every enabled entry."""

    path: str
    config: HubConfig


def target_of(
    args: argparse.Namespace, server_command: Sequence[str] | None, err: TextIO | None = None
) -> Target | Several:
    """The server (or servers) the options describe; :class:`UsageError` when they do not
    add up.

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
    config = read_config(args.config) if args.config is not None else None
    if config is not None and args.server is None and len(config.servers) != 1:
        return _several(args, config)
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
        return Target(_stdio(server_command[0], server_command[1:], env, None, args.inherit_env))
    if args.url is not None:
        _no_stdio_options(args, env, "an HTTP server (--url)")
        return Target(
            _http(args.url, headers, args.bearer, verify=args.cacert, auth=_oauth(args, stream))
        )
    assert config is not None
    return _from_config(args, config, env, headers, stream)


#: Options that set up one server's connection: with several servers, whose would they be?
ONE_SERVER_OPTIONS = (
    ("env", "--env"),
    ("inherit_env", "--inherit-env"),
    ("bearer", "--bearer"),
    ("header", "--header"),
    ("cacert", "--cacert"),
    ("oauth", "--oauth"),
    ("client_id", "--client-id"),
    ("client_secret_env", "--client-secret-env"),
    ("scope", "--scope"),
)


def _several(args: argparse.Namespace, config: HubConfig) -> Several:
    """Every server of a file of several (or none: an error), when no --server chose one."""
    path = args.config
    if not config.servers:
        raise UsageError(f"--config {path} has no enabled server", servers_hint(config))
    given = [flag for attr, flag in ONE_SERVER_OPTIONS if getattr(args, attr, None)]
    if given:
        raise UsageError(
            f"{', '.join(given)} set up one server's connection, and --config {path} has "
            f"{len(config.servers)}: choose one with --server NAME",
            'or give each entry its own in the file ("env", "headers", or "conduit" '
            'options such as "inherit_env" and "auth")',
        )
    return Several(path, config)


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


def read_config(path: str) -> HubConfig:
    """The ``--config`` file, read by the Hub's loader (:func:`conduit_mcp.load_config`: one
    parser for the library and the command line); its errors become usage errors that name
    the file, the entry and the key."""
    from ..hub.config import load_config

    try:
        return load_config(Path(path))
    except Error as exc:
        raise UsageError(config_message(path, exc), _config_hint(exc)) from None


def config_message(path: str, exc: Error) -> str:
    """A config error in the command line's words: the file and the key first.

    >>> config_message("mcp.json", Error("config", "servers.a.args", "server 'a': 'args' ..."))
    "--config mcp.json (servers.a.args): server 'a': 'args' ..."
    """
    if exc.reason == "config":
        # The loader names "the config file '<path>'": the path is said once, first.
        said = exc.message.replace(f"the config file {str(Path(path))!r}", "the file")
        return f"--config {path}: {said}"
    return f"--config {path} ({exc.reason}): {exc.message}"


def _config_hint(exc: Error) -> str | None:
    if exc.reason == "config" and "cannot read" not in exc.message:
        return 'expected {"mcpServers": {"NAME": {"command": ..., "args": [...]} or {"url": ...}}}'
    return None


def servers_hint(config: HubConfig) -> str:
    names = ", ".join(config.servers) or "(none)"
    if config.disabled:
        names += f" (disabled: {', '.join(config.disabled)})"
    return f"servers: {names}"


def entry_of(path: str, config: HubConfig, name: str | None) -> ServerEntry:
    """The entry ``--server NAME`` names, or the file's only one (a file of several without
    ``--server`` is :class:`Several`, never asked here)."""
    if name is None:
        (only,) = config.servers.values()
        return only
    entry = config.servers.get(name)
    if entry is None:
        if name in config.disabled:
            raise UsageError(
                f'--config {path}: server {name!r} is disabled ("disabled": true)',
                servers_hint(config),
            )
        raise UsageError(f"--config {path} has no server {name!r}", servers_hint(config))
    return entry


def _from_config(
    args: argparse.Namespace,
    config: HubConfig,
    env: Mapping[str, str],
    headers: Mapping[str, str],
    err: TextIO,
) -> Target:
    """One entry of the file, with this command line's ``--env``, ``--header``, ``--bearer``,
    ``--cacert`` and ``--inherit-env`` laid over it; made into a transport and client options
    by the Hub's own builder, so an entry means the same to both."""
    from ..hub.transports import build

    path = args.config
    entry = entry_of(path, config, args.server)
    where = f"--config {path}, server {entry.name!r}"
    conduit = dict(entry.conduit)
    if entry.type == "stdio":
        _no_http_options(args, f"{where} (a stdio server)")
        if args.inherit_env:
            conduit["inherit_env"] = True
        entry = replace(entry, env={**entry.env, **env}, conduit=conduit)
    else:
        _no_stdio_options(args, env, f"{where} (an HTTP server)")
        merged = {**entry.headers, **headers}
        if args.oauth and (
            any(k.lower() == "authorization" for k in merged) or {"auth", "bearer"} & set(conduit)
        ):
            raise UsageError(
                f"{where}: --oauth gets the tokens itself; the entry's Authorization header "
                "(or its conduit auth) would replace them",
                "drop --oauth, or the entry's credentials",
            )
        if args.bearer is not None:
            conduit.pop("auth", None)
            conduit["bearer"] = args.bearer
        if args.cacert is not None:
            conduit["verify"] = args.cacert
        entry = replace(entry, headers=merged, conduit=conduit)
    try:
        transport, _ = build(entry)
    except Error as exc:
        if exc.reason.endswith(".verify"):
            raise UsageError(f"--cacert: {exc.message}") from None
        raise UsageError(config_message(path, exc), _config_hint(exc)) from None
    if args.oauth:  # the remote entry's spec takes the CLI's OAuth (with its listener)
        transport = replace(transport, auth=_oauth(args, err))
    options = {k: v for k, v in entry.conduit.items() if k in OPTION_NAMES}
    return Target(transport, options)
