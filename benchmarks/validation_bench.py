"""Checking tool results against their outputSchema: what it costs, conduit-mcp vs the official
``mcp`` 2.3.0 client.

(a) libraries: compiling a schema and validating one value with each candidate, on three
    schemas (``small``: the scripted server's ``add``, ``{"sum": number}``; ``medium``: what
    the official ``MCPServer`` derives from a pydantic return type, ``$defs`` and a local
    ``$ref``, 10 corners; ``large``: 40 properties with patterns and an array of 50
    objects):
        jsonschema 4.26     ``validator_for(s)(s, registry=Registry())``, and per value
                            ``best_match(iter_errors(v))`` (exactly the official client's)
        fastjsonschema      ``compile(s, handlers={})`` (no remote refs), and ``validate(v)``
        jsonschema-rs       ``validator_for(s, offline=True, pattern_options=...)`` as
                            conduit compiles it, and ``is_valid(v)`` (conduit's valid path)
(b) per call, on each client's own code, compiled validators cached, after a real call of
    the scripted server's ``add`` (so each client has listed the tool and cached its
    validator):
        official   ``await client.session.validate_tool_result("add", result)``
        conduit    the caller-side work ``call_tool`` adds: the tool from the cache, the
                   compiled validator, and the parse with the check, less the parse alone
(c) with ``--e2e``: sequential ``call_tool("add")`` over stdio to the scripted server, conduit
    with ``validate_output`` on and off (the official client always validates), for scale.

Times are best of ``--repeat`` runs, in microseconds per operation; ratios are printed.

    .venv/bin/python benchmarks/validation_bench.py
    .venv/bin/python benchmarks/validation_bench.py --calls 2000 --repeat 1 --e2e
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

warnings.filterwarnings("ignore", message=".*SEP-2577.*")
warnings.filterwarnings("ignore", message=".*deprecated as of 2026-07-28.*")

SMALL = {"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}
MEDIUM = {
    "$defs": {
        "Point": {
            "properties": {
                "x": {"title": "X", "type": "integer"},
                "y": {"title": "Y", "type": "integer"},
            },
            "required": ["x", "y"],
            "title": "Point",
            "type": "object",
        }
    },
    "properties": {
        "name": {"title": "Name", "type": "string"},
        "corners": {"items": {"$ref": "#/$defs/Point"}, "title": "Corners", "type": "array"},
    },
    "required": ["name", "corners"],
    "title": "Shape",
    "type": "object",
}
LARGE = {
    "type": "object",
    "properties": {
        **{f"field_{i}": {"type": "string", "pattern": "^[a-z0-9_]{1,32}$"} for i in range(40)},
        "rows": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer", "minimum": 0},
                    "label": {"type": "string", "maxLength": 64},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["id", "label"],
            },
        },
    },
    "required": ["rows"],
}
VALUES = {
    "small": (SMALL, {"sum": 3}),
    "medium": (MEDIUM, {"name": "shape", "corners": [{"x": i, "y": i} for i in range(10)]}),
    "large": (
        LARGE,
        {
            **{f"field_{i}": f"value_{i}" for i in range(40)},
            "rows": [{"id": i, "label": f"row {i}", "tags": ["a", "b"]} for i in range(50)],
        },
    ),
}


def per_op(fn: Callable[[], object], n: int, repeat: int) -> float:
    """Best-of-``repeat`` seconds per call of ``fn``, ``n`` calls a run."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
    return best


# --------------------------------------------------------------------------- (a) libraries


def libraries(calls: int, repeat: int) -> None:
    import fastjsonschema
    import jsonschema_rs
    from jsonschema import exceptions
    from jsonschema.validators import validator_for
    from referencing import Registry

    from conduit_mcp.protocol.schema import compile_schema

    def js_compile(s: dict[str, Any]) -> Any:
        cls = validator_for(s)
        cls.check_schema(s)
        return cls(s, registry=Registry())

    libs: dict[str, tuple[Callable[[Any], Any], Callable[[Any, Any], Any]]] = {
        "jsonschema": (js_compile, lambda v, x: exceptions.best_match(v.iter_errors(x))),
        "fastjsonschema": (lambda s: fastjsonschema.compile(s, handlers={}), lambda v, x: v(x)),
        "jsonschema-rs": (compile_schema, lambda v, x: v.is_valid(x)),
    }
    print("(a) libraries: compile a schema / validate one valid value (µs, best of runs)")
    print(f"{'schema':<8} {'library':<15} {'compile':>10} {'validate':>10} {'rs faster':>18}")
    for label, (schema, value) in VALUES.items():
        got: dict[str, tuple[float, float]] = {}
        for name, (compile_, check) in libs.items():
            c = per_op(lambda f=compile_, s=schema: f(s), max(20, calls // 50), repeat)
            v_ = compile_(schema)
            check(v_, value)
            v = per_op(lambda f=check, v_=v_, x=value: f(v_, x), calls, repeat)
            got[name] = (c, v)
        rs_c, rs_v = got["jsonschema-rs"]
        for name, (c, v) in got.items():
            ratio = "" if name == "jsonschema-rs" else f"{c / rs_c:6.0f}x / {v / rs_v:5.0f}x"
            print(f"{label:<8} {name:<15} {c * 1e6:10.1f} {v * 1e6:10.2f} {ratio:>18}")
    # sanity: jsonschema-rs refuses a remote $ref instead of fetching it
    try:
        jsonschema_rs.validator_for({"$ref": "http://127.0.0.1:9/x.json"}, offline=True)
    except jsonschema_rs.ValidationError:
        pass
    else:
        raise SystemExit("jsonschema-rs compiled a remote $ref offline?")


# --------------------------------------------------------------------------- (b) per call


def official_per_call(
    server_args: list[str], env: dict[str, str], calls: int, repeat: int
) -> float:
    import anyio
    from mcp import Client, StdioServerParameters

    out: list[float] = []

    async def run() -> None:
        params = StdioServerParameters(command=sys.executable, args=server_args, env=env)
        async with Client(params, mode="auto") as client:
            result = await client.call_tool("add", {"a": 1, "b": 2})  # lists, caches validator
            session = client.session
            await session.validate_tool_result("add", result)
            best = float("inf")
            for _ in range(repeat):
                t = time.perf_counter()
                for _ in range(calls):
                    await session.validate_tool_result("add", result)
                best = min(best, (time.perf_counter() - t) / calls)
            out.append(best)

    anyio.run(run)
    return out[0]


def conduit_per_call(server: Any, calls: int, repeat: int) -> tuple[float, float]:
    import conduit_mcp as mcp
    from conduit_mcp import request as rq
    from conduit_mcp import validation as vd
    from conduit_mcp.protocol.results import parse_call_tool

    with mcp.Client.start(server.stdio()) as client:
        client.await_ready(timeout=20)
        raw = client.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
        client.call_tool("add", {"a": 1, "b": 2})  # lists, compiles and caches
        handle = client._handle

        def checked() -> None:
            req = rq.call_tool("add", {"a": 1, "b": 2}, None)
            checks = vd.find_tool(handle, req)
            assert isinstance(checks, vd.ToolChecks)
            vd.checked(req, checks).parse(raw)

        def plain() -> None:
            rq.call_tool("add", {"a": 1, "b": 2}, None).parse(raw)

        with_check = per_op(checked, calls, repeat)
        without = per_op(plain, calls, repeat)
        assert parse_call_tool(raw).structured_content == {"sum": 3}
    return with_check - without, without


def per_call(calls: int, repeat: int) -> None:
    from conduit_mcp.testing import ScriptedServer

    server = ScriptedServer(tempfile.mkdtemp())
    official = official_per_call(server.args(), server.env(), calls, repeat)
    added, parse = conduit_per_call(server, calls, repeat)
    print()
    print("(b) per call, compiled and cached, the scripted server's add ({'sum': number})")
    print(f"  official mcp 2.3.0  validate_tool_result        {official * 1e6:9.2f} µs")
    print(
        f"  conduit-mcp         lookup + check (added)      {added * 1e6:9.2f} µs"
        f"   ({official / added:,.0f}x less; the parse alone: {parse * 1e6:.2f} µs)"
    )


# --------------------------------------------------------------------------- (c) end to end


def end_to_end(calls: int) -> None:
    import anyio
    from mcp import Client, StdioServerParameters

    import conduit_mcp as mcp
    from conduit_mcp.testing import ScriptedServer

    server = ScriptedServer(tempfile.mkdtemp())
    print()
    print(f"(c) end to end: {calls} sequential call_tool('add') over stdio, scripted server")
    rates: dict[str, float] = {}
    for check in (True, False):
        with mcp.Client.start(server.stdio(), validate_output=check) as client:
            client.await_ready(timeout=20)
            for _ in range(50):
                client.call_tool("add", {"a": 1, "b": 2})
            t = time.perf_counter()
            for _ in range(calls):
                client.call_tool("add", {"a": 1, "b": 2})
            rates[f"conduit validate_output={check}"] = calls / (time.perf_counter() - t)

    async def run() -> None:
        params = StdioServerParameters(command=sys.executable, args=server.args(), env=server.env())
        async with Client(params, mode="auto") as client:
            for _ in range(50):
                await client.call_tool("add", {"a": 1, "b": 2})
            t = time.perf_counter()
            for _ in range(calls):
                await client.call_tool("add", {"a": 1, "b": 2})
            rates["official mcp 2.3.0 (validates)"] = calls / (time.perf_counter() - t)

    anyio.run(run)
    official = rates["official mcp 2.3.0 (validates)"]
    for name, rate in rates.items():
        print(f"  {name:<34} {rate:9,.0f} calls/s   {rate / official:5.2f}x official")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20000, help="validations per timed run (20000)")
    p.add_argument("--repeat", type=int, default=3, help="runs per figure, best kept (3)")
    p.add_argument("--e2e", action="store_true", help="also time calls end to end over stdio")
    p.add_argument("--e2e-calls", type=int, default=2000, help="sequential calls for --e2e (2000)")
    a = p.parse_args()
    libraries(a.calls, a.repeat)
    per_call(a.calls, a.repeat)
    if a.e2e:
        end_to_end(a.e2e_calls)


if __name__ == "__main__":
    main()
