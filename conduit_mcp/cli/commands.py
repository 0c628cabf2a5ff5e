"""The subcommands: connect once, run one request, print it, map the outcome to an exit code.

Every failure is printed as ``error: kind (reason): message`` and a line saying what to do,
never a traceback (:func:`report`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any, TextIO

from ..client import Client
from ..errors import Error
from . import output
from .parser import (
    EXIT_CONNECTION,
    EXIT_OK,
    EXIT_REQUEST,
    EXIT_TOOL_ERROR,
    EXIT_USAGE,
    UsageError,
)
from .target import Target
from .wording import connection_message

#: Lines of the server's stderr shown when it fails to start or goes away.
STDERR_TAIL = 20


def client_options(args: argparse.Namespace, entry: Mapping[str, Any]) -> dict[str, Any]:
    """The client options of one command: the command line's defaults, under a config
    entry's own ``"conduit"`` options, under what was typed (``--protocol``, ``--timeout``).

    >>> ns = argparse.Namespace(protocol=None, timeout=30.0, timeout_given=False)
    >>> client_options(ns, {"protocol": "legacy", "request_timeout": 5})
    {'protocol': 'legacy', 'request_timeout': 5, 'max_reconnects': 0}
    >>> ns = argparse.Namespace(protocol="modern", timeout=2.0, timeout_given=True)
    >>> client_options(ns, {"protocol": "legacy"})
    {'protocol': 'modern', 'request_timeout': 2.0, 'max_reconnects': 0}
    """
    options: dict[str, Any] = {
        "protocol": "auto",
        "request_timeout": args.timeout,
        # One-shot use: a server that cannot start is reported at once, not retried.
        "max_reconnects": 0,
        **entry,
    }
    if args.protocol is not None:
        options["protocol"] = args.protocol
    if getattr(args, "timeout_given", True):
        options["request_timeout"] = args.timeout
    return options


def run(args: argparse.Namespace, target: Target, out: TextIO, err: TextIO) -> int:
    """Connect, run ``args.command``, stop the client (and so the server) whatever happens."""
    arguments = _arguments(args)  # bad JSON is a usage error before anything starts
    try:
        client = Client.start(target.transport, **client_options(args, target.options))
    except Error as exc:
        if exc.kind == "config":
            raise UsageError(f"{exc}", _hint(exc, args, connecting=True)) from None
        raise
    try:
        try:
            status = _await_ready(client, args, err)
        except Error as exc:
            message = connection_message(exc, timeout=args.timeout, state=client.status().state)
            report(err, exc, _hint(exc, args, connecting=True), message)
            _stderr_tail(client, err)
            return EXIT_CONNECTION
        try:
            return COMMANDS[args.command](client, args, arguments, status, out, err)
        except Error as exc:
            report(err, exc, _hint(exc, args, connecting=False))
            if exc.kind in ("transport", "closed"):
                _stderr_tail(client, err)
            return _exit_code(exc)
    finally:
        client.stop()


def _await_ready(client: Client, args: argparse.Namespace, err: TextIO) -> Any:
    """Ready within ``--timeout``; with ``--oauth``, a person authorizing in the browser gets
    the loopback listener's whole window (the client never waits for a person by itself:
    this command does, because a person is at the shell)."""
    if not getattr(args, "oauth", False):
        return client.await_ready(timeout=args.timeout)
    from .oauth import AUTHORIZE_WAIT, PasteReader, pastes

    try:
        status = client.wait_for_state(
            lambda s: s.state in ("ready", "closed") or s.reason == "authorization_required",
            timeout=args.timeout,
        )
    except Error as exc:
        if exc.kind != "timeout":
            raise
        state = client.status()
        raise Error(
            "timeout",
            "deadline",
            f"the client was not ready within {args.timeout:g} s; it is {state.state}"
            + (f" ({state.reason})" if state.reason else ""),
        ) from None
    if status.state == "ready":
        return status
    if status.state != "closed" and pastes(args):
        PasteReader(lambda url: client.authorize(url, timeout=args.timeout), err).start()
    return client.await_ready(timeout=AUTHORIZE_WAIT if status.state != "closed" else 1.0)


def report(err: TextIO, exc: Error, hint: str | None, message: str | None = None) -> None:
    """``error: kind (reason): message``, then what to do about it (``message`` replaces
    the error's own, in the command line's words)."""
    if message is None:
        err.write(f"error: {exc}\n")
    else:
        code = f" [{exc.code}]" if exc.code is not None else ""
        err.write(f"error: {exc.kind} ({exc.reason}){code}: {message}\n")
    if hint:
        err.write(f"hint: {hint}\n")
    err.flush()


def _exit_code(exc: Error) -> int:
    if exc.kind in ("config", "argument"):
        return EXIT_USAGE
    if exc.kind in ("server", "protocol", "timeout"):
        return EXIT_REQUEST
    return EXIT_CONNECTION


def _hint(exc: Error, args: argparse.Namespace, *, connecting: bool) -> str | None:
    timeout = f"--timeout (now {args.timeout:g} s)"
    if exc.kind == "timeout":
        if connecting:
            return (
                f"the server did not become ready within {timeout}: raise it for a slow "
                "start (npx, uvx, containers), or check the command and its stderr"
            )
        return f"the server did not answer within {timeout}: raise it for a slow tool"
    if exc.kind == "auth":
        return _auth_hint(exc, args)
    if exc.kind in ("closed", "transport") and connecting:
        if exc.reason in ("no_mutual_version", "legacy_server", "modern_server"):
            return "the server speaks another protocol version: try --protocol auto"
        return (
            "the server could not be started or reached: check the command (or the URL) and "
            "the server's stderr, if shown below"
        )
    if exc.kind == "server":
        if exc.code == -32601:
            return "the server does not offer this: see `conduit-mcp status` for its capabilities"
        if args.command == "call":
            return "check the tool's name and arguments: `conduit-mcp tools --json` shows its inputSchema"
        if args.command == "prompt":
            return "check the prompt's name and arguments: see `conduit-mcp prompts`"
        if args.command == "read":
            return "check the URI: see `conduit-mcp resources`"
    if exc.kind in ("config", "argument"):
        return f"see: conduit-mcp {args.command} --help"
    return None


def _auth_hint(exc: Error, args: argparse.Namespace) -> str:
    if getattr(args, "oauth", False):
        if exc.reason == "authorization_required":
            return (
                "nobody completed the authorization in the browser in time: run the command "
                "again, or see the URL printed above"
            )
        return (
            "the OAuth authorization failed (the reason above); `conduit-mcp logout --url URL` "
            "forgets the kept tokens, then try again"
        )
    if _advertises_oauth(exc):
        return (
            "the server uses OAuth (its 401 names its protected resource metadata): add --oauth "
            "to authorize in a browser, or pass a token it accepts with --bearer TOKEN"
        )
    return "the server refused the credentials: pass --bearer TOKEN or --header 'NAME: VALUE'"


def _advertises_oauth(exc: Error) -> bool:
    """A 401's ``WWW-Authenticate: Bearer resource_metadata=...``: the MCP spec's sign that
    the server is an OAuth protected resource (Authorization, "Authorization Server
    Location")."""
    data = exc.data if isinstance(exc.data, dict) else {}
    for challenge in data.get("challenges") or ():
        scheme = getattr(challenge, "scheme", None)
        params = getattr(challenge, "params", None)
        if scheme == "bearer" and isinstance(params, dict) and "resource_metadata" in params:
            return True
    return False


def _stderr_tail(client: Client, err: TextIO) -> None:
    """The server's last stderr lines: usually the reason it did not start."""
    try:
        text = client.stderr().decode("utf-8", "replace")
    except Exception:  # the client is already gone: nothing to show
        return
    lines = text.rstrip().splitlines()[-STDERR_TAIL:]
    if lines:
        err.write("server stderr (last lines):\n")
        err.writelines(f"  | {line}\n" for line in lines)
        err.flush()


def _arguments(args: argparse.Namespace) -> dict[str, Any] | None:
    """The JSON arguments of ``call`` and ``prompt`` (``-``: read from stdin)."""
    raw = getattr(args, "arguments", None)
    if raw is None:
        return None
    if raw == "-":
        raw = sys.stdin.read()
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"ARGUMENTS is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            'give a JSON object in single quotes, e.g. \'{"a": 1, "b": "text"}\'',
        ) from None
    if not isinstance(value, dict):
        raise UsageError(
            f"ARGUMENTS must be a JSON object, not {type(value).__name__}",
            "e.g. '{\"a\": 1}'",
        )
    if args.command == "prompt" and not all(isinstance(v, str) for v in value.values()):
        raise UsageError(
            "a prompt's ARGUMENTS are strings (MCP prompts/get)",
            'e.g. \'{"name": "Ada", "count": "3"}\'',
        )
    return value


# -- the commands ------------------------------------------------------------------------------

Command = Callable[[Client, argparse.Namespace, "dict[str, Any] | None", Any, TextIO, TextIO], int]


def _tools(
    client: Client, args: argparse.Namespace, _a: Any, _s: Any, out: TextIO, _e: TextIO
) -> int:
    tools = client.list_all_tools(timeout=args.timeout)
    out.write(
        (output.dumps([dict(t.raw) for t in tools]) if args.json else output.tools_table(tools))
        + "\n"
    )
    return EXIT_OK


def _call(
    client: Client,
    args: argparse.Namespace,
    arguments: dict[str, Any] | None,
    _s: Any,
    out: TextIO,
    err: TextIO,
) -> int:
    bar = None if args.no_progress else output.ProgressBar(err)
    try:
        result = client.call_tool(args.tool, arguments or {}, timeout=args.timeout, on_progress=bar)
    finally:
        if bar is not None:
            bar.done()
    if args.json:
        out.write(output.dumps(dict(result.raw)) + "\n")
    elif result.is_error:
        err.write(f"tool error: {output.content_text(result.content)}\n")
    else:
        text = output.content_text(result.content)
        if not result.content and result.structured_content is not None:
            text = output.dumps(result.structured_content)
        out.write(text + "\n")
    return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


def _prompts(
    client: Client, args: argparse.Namespace, _a: Any, _s: Any, out: TextIO, _e: TextIO
) -> int:
    prompts = client.list_all_prompts(timeout=args.timeout)
    text = (
        output.dumps([dict(p.raw) for p in prompts]) if args.json else output.prompts_table(prompts)
    )
    out.write(text + "\n")
    return EXIT_OK


def _prompt(
    client: Client,
    args: argparse.Namespace,
    arguments: dict[str, Any] | None,
    _s: Any,
    out: TextIO,
    _e: TextIO,
) -> int:
    result = client.get_prompt(args.name, arguments, timeout=args.timeout)
    out.write((output.dumps(dict(result.raw)) if args.json else output.prompt_text(result)) + "\n")
    return EXIT_OK


def _resources(
    client: Client, args: argparse.Namespace, _a: Any, _s: Any, out: TextIO, _e: TextIO
) -> int:
    resources = client.list_all_resources(timeout=args.timeout)
    try:
        templates = client.list_all_resource_templates(timeout=args.timeout)
    except Error as exc:
        if exc.kind != "server" or exc.code != -32601:
            raise
        templates = ()  # a server with resources but no templates
    if args.json:
        text = output.dumps(
            {
                "resources": [dict(r.raw) for r in resources],
                "resourceTemplates": [dict(t.raw) for t in templates],
            }
        )
    else:
        text = output.resources_table(resources, templates)
    out.write(text + "\n")
    return EXIT_OK


def _read(
    client: Client, args: argparse.Namespace, _a: Any, _s: Any, out: TextIO, _e: TextIO
) -> int:
    result = client.read_resource(args.uri, timeout=args.timeout)
    out.write((output.dumps(dict(result.raw)) if args.json else output.read_text(result)) + "\n")
    return EXIT_OK


def _ping(
    client: Client, args: argparse.Namespace, _a: Any, _s: Any, out: TextIO, _e: TextIO
) -> int:
    started = time.monotonic()
    client.ping(timeout=args.timeout)
    elapsed = (time.monotonic() - started) * 1000
    out.write(
        (
            output.dumps({"ok": True, "ms": round(elapsed, 3)})
            if args.json
            else f"ok ({elapsed:.1f} ms)"
        )
        + "\n"
    )
    return EXIT_OK


def _status(
    client: Client, args: argparse.Namespace, _a: Any, status: Any, out: TextIO, _e: TextIO
) -> int:
    info = client.server_info()
    capabilities = client.server_capabilities()
    instructions = client.instructions()
    if args.json:
        out.write(
            output.dumps(
                {
                    "status": asdict(status),
                    "serverInfo": dict(info.raw) if info is not None else None,
                    "capabilities": capabilities,
                    "instructions": instructions,
                }
            )
            + "\n"
        )
        return EXIT_OK
    rows = [
        ("state", status.state),
        ("era", status.era or ""),
        ("version", status.version or ""),
        ("chosen by", status.origin or ""),
        ("server", f"{info.name} {info.version}" if info is not None else "(not told)"),
        ("capabilities", ", ".join(sorted(capabilities or {})) or "(none)"),
    ]
    if instructions:
        rows.append(("instructions", output.first_line(instructions)))
    width = max(len(k) for k, _ in rows)
    out.write("".join(f"{k.ljust(width)}  {v}\n" for k, v in rows))
    return EXIT_OK


COMMANDS: dict[str, Command] = {
    "tools": _tools,
    "call": _call,
    "prompts": _prompts,
    "prompt": _prompt,
    "resources": _resources,
    "read": _read,
    "ping": _ping,
    "status": _status,
}
