"""In-process servers: conduit-mcp's ``InProcess`` vs ``Stdio`` on the same server, and vs the
official ``mcp`` 2.3.0 client's in-process ``Client(server)``.

Sequential tool calls (``add {"a": 1, "b": 2}``), one after another from one thread (conduit's
blocking ``call_tool``) or one task (the official client's ``await``):

  scripted  ``conduit_mcp.testing.ScriptedServer``: ``InProcess(server)`` vs ``server.stdio()``
            (the same protocol core, in this process or in a subprocess)
  sdk       the official SDK's ``MCPServer`` with one tool: ``InProcess(server)`` vs the same
            server run on stdio in a subprocess (this script, ``--serve-sdk``), and the
            official client's ``Client(server, mode=...)`` (its modern mode calls the server's
            handlers directly, no streams; its legacy mode runs the SDK's in-memory streams)

Both eras (``--era``: modern, legacy). Each scenario runs ``--repeat`` times after
``--warmup`` calls; the best run is kept. Prints calls/s, latency p50/p99, and the ratios
InProcess/Stdio and conduit InProcess/official in-process for the same server and era.

    .venv/bin/python benchmarks/inprocess_bench.py
    .venv/bin/python benchmarks/inprocess_bench.py --calls 300 --repeat 1   # a quick check
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # measure: a sibling module
from measure import Timed, time_sequential, time_sequential_async

HERE = Path(__file__).resolve().parent
ARGS = {"a": 1, "b": 2}

warnings.filterwarnings("ignore", message=".*SEP-2577.*")
warnings.filterwarnings("ignore", message=".*deprecated.*")


@dataclass
class Row(Timed):
    server: str  # "scripted" | "sdk"
    era: str  # "modern" | "legacy"
    client: str  # "inprocess" | "stdio" | "official"
    label: str


def sdk_server() -> Any:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench")

    @server.tool()
    async def add(a: int, b: int) -> int:
        return a + b

    return server


def protocol_of(era: str) -> str:
    return "auto" if era == "modern" else "legacy"


def time_calls(row: Row, call: Callable[[], object], n: int, warmup: int) -> None:
    for _ in range(warmup):
        call()
    time_sequential(row, n, call)


def bench_conduit(row: Row, spec: Any, n: int, warmup: int) -> None:
    import conduit_mcp as mcp

    with mcp.Client.start(spec, protocol=protocol_of(row.era)) as client:
        client.await_ready(timeout=30)
        if client.status().era != row.era:
            raise RuntimeError(f"negotiated {client.status().era}, expected {row.era}")
        first = client.call_tool("add", ARGS)
        if first.is_error:
            raise RuntimeError(f"bad result {first.text!r}")
        time_calls(row, lambda: client.call_tool("add", ARGS), n, warmup)


def bench_official(row: Row, n: int, warmup: int) -> None:
    import anyio
    from mcp import Client

    async def run() -> None:
        mode = "auto" if row.era == "modern" else "legacy"
        async with Client(sdk_server(), mode=mode) as client:
            for _ in range(warmup):
                r = await client.call_tool("add", ARGS)
            if r.is_error:
                raise RuntimeError(f"bad result {r!r}")
            await time_sequential_async(row, n, client.call_tool, "add", ARGS)

    anyio.run(run)


def scenarios(era: str, workdir: str) -> list[tuple[Row, Callable[[Row, int, int], None]]]:
    import conduit_mcp as mcp
    from conduit_mcp.testing import ScriptedServer

    scripted = ScriptedServer(workdir, name=f"bench-{era}")
    stdio_sdk = mcp.Stdio(sys.executable, [str(Path(__file__).resolve()), "--serve-sdk"])
    return [
        (
            Row("scripted", era, "inprocess", "conduit InProcess(ScriptedServer)"),
            lambda r, n, w: bench_conduit(r, mcp.InProcess(scripted), n, w),
        ),
        (
            Row("scripted", era, "stdio", "conduit Stdio(ScriptedServer.stdio())"),
            lambda r, n, w: bench_conduit(r, scripted.stdio(), n, w),
        ),
        (
            Row("sdk", era, "inprocess", "conduit InProcess(MCPServer)"),
            lambda r, n, w: bench_conduit(r, mcp.InProcess(sdk_server()), n, w),
        ),
        (
            Row("sdk", era, "stdio", "conduit Stdio(MCPServer on stdio)"),
            lambda r, n, w: bench_conduit(r, stdio_sdk, n, w),
        ),
        (
            Row("sdk", era, "official", "official mcp 2.3.0 Client(MCPServer)"),
            lambda r, n, w: bench_official(r, n, w),
        ),
    ]


def report(rows: list[Row]) -> str:
    def find(server: str, era: str, client: str) -> Row | None:
        for r in rows:
            if (r.server, r.era, r.client) == (server, era, client) and r.error is None:
                return r
        return None

    def ratio(r: Row, other: Row | None) -> str:
        if r.client != "inprocess" or other is None or not other.rate:
            return ""
        return f"{r.rate / other.rate:.2f}x"

    head = (
        f"{'scenario':<44} {'era':<7} {'calls':>6} {'calls/s':>9} {'p50 us':>8} {'p99 us':>8}"
        f" {'/stdio':>7} {'/official':>9}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        if r.error:
            lines.append(f"{r.label:<44} {r.era:<7} {r.error}")
            continue
        lines.append(
            f"{r.label:<44} {r.era:<7} {r.calls:>6} {r.rate:>9.0f} {r.pct(0.5):>8.0f}"
            f" {r.pct(0.99):>8.0f} {ratio(r, find(r.server, r.era, 'stdio')):>7}"
            f" {ratio(r, find(r.server, r.era, 'official')):>9}"
        )
    return "\n".join(lines)


def serve_sdk() -> int:
    sdk_server().run("stdio")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--era", default="modern,legacy", help="comma list of modern,legacy")
    parser.add_argument("--serve-sdk", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_sdk:
        return serve_sdk()
    print(f"python {platform.python_version()} on {platform.machine()}, {args.calls} calls")
    best: list[Row] = []
    with tempfile.TemporaryDirectory() as workdir:
        for era in args.era.split(","):
            for proto, run in scenarios(era, workdir):
                kept: Row | None = None
                for _ in range(args.repeat):
                    row = Row(proto.server, proto.era, proto.client, proto.label)
                    try:
                        run(row, args.calls, args.warmup)
                    except Exception as e:
                        row.error = f"failed ({type(e).__name__}: {e})"
                        traceback.print_exc()
                    if kept is None or (row.error is None and row.rate > kept.rate):
                        kept = row
                assert kept is not None
                best.append(kept)
    print(report(best))
    return 0


if __name__ == "__main__":
    sys.exit(main())
