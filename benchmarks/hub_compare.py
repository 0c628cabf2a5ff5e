"""One mcpServers config, four multi-server clients: what each does, side by side.

The config has three entries: ``alpha`` and ``beta``, two copies of the same real server (the
official ``mcp`` 2.3.0 ``MCPServer``, tests/peers/modern_peer.py: same self-reported name, same
tool names ``add``, ``echo``, ...), and ``dead``, whose command does not exist. Each library gets
the same task a host has: start everything, list every tool, call ``add`` on ``alpha``, and call
a tool of ``dead``. It runs against:

- conduit-mcp's ``Hub`` (this repository);
- the official SDK's ``ClientSessionGroup`` (``mcp`` 2.3.0, in ``.venv``);
- fastmcp's ``ClientGroup`` and openai-agents' ``MCPServerManager`` (in ``.venv-compare``,
  made by ``make compare-peers``: they pull their own dependencies, which must not reach the
  dev venv).

Each library runs in a fresh process of its own (this file, ``--run NAME``) and prints one JSON
record; the parent runs each ``--rounds`` times, takes the median of the timings and prints a
Markdown table. ``--doc docs/hub-compared.md`` rewrites the table in that page (between its
``<!-- hub-compare:begin -->`` and ``<!-- hub-compare:end -->`` markers).

    .venv/bin/python benchmarks/hub_compare.py --compare-python .venv-compare/bin/python

This module imports only the standard library at the top: the children import their library.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PEER = REPO / "tests" / "peers" / "modern_peer.py"
DEAD_COMMAND = "/nonexistent/mcp-server-dead"
#: Calls of ``alpha``'s ``add`` timed per run (after a few warm-up calls).
CALLS = 200
WARMUP = 20
#: The deadline every library is given to be ready, and for one call.
DEADLINE = 20.0
BEGIN, END = "<!-- hub-compare:begin -->", "<!-- hub-compare:end -->"


#: ``--port`` means nothing to the peer over stdio: it marks each copy's process, so that the
#: benchmark can find alpha's and kill it.
TAGS = {"alpha": "39001", "beta": "39002"}
#: How long a library is given to bring alpha back after its server was killed.
RECOVERY = 10.0


def config(server_python: str, *, with_dead: bool = True) -> dict[str, Any]:
    """The ``mcpServers`` document all four libraries are given."""
    servers: dict[str, Any] = {
        name: {"command": server_python, "args": [str(PEER), "stdio", "--port", tag]}
        for name, tag in TAGS.items()
    }
    if with_dead:
        servers["dead"] = {"command": DEAD_COMMAND, "args": []}
    return {"mcpServers": servers}


def said(exc: BaseException) -> str:
    """An exception as a user reads it: the innermost leaf of a group, its type and first line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if len(text) > 140:
        text = text[:137] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def ms(seconds: float) -> str:
    """A short duration, in the unit that shows it: ``12 µs``, ``3.4 ms``, ``1.52 s``."""
    if seconds < 0.001:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1.0:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds:.2f} s"


def kill_server(name: str) -> bool:
    """SIGKILL the server process of ``name`` among this process's descendants."""
    me, tag = os.getpid(), TAGS[name].encode()
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(PEER).encode() not in argv or tag not in argv:
            continue
        ancestor = int(pid)
        for _ in range(64):  # bounded walk up the process tree
            try:
                stat = Path(f"/proc/{ancestor}/stat").read_text()
            except OSError:
                break
            ancestor = int(stat.rsplit(")", 1)[1].split()[1])
            if ancestor == me:
                os.kill(int(pid), 9)
                return True
            if ancestor <= 1:
                break
    return False


def after_kill(record: Record, call: Callable[[], Any], error: type[BaseException]) -> None:
    """Kill alpha's server; one call at once, then calls until one answers (or RECOVERY)."""
    if not kill_server("alpha"):
        record["killed_call"] = "alpha's server process not found"
        return
    t0 = time.perf_counter()
    try:
        call()
        record["killed_call"] = "answered"
    except error as exc:
        record["killed_call"] = said(exc)
    record["killed_call_s"] = time.perf_counter() - t0
    deadline = time.perf_counter() + RECOVERY
    while time.perf_counter() < deadline:
        try:
            call()
            record["recovered_s"] = time.perf_counter() - t0
            return
        except error:
            time.sleep(0.1)


async def aafter_kill(record: Record, call: Callable[[], Any]) -> None:
    """:func:`after_kill` for the asyncio libraries (each call bounded by 5 s)."""
    if not kill_server("alpha"):
        record["killed_call"] = "alpha's server process not found"
        return
    t0 = time.perf_counter()
    try:
        await asyncio.wait_for(call(), 5.0)
        record["killed_call"] = "answered"
    except Exception as exc:  # TimeoutError included
        record["killed_call"] = (
            "no answer within 5 s" if isinstance(exc, TimeoutError) else said(exc)
        )
    record["killed_call_s"] = time.perf_counter() - t0
    deadline = time.perf_counter() + RECOVERY
    while time.perf_counter() < deadline:
        try:
            await asyncio.wait_for(call(), 2.0)
            record["recovered_s"] = time.perf_counter() - t0
            return
        except Exception:
            await asyncio.sleep(0.1)


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


class Record:
    """What one library did in one run (the JSON a child prints)."""

    def __init__(self, library: str, version: str) -> None:
        self.data: dict[str, Any] = {"library": library, "version": version, "notes": []}

    def __setitem__(self, key: str, value: Any) -> None:
        self.data[key] = value

    def note(self, text: str) -> None:
        self.data["notes"].append(text)


# -- conduit-mcp's Hub ------------------------------------------------------------------------


def run_conduit(server_python: str) -> dict[str, Any]:
    import conduit_mcp as mcp

    record = Record("conduit-mcp Hub", mcp.__version__)
    # Imported before the clock starts, as the other libraries' modules are (conduit_mcp
    # loads its parts lazily, on first use).
    start, load_config = mcp.Hub.start, mcp.load_config
    importlib.import_module("conduit_mcp.client")  # the members' module

    started = time.perf_counter()
    hub = start(load_config(config(server_python)))
    try:
        record["start_returned_s"] = time.perf_counter() - started
        hub.await_ready(DEADLINE, servers=["alpha", "beta"])
        record["ready_s"] = time.perf_counter() - started
        status = hub.status()
        record["started"] = "yes: " + ", ".join(
            f"{name} {status[name].state}" for name in sorted(status)
        )
        dead = status["dead"]
        record["dead_entry"] = f"{dead.state} ({dead.reason}), the others unaffected"
        record["short"] = {
            "started": "yes: the two live ones ready, `dead` is `closed`",
            "duplicates": "both kept: `alpha.add`, `beta.add`",
            "dead_call": "`unavailable` error",
        }
        names = sorted(t.name for t in hub.tools())
        shared = [n for n in names if n.endswith(".add")]
        record["duplicates"] = (
            f"both listed, qualified by config key: {', '.join(shared)}"
            f" ({len(names)} tools in one view)"
        )
        record["call_us"] = _time_calls(lambda: hub.call_tool("alpha.add", {"a": 1, "b": 2}))
        t0 = time.perf_counter()
        try:
            hub.call_tool(("dead", "add"), {"a": 1, "b": 2}, timeout=DEADLINE)
            record["dead_call"] = "answered (unexpected)"
        except mcp.Error as exc:
            record["dead_call_s"] = time.perf_counter() - t0
            record["dead_call"] = f"{exc.kind} ({exc.reason}): {exc.message}"
        after_kill(
            record, lambda: hub.call_tool("alpha.add", {"a": 1, "b": 2}, timeout=5), mcp.Error
        )
    finally:
        hub.stop()
    return record.data


def _time_calls(call: Callable[[], Any]) -> float:
    for _ in range(WARMUP):
        call()
    samples = []
    for _ in range(CALLS):
        t0 = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t0)
    return median_us(samples)


async def _atime_calls(call: Callable[[], Any]) -> float:
    for _ in range(WARMUP):
        await call()
    samples = []
    for _ in range(CALLS):
        t0 = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - t0)
    return median_us(samples)


# -- the official SDK's ClientSessionGroup ----------------------------------------------------


async def _session_group(server_python: str, hook: Any, record: Record) -> None:
    """The SDK's documented use: one ``connect_to_server`` per entry, in turn (its sessions
    live on one exit stack, so connecting them from concurrent tasks is not an option)."""
    from mcp import StdioServerParameters
    from mcp.client.session_group import ClientSessionGroup

    entries = config(server_python)["mcpServers"]
    started = time.perf_counter()
    outcomes: dict[str, str] = {}
    async with ClientSessionGroup(component_name_hook=hook) as group:
        for name, entry in entries.items():
            t0 = time.perf_counter()
            try:
                await group.connect_to_server(
                    StdioServerParameters(command=entry["command"], args=entry["args"])
                )
                outcomes[name] = "connected"
            except Exception as exc:
                outcomes[name] = f"{said(exc)} after {ms(time.perf_counter() - t0)}"
        record["ready_s"] = time.perf_counter() - started
        record["outcomes"] = outcomes
        tools = sorted(group.tools)
        record["tools"] = tools
        add = next((n for n in tools if n == "add" or n.endswith("_add")), None)
        if add is not None:
            record["call_us"] = await _atime_calls(lambda: group.call_tool(add, {"a": 1, "b": 2}))
        t0 = time.perf_counter()
        try:
            # The dead entry never joined: its tools have no name in the group. The only way
            # to address it is a name it would have had.
            await group.call_tool("conduit-modern-peer_add", {"a": 1, "b": 2})
            record["dead_call"] = "answered"
        except Exception as exc:
            record["dead_call_s"] = time.perf_counter() - t0
            record["dead_call"] = said(exc)
        if add is not None and hook is None:
            await aafter_kill(record, lambda: group.call_tool(add, {"a": 1, "b": 2}))


def run_session_group(server_python: str) -> dict[str, Any]:
    import importlib.metadata

    record = Record("mcp ClientSessionGroup", importlib.metadata.version("mcp"))
    asyncio.run(_session_group(server_python, None, record))
    plain = dict(record.data)
    # Its own remedy for collisions: a name hook given (name, server_info). Both copies report
    # the same server_info.name, so the hook cannot tell them apart.
    hooked = Record("", "")
    asyncio.run(_session_group(server_python, lambda name, info: f"{info.name}_{name}", hooked))
    out = plain["outcomes"]
    record["started"] = (
        "partly: "
        + ", ".join(f"{n} {'ok' if v == 'connected' else 'failed'}" for n, v in out.items())
        + " (each connect_to_server wrapped by the caller)"
    )
    record["dead_entry"] = f"connect_to_server raised {out['dead']}"
    record["duplicates"] = (
        f"beta refused: {out['beta']}; with component_name_hook=server_info.name: "
        f"{hooked.data['outcomes']['beta']}"
    )
    record["ready_s"] = plain["ready_s"]
    record["call_us"] = plain.get("call_us")
    record["dead_call"] = plain["dead_call"]
    record["dead_call_s"] = plain.get("dead_call_s")
    for key in ("killed_call", "killed_call_s", "recovered_s"):
        record[key] = plain.get(key)
    record["short"] = {
        "started": "partly: each `connect_to_server` is the caller's to wrap",
        "duplicates": "the second copy is refused (`MCPError`), with the name hook too",
        "dead_call": "`KeyError`: its tools never had a name",
    }
    return record.data


# -- fastmcp's ClientGroup --------------------------------------------------------------------


async def _client_group(server_python: str, record: Record) -> None:
    from fastmcp import ClientGroup

    started = time.perf_counter()
    try:
        async with ClientGroup.from_config(config(server_python)) as group:
            record["started"] = "yes (unexpected)"
    except Exception as exc:
        record["started"] = (
            f"no: the group failed as a whole after {ms(time.perf_counter() - started)}"
        )
        record["dead_entry"] = f"fails the whole group: {said(exc)}"
    record["short"] = {
        "started": "no: one dead entry fails the whole group",
        "duplicates": "both kept: `alpha_add`, `beta_add`",
        "dead_call": "n/a: no group starts with it",
    }
    # Without the dead entry, to see the rest of the task.
    started = time.perf_counter()
    async with ClientGroup.from_config(config(server_python, with_dead=False)) as group:
        tools = await group.list_tools()
        record["ready_s"] = time.perf_counter() - started
        names = sorted(t.name for t in tools)
        shared = [n for n in names if n.endswith("_add")]
        record["duplicates"] = (
            f"both listed, prefixed by config key: {', '.join(shared)} ({len(names)} tools)"
        )
        record["call_us"] = await _atime_calls(
            lambda: group.call_tool("alpha_add", {"a": 1, "b": 2})
        )
        try:
            await group.call_tool("dead_add", {"a": 1, "b": 2})
            record["dead_call"] = "answered"
        except Exception as exc:
            record["dead_call"] = (
                f"n/a (no group with the dead entry); an unknown name: {said(exc)}"
            )
        await aafter_kill(record, lambda: group.call_tool("alpha_add", {"a": 1, "b": 2}))
    record.note("ready and call measured on a group without the dead entry")


def run_fastmcp(server_python: str) -> dict[str, Any]:
    import fastmcp

    record = Record("fastmcp ClientGroup", fastmcp.__version__)
    asyncio.run(_client_group(server_python, record))
    return record.data


# -- openai-agents' MCPServerManager ----------------------------------------------------------


async def _server_manager(server_python: str, record: Record) -> None:
    from agents import Agent, RunContextWrapper
    from agents.exceptions import UserError
    from agents.mcp import MCPServerManager, MCPServerStdio, MCPUtil

    servers = {
        name: MCPServerStdio(
            {"command": e["command"], "args": e["args"]},
            name=name,
            cache_tools_list=True,
            client_session_timeout_seconds=DEADLINE,
        )
        for name, e in config(server_python)["mcpServers"].items()
    }
    started = time.perf_counter()
    async with MCPServerManager(
        list(servers.values()), connect_timeout_seconds=DEADLINE, connect_in_parallel=True
    ) as manager:
        record["ready_s"] = time.perf_counter() - started
        active = [s.name for s in manager.active_servers]
        failed = {s.name: said(e) for s, e in manager.errors.items()}
        record["started"] = f"partly: active {', '.join(active)}; failed {', '.join(failed)}"
        record["dead_entry"] = f"kept out of active_servers: {failed.get('dead', '-')}"
        record["short"] = {
            "started": "yes: `dead` is left out of `active_servers`",
            "duplicates": "an agent's tool list is refused (`UserError`); prefixed by an option",
            "dead_call": "`UserError`: server not initialized",
        }
        agent = Agent(name="compare")
        context = RunContextWrapper(context=None)
        try:
            await MCPUtil.get_all_function_tools(manager.active_servers, False, context, agent)
            plain = "accepted"
        except UserError as exc:
            plain = said(exc)
        prefixed = await MCPUtil.get_all_function_tools(
            manager.active_servers, False, context, agent, include_server_in_tool_names=True
        )
        shared = sorted(t.name for t in prefixed if t.name.endswith("add"))
        record["duplicates"] = (
            f"tools for an agent: {plain}; with include_server_in_tool_names=True: "
            f"{', '.join(shared)}"
        )
        alpha = servers["alpha"]
        await alpha.list_tools()
        record["call_us"] = await _atime_calls(lambda: alpha.call_tool("add", {"a": 1, "b": 2}))
        t0 = time.perf_counter()
        try:
            await servers["dead"].call_tool("add", {"a": 1, "b": 2})
            record["dead_call"] = "answered"
        except Exception as exc:
            record["dead_call_s"] = time.perf_counter() - t0
            record["dead_call"] = said(exc)
        await aafter_kill(record, lambda: alpha.call_tool("add", {"a": 1, "b": 2}))
    record.note("no merged view: calls go to the server object the caller picks")


def run_agents(server_python: str) -> dict[str, Any]:
    import importlib.metadata

    record = Record("openai-agents MCPServerManager", importlib.metadata.version("openai-agents"))
    asyncio.run(_server_manager(server_python, record))
    return record.data


RUNNERS: dict[str, Callable[[str], dict[str, Any]]] = {
    "conduit": run_conduit,
    "session_group": run_session_group,
    "fastmcp": run_fastmcp,
    "agents": run_agents,
}


# -- the parent: run each in its own process, summarise ---------------------------------------


def child(name: str, python: str, server_python: str) -> dict[str, Any]:
    argv = [python, __file__, "--run", name, "--server-python", server_python]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env)
    except subprocess.TimeoutExpired:
        return {"library": name, "error": "did not finish within 180 s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = done.stderr.strip().splitlines()[-3:]
        return {"library": name, "error": f"exit {done.returncode}: {' | '.join(tail)}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The last run's words, the median of every run's timings."""
    good = [r for r in runs if "error" not in r]
    if not good:
        return runs[-1]
    out = dict(good[-1])
    for key in ("ready_s", "call_us", "start_returned_s", "dead_call_s", "killed_call_s"):
        values = [r[key] for r in good if isinstance(r.get(key), int | float)]
        out[key] = statistics.median(values) if values else None
    out["rounds"] = len(good)
    back = [r["recovered_s"] for r in good if isinstance(r.get("recovered_s"), int | float)]
    out["recovered"] = (
        f"yes, after {ms(statistics.median(back))} ({len(back)}/{len(good)} runs)"
        if back
        else f"no (not within {RECOVERY:g} s)"
    )
    return out


COLUMNS = (
    "library",
    "starts with a dead entry?",
    "two servers, same tool names",
    "time to ready",
    "one call (median)",
    "a call to the dead server",
    "alpha's server killed: the next call",
    "alpha back?",
)


def row(r: dict[str, Any]) -> list[str]:
    if "error" in r:
        return [r["library"], f"benchmark failed: {r['error']}", "", "", "", "", "", ""]
    short = r.get("short", {})
    ready = f"{r['ready_s']:.2f} s" if r.get("ready_s") is not None else "-"
    if r.get("start_returned_s") is not None:
        ready += f" (`start` returned in {ms(r['start_returned_s'])})"
    if any("without the dead entry" in n for n in r.get("notes", [])):
        ready += " (without the dead entry)"
    call = f"{r['call_us']:.0f} µs" if r.get("call_us") is not None else "-"
    dead = short.get("dead_call", "-")
    if r.get("dead_call_s") is not None:
        dead += f", in {ms(r['dead_call_s'])}"
    killed = r.get("killed_call") or "-"
    if r.get("killed_call_s") is not None:
        killed += f", in {ms(r['killed_call_s'])}"
    back = r.get("recovered")
    return [
        f"{r['library']} {r['version']}",
        short.get("started", "-"),
        short.get("duplicates", "-"),
        ready,
        call,
        dead,
        killed,
        back if back is not None else "-",
    ]


def markdown(results: list[dict[str, Any]]) -> str:
    """The summary table, then each library's own words (the exceptions it raised)."""

    def esc(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join(" --- " for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row(r)) + " |" for r in results]
    lines += ["", "What each one said:", ""]
    for r in results:
        if "error" in r:
            continue
        lines.append(f"- **{r['library']}**")
        for key, title in (
            ("started", "start"),
            ("dead_entry", "the dead entry"),
            ("duplicates", "the shared names"),
            ("dead_call", "the call to the dead server"),
        ):
            if r.get(key):
                lines.append(f"  - {title}: {esc(str(r[key]))}")
        lines.extend(f"  - note: {esc(n)}" for n in r.get("notes", []))
    return "\n".join(lines)


def write_doc(path: Path, table: str, stamp: str) -> None:
    text = path.read_text(encoding="utf-8")
    before, found, rest = text.partition(BEGIN)
    _, found_end, after = rest.partition(END)
    if not found or not found_end:
        raise SystemExit(f"{path} has no {BEGIN} ... {END} markers")
    path.write_text(f"{before}{BEGIN}\n{stamp}\n\n{table}\n{END}{after}", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", choices=sorted(RUNNERS), help=argparse.SUPPRESS)
    parser.add_argument(
        "--server-python",
        default=sys.executable,
        help="the Python that runs the peer server (needs mcp 2.3.0; default: this one)",
    )
    parser.add_argument(
        "--compare-python",
        default=str(REPO / ".venv-compare" / "bin" / "python"),
        help="the Python with fastmcp and openai-agents (make compare-peers)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="runs per library (default 3)")
    parser.add_argument("--only", action="append", choices=sorted(RUNNERS), help="run only these")
    parser.add_argument("--doc", type=Path, help="rewrite the table in this Markdown page")
    args = parser.parse_args()
    if args.run:
        print(json.dumps(RUNNERS[args.run](args.server_python)), flush=True)
        return 0
    pythons = {
        "conduit": sys.executable,
        "session_group": sys.executable,
        "fastmcp": args.compare_python,
        "agents": args.compare_python,
    }
    if not Path(args.compare_python).exists():
        print(f"{args.compare_python} is missing: run `make compare-peers`", file=sys.stderr)
        return 2
    load = os.getloadavg()[0]
    results = []
    for name in args.only or list(RUNNERS):
        runs = [child(name, pythons[name], args.server_python) for _ in range(args.rounds)]
        results.append(summarise(runs))
        print(f"{name}: {json.dumps(results[-1])}", file=sys.stderr, flush=True)
    table = markdown(results)
    print(table)
    if args.doc is not None:
        stamp = (
            f"Measured {time.strftime('%Y-%m-%d', time.gmtime())} on a 2-core machine "
            f"(load average {load:.1f} at the start), Python {sys.version.split()[0]}, "
            f"{args.rounds} rounds of each library, each in a fresh process (timings are "
            "medians; a call is the median of "
            f"{CALLS}). `make bench`, or `benchmarks/hub_compare.py --doc "
            "docs/hub-compared.md`, measures again."
        )
        write_doc(args.doc, table, stamp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
