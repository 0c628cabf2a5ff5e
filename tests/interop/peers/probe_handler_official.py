"""Drive the handler peers with the official ``mcp`` 2.3.0 client (a hand check, not a test).

When a handler interop test fails, run the same peer through the official client to tell a
peer quirk from a bug of ours. Usage (from the repo root, after ``make venv peers``):

    .venv/bin/python tests/interop/peers/probe_handler_official.py legacy -- .venv/bin/python tests/interop/peers/handler_peer.py stdio
    .venv/bin/python tests/interop/peers/probe_handler_official.py 2026-07-28 --url http://127.0.0.1:39031/mcp
    .venv/bin/python tests/interop/peers/probe_handler_official.py auto -- .venv-legacy/bin/python tests/interop/peers/handler_legacy_peer.py stdio
    .venv/bin/python tests/interop/peers/probe_handler_official.py legacy -- node .peers/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio

It answers every elicitation with the form's known fields (or accepts a URL), every sampling
request with "SAMPLED" from "stub-model", and lists one root; then calls each handler tool
the peer lists and prints what came back.
"""

from __future__ import annotations

import argparse
import warnings
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp_types import CreateMessageResult, ElicitResult, ListRootsResult, Root, TextContent

warnings.filterwarnings("ignore")

ANSWERS = {"name": "Ada", "email": "ada@example.org", "yes": True, "colour": "red", "number": 7}
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("book_table", {"party": 4}),
    ("confirm", {"question": "Go?"}),
    ("two_questions", {}),
    ("summarize", {"text": "tides"}),
    ("client_roots", {}),
    ("ask_name", {}),
    ("sample", {"prompt": "hi"}),
    ("roots", {}),
    ("trigger-sampling-request", {"prompt": "hi", "maxTokens": 5}),
    ("trigger-elicitation-request", {}),
    ("trigger-url-elicitation", {"url": "https://example.org/x"}),
    ("get-roots-list", {}),
    ("list_allowed_directories", {}),
]


async def sampling(ctx: Any, params: Any) -> CreateMessageResult:
    print("  sampling/createMessage:", params.model_dump(exclude_none=True, by_alias=True))
    text = TextContent(type="text", text="SAMPLED")
    return CreateMessageResult(role="assistant", content=text, model="stub-model")


async def elicitation(ctx: Any, params: Any) -> ElicitResult:
    print("  elicitation/create:", params.model_dump(exclude_none=True, by_alias=True))
    schema = getattr(params, "requested_schema", None) or {}
    fields = set(schema.get("properties", {}))
    content = {k: v for k, v in ANSWERS.items() if k in fields}
    return ElicitResult(action="accept", content=content or None)


async def roots(ctx: Any) -> ListRootsResult:
    print("  roots/list")
    return ListRootsResult(roots=[Root(uri="file:///tmp", name="tmp")])


async def probe(target: StdioServerParameters | str, mode: str) -> None:
    async with Client(
        target,
        mode=mode,
        sampling_callback=sampling,
        elicitation_callback=elicitation,
        list_roots_callback=roots,
    ) as client:
        print("negotiated", client.protocol_version)
        names = {t.name for t in (await client.list_tools()).tools}
        for name, args in CALLS:
            if name not in names:
                continue
            with anyio.fail_after(20):
                result = await client.call_tool(name, args)
            texts = [getattr(b, "text", b) for b in result.content]
            print(f"{name} -> isError={result.is_error} {texts}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("mode", choices=["legacy", "auto", "2026-07-28"])
    parser.add_argument("--url")
    parser.add_argument("command", nargs="*")
    args = parser.parse_args()
    if args.url:
        target: StdioServerParameters | str = args.url
    else:
        target = StdioServerParameters(command=args.command[0], args=args.command[1:])
    anyio.run(probe, target, args.mode)


if __name__ == "__main__":
    main()
