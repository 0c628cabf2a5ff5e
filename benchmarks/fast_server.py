"""A minimal, fast stdio MCP server for benchmarks: one tool, ``add``, answered from templates.

Speaks just enough of both protocol eras for the official ``mcp`` 2.3.0 client (``auto``,
``legacy`` and ``2026-07-28`` modes) and conduit-mcp:

* ``server/discover`` (2026-07-28) and ``initialize`` (2024-11-05 ... 2025-11-25)
* ``notifications/*`` are ignored; ``ping`` -> ``{}``
* ``tools/list`` -> the one tool ``add``
* ``tools/call`` -> ``{"content":[{"type":"text","text":"3"}],"isError":false,"resultType":"complete"}``
  (a constant: the benchmark measures the client, not arithmetic)
* anything else with an id -> -32601

It reads stdin in large chunks and answers every complete line of a chunk with ONE write, so
pipelined requests cost one syscall per batch: it must never be the bottleneck.
``--trace`` (or ``FAST_SERVER_TRACE=1``; note the official client's stdio transport does not pass
the parent's environment through) logs every request line to stderr.
"""

from __future__ import annotations

import os
import sys

import orjson

SERVER_INFO = {"name": "conduit-fast-server", "version": "1.0.0"}
MODERN = "2026-07-28"
HANDSHAKE = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
CAPABILITIES = {"tools": {"listChanged": False}}
ADD_TOOL = {
    "name": "add",
    "description": "Add two integers.",
    "inputSchema": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
}

DISCOVER = {
    "supportedVersions": [MODERN],
    "capabilities": CAPABILITIES,
    "resultType": "complete",
    "ttlMs": 0,
    "cacheScope": "private",
    "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
}
TOOLS_LIST = {"tools": [ADD_TOOL], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}

# Pre-encoded pieces: a response is HEAD + id + tail.
HEAD = b'{"jsonrpc":"2.0","id":'
CALL_TAIL = (
    b',"result":{"content":[{"type":"text","text":"3"}],"isError":false,"resultType":"complete"}}\n'
)
TOOLS_TAIL = b',"result":' + orjson.dumps(TOOLS_LIST) + b"}\n"
DISCOVER_TAIL = b',"result":' + orjson.dumps(DISCOVER) + b"}\n"
EMPTY_TAIL = b',"result":{}}\n'
NOT_FOUND_TAIL = b',"error":{"code":-32601,"message":"Method not found"}}\n'
PARSE_ERROR = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n'


def _initialize_tail(params: dict | None) -> bytes:
    asked = (params or {}).get("protocolVersion")
    version = asked if asked in HANDSHAKE else HANDSHAKE[0]
    result = {"protocolVersion": version, "capabilities": CAPABILITIES, "serverInfo": SERVER_INFO}
    return b',"result":' + orjson.dumps(result) + b"}\n"


def answer(line: bytes) -> bytes:
    """The bytes to write for one request line (b"" for notifications and responses)."""
    try:
        msg = orjson.loads(line)
        method = msg.get("method")
    except (orjson.JSONDecodeError, AttributeError):
        return PARSE_ERROR
    if "id" not in msg or method is None:  # a notification, or a response to us
        return b""
    rid = orjson.dumps(msg["id"])
    if method == "tools/call":
        tail = CALL_TAIL
    elif method == "tools/list":
        tail = TOOLS_TAIL
    elif method == "server/discover":
        tail = DISCOVER_TAIL
    elif method == "initialize":
        tail = _initialize_tail(msg.get("params"))
    elif method == "ping":
        tail = EMPTY_TAIL
    else:
        tail = NOT_FOUND_TAIL
    return HEAD + rid + tail


def main() -> None:
    trace = "--trace" in sys.argv[1:] or bool(os.environ.get("FAST_SERVER_TRACE"))
    read, write = os.read, os.write
    rest = b""
    while True:
        chunk = read(0, 1 << 20)
        if not chunk:
            return
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        out = []
        for line in lines:
            if not line.strip():
                continue
            if trace:
                sys.stderr.write(f"fast_server <- {line.decode(errors='replace')}\n")
            out.append(answer(line))
        data = b"".join(out)
        while data:
            n = write(1, data)
            data = data[n:]


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
