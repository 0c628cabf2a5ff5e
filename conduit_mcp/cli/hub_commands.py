"""The commands for every server of a ``--config`` file at once, through a ``conduit_mcp.Hub``.

``conduit-mcp tools --config FILE`` (no ``--server``, several servers) lists every server's
tools under qualified names (``files.read``: the config key, a dot, the server's name for it);
``conduit-mcp call files.read '{...}' --config FILE`` starts that one server and routes the
call; ``conduit-mcp status --config FILE`` prints a table of the servers. ``prompts``,
``resources``, ``read`` and ``ping`` work the same way; ``prompt files.NAME`` like ``call``.

A server that cannot start or is not ready within ``--timeout`` never holds up the others:
each one is waited for until it is ready or has given up (the command line gives one attempt:
``max_reconnects=0``, and the hub restarts nobody), its failure is printed in the command
line's words (``wording.connection_message``), and the command goes on with the rest. The exit
code is then 3 (no connection), after what the others gave was printed, so a script sees it.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from dataclasses import asdict, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TextIO, cast

from ..errors import Error
from . import output
from .commands import _arguments, _call, _exit_code, _hint, _prompt, _read, client_options, report
from .parser import EXIT_CONNECTION, EXIT_OK, UsageError
from .target import Several, config_message, servers_hint
from .wording import CONFIG_HINTS, connection_message

if TYPE_CHECKING:
    from ..hub import Hub, HubConfig

#: Lines of a failed server's stderr shown under its error.
STDERR_TAIL = 10

#: Commands that name one server's item (``SERVER.NAME``): only that server is started.
#: The value: the argument that holds the name, and what the item is called.
ONE_SERVER = {"call": ("tool", "tool"), "prompt": ("name", "prompt")}


def run_hub(args: argparse.Namespace, several: Several, out: TextIO, err: TextIO) -> int:
    """Start a Hub on the file's servers (or the one a qualified name names), wait for each
    one within ``--timeout``, run the command, stop the Hub whatever happens."""
    from ..hub import Hub

    arguments = _arguments(args)  # bad JSON is a usage error before anything starts
    config = several.config
    if args.command in ONE_SERVER:
        server = _server_of(args, several, getattr(args, ONE_SERVER[args.command][0]))
        config = replace(config, servers=MappingProxyType({server: config.servers[server]}))
    config = _typed_options_win(args, config)
    try:
        # One attempt, and a member that fails stays closed with its own error (its client
        # closes instead of stopping: "close"), so the command can say why.
        options = {**client_options(args, {}), "on_give_up": "close"}
        hub = Hub.start(config, max_restarts=0, **options)
    except Error as exc:
        if exc.kind == "config":
            raise UsageError(config_message(several.path, exc)) from None
        raise
    try:
        failures = settle(hub, args.timeout)
        # status shows them in its table; read only when it fails (the URI's server may be
        # one of them), since a read the others answered needs nothing more.
        if args.command not in ("status", "read"):
            for name, failure in failures.items():
                _report_failure(hub, name, failure, args, err)
        if args.command in ONE_SERVER or args.command == "read":
            if args.command in ONE_SERVER and failures:
                return EXIT_CONNECTION
            command = {"call": _call, "prompt": _prompt, "read": _read}[args.command]
            try:
                # The Hub takes the calls of a Client, by qualified name.
                return command(cast(Any, hub), args, arguments, None, out, err)
            except Error as failed:
                for name, failure in failures.items() if args.command == "read" else ():
                    _report_failure(hub, name, failure, args, err)
                report(err, failed, _request_hint(failed, args))
                return _exit_code(failed)
        LISTINGS[args.command](hub, args, failures, several, out)
        if args.command in ("tools", "prompts", "resources"):
            _collisions(hub, args.command, err)
        return EXIT_CONNECTION if failures else EXIT_OK
    finally:
        hub.stop()


def _request_hint(exc: Error, args: argparse.Namespace) -> str | None:
    if exc.kind == "argument" and exc.reason in ("unknown_tool", "unknown_prompt"):
        return f"`conduit-mcp {exc.reason[8:]}s --config FILE` lists them, qualified"
    if exc.kind == "argument" and exc.reason == "unknown_resource":
        return "`conduit-mcp resources --config FILE` lists every server's resources"
    return _hint(exc, args, connecting=False)


def _server_of(args: argparse.Namespace, several: Several, name: str) -> str:
    """The server a qualified name (``files.read``) names; a usage error when it names none."""
    server, found, item = name.partition(".")
    what = ONE_SERVER[args.command][1]
    if not found or not server or not item:
        raise UsageError(
            f"--config {several.path} has {len(several.config.servers)} servers: name the "
            f"{what} as SERVER.{what.upper()} (as `conduit-mcp {what}s --config FILE` lists "
            f"them), or choose the server with --server NAME",
            servers_hint(several.config),
        )
    if server not in several.config.servers:
        from ..hub.names import closest  # the Hub's own rule for "did you mean"

        near = closest(server, several.config.servers)
        said = f"; did you mean {', '.join(repr(n) for n in near)}?" if near else ""
        raise UsageError(
            f"--config {several.path} has no server {server!r}{said}", servers_hint(several.config)
        )
    return server


def _typed_options_win(args: argparse.Namespace, config: HubConfig) -> HubConfig:
    """``--protocol`` and ``--timeout``, when typed, over every entry's own ``"conduit"``
    options (which win over the command line's defaults, as over a Hub's)."""
    typed: dict[str, Any] = {}
    if args.protocol is not None:
        typed["protocol"] = args.protocol
    if getattr(args, "timeout_given", False):
        typed["request_timeout"] = args.timeout
    if not typed:
        return config
    servers = {
        name: replace(entry, conduit=MappingProxyType({**entry.conduit, **typed}))
        for name, entry in config.servers.items()
    }
    return replace(config, servers=MappingProxyType(servers))


def settle(hub: Hub, timeout: float) -> dict[str, Error]:
    """Wait, within one deadline for all, until each server is ready with its lists in the
    view or has failed; the failures, by server. The servers start together, so this takes
    as long as the slowest, not the sum; a dead one fails at once and costs nothing.

    Each member's own client is taken first, before any can fail: its wait ends at once when
    it gives up, and its error carries the attempt's reason, detail and stderr (the hub's
    only says that the server is closed)."""
    deadline = time.monotonic() + timeout
    members: dict[str, Any] = {}
    failures: dict[str, Error] = {}
    for name in hub.servers():
        try:
            members[name] = hub.client(name)
        except Error as exc:  # its client tree did not even start
            failures[name] = exc
    for name, client in members.items():
        try:
            client.await_ready(timeout=max(deadline - time.monotonic(), 0.001))
            hub.await_ready(max(deadline - time.monotonic(), 0.001), servers=[name])
        except Error as exc:
            failures[name] = exc
    return failures


def _report_failure(hub: Hub, name: str, exc: Error, args: argparse.Namespace, err: TextIO) -> None:
    state = hub.status().get(name)
    message = connection_message(
        exc,
        timeout=args.timeout,
        state=state.state if state is not None else "closed",
        hints=CONFIG_HINTS,
    )
    report(err, exc, None, f"server {name!r}: {message}")
    try:
        text = hub.client(name).stderr().decode("utf-8", "replace")
    except Exception:  # no client now, or no stderr (HTTP): nothing to show
        return
    lines = text.rstrip().splitlines()[-STDERR_TAIL:]
    if lines:
        err.write(f"server {name!r} stderr (last lines):\n")
        err.writelines(f"  | {line}\n" for line in lines)
        err.flush()


def _collisions(hub: Hub, command: str, err: TextIO) -> None:
    """Say which server's item a shared name (or URI) shows: never a silent pick."""
    kinds = {"tools": ("tools",), "prompts": ("prompts",)}.get(
        command, ("resources", "resource_templates")
    )
    for c in hub.collisions():
        if c.kind in kinds:
            servers = [server for server, _ in c.servers]
            err.write(
                f"note: {c.name!r} is listed by {', '.join(servers)}; {servers[0]}'s is shown "
                f"(and {'read from' if c.kind.startswith('resource') else 'called on'} "
                f"{servers[0]}); --server NAME shows one server's own\n"
            )
    err.flush()


def _server_and_name(hub: Hub, qualified: str) -> tuple[str, str]:
    route = hub.route(qualified)
    return route if route is not None else ("", qualified)


def _tools(
    hub: Hub, args: argparse.Namespace, _f: Mapping[str, Error], _s: Several, out: TextIO
) -> None:
    tools = hub.tools()
    if args.json:
        listed = [
            {**dict(t.raw), "name": t.name, "server": _server_and_name(hub, t.name)[0]}
            for t in tools
        ]
        out.write(output.dumps(listed) + "\n")
    else:
        out.write(output.tools_table(tools) + "\n")


def _prompts(
    hub: Hub, args: argparse.Namespace, _f: Mapping[str, Error], _s: Several, out: TextIO
) -> None:
    prompts = hub.prompts()
    if args.json:
        out.write(output.dumps([{**dict(p.raw), "name": p.name} for p in prompts]) + "\n")
    else:
        out.write(output.prompts_table(prompts) + "\n")


def _resources(
    hub: Hub, args: argparse.Namespace, _f: Mapping[str, Error], _s: Several, out: TextIO
) -> None:
    resources, templates = hub.resources(), hub.resource_templates()
    if args.json:
        document = {
            "resources": [{**dict(r.raw), "server": hub.resource_server(r.uri)} for r in resources],
            "resourceTemplates": [dict(t.raw) for t in templates],
        }
        out.write(output.dumps(document) + "\n")
    else:
        out.write(output.resources_table(resources, templates) + "\n")


def _ping(
    hub: Hub, args: argparse.Namespace, failures: Mapping[str, Error], _s: Several, out: TextIO
) -> None:
    rows: list[tuple[str, str]] = []
    results: dict[str, Any] = {}
    for name in hub.servers():
        if name in failures:
            rows.append((name, "not ready"))
            results[name] = {"ok": False}
            continue
        started = time.monotonic()
        try:
            hub.client(name).ping(timeout=args.timeout)
        except Error as exc:
            rows.append((name, f"error: {exc.kind} ({exc.reason})"))
            results[name] = {"ok": False, "error": f"{exc.kind} ({exc.reason})"}
            continue
        elapsed = (time.monotonic() - started) * 1000
        rows.append((name, f"ok ({elapsed:.1f} ms)"))
        results[name] = {"ok": True, "ms": round(elapsed, 3)}
    text = output.dumps(results) if args.json else output.table(rows, ("SERVER", "PING"))
    out.write(text + "\n")


def _status(
    hub: Hub, args: argparse.Namespace, failures: Mapping[str, Error], several: Several, out: TextIO
) -> None:
    disabled = several.config.disabled
    counts: dict[str, int] = {}
    for tool in hub.tools():
        server = _server_and_name(hub, tool.name)[0]
        counts[server] = counts.get(server, 0) + 1
    status = hub.status()
    if args.json:
        document = {
            name: {
                "status": asdict(s),
                "tools": counts.get(name, 0),
                "error": str(failures[name]) if name in failures else None,
            }
            for name, s in status.items()
        }
        document.update({name: {"status": None, "disabled": True} for name in disabled})
        out.write(output.dumps(document) + "\n")
        return
    rows: list[tuple[str, str, str, str, str]] = []
    for name, s in status.items():
        if name in failures:
            exc = failures[name]
            detail = connection_message(
                exc, timeout=args.timeout, state=s.state, hints=CONFIG_HINTS
            )
        else:
            detail = s.reason or ""
        version = f"{s.era} {s.version}" if s.era and s.version else (s.version or "")
        tools = str(counts.get(name, 0)) if s.state == "ready" else "-"
        rows.append((name, s.state, version, tools, detail))
    rows += [(name, "disabled", "", "-", '"disabled": true in the file') for name in disabled]
    out.write(output.table(rows, ("SERVER", "STATE", "PROTOCOL", "TOOLS", "DETAIL")) + "\n")


LISTINGS = {
    "tools": _tools,
    "prompts": _prompts,
    "resources": _resources,
    "ping": _ping,
    "status": _status,
}
