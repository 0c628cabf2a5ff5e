"""A minimal, fast streamable HTTP MCP server for benchmarks: ``fast_server.py``'s answers over HTTP.

    .venv/bin/python benchmarks/fast_http_server.py --port 0      # prints "listening <port>"

Serves ``http://127.0.0.1:PORT/mcp`` (any path, in fact) on a bare ``asyncio.Protocol``
HTTP/1.1 parser: no framework, no validation, so that the client's cost dominates. Both eras:

* every POST body is one JSON-RPC message, answered as ``fast_server.answer`` answers it on
  stdio (``server/discover``, ``initialize``, ``ping``, ``tools/list``, ``tools/call add`` ->
  text ``"3"``), as ``200 application/json``; a POST carrying no id (a notification or a
  response) gets ``202 Accepted`` with no body;
* modern (2026-07-28): nothing is checked (``MCP-Protocol-Version``, ``Mcp-Method``,
  ``Mcp-Name`` are ignored);
* legacy (no ``MCP-Protocol-Version`` header, or a handshake-era one): ``initialize`` answers
  with a fresh ``Mcp-Session-Id``; the session id is never checked afterwards; results carry
  no ``resultType``;
* ``GET`` (the legacy server-to-client stream) -> ``405``; ``DELETE`` (end of session) -> ``200``.

Keep-alive connections; a request body may be sent with ``Content-Length`` or chunked.
``--trace`` logs each request line, header block and body to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # fast_server: a sibling script
from fast_server import HANDSHAKE, answer

LEGACY_CALL_TAIL = b',"result":{"content":[{"type":"text","text":"3"}],"isError":false}}'
MODERN_CALL_TAIL = (
    b',"result":{"content":[{"type":"text","text":"3"}],"isError":false,"resultType":"complete"}}'
)

_sessions = itertools.count(1)


def _head(status: bytes, length: int, extra: bytes = b"", ctype: bool = True) -> bytes:
    return (
        b"HTTP/1.1 "
        + status
        + b"\r\n"
        + (b"Content-Type: application/json\r\n" if ctype else b"")
        + b"Content-Length: "
        + str(length).encode()
        + b"\r\n"
        + extra
        + b"\r\n"
    )


ACCEPTED = _head(b"202 Accepted", 0, ctype=False)
NOT_ALLOWED = _head(b"405 Method Not Allowed", 0, b"Allow: POST, DELETE\r\n", ctype=False)
DELETED = _head(b"200 OK", 0, ctype=False)
BAD = _head(b"400 Bad Request", 0, b"Connection: close\r\n", ctype=False)


def respond(method: bytes, headers: dict[bytes, bytes], body: bytes) -> bytes:
    """The whole HTTP response to one request."""
    if method == b"GET":
        return NOT_ALLOWED
    if method == b"DELETE":
        return DELETED
    if method != b"POST":
        return NOT_ALLOWED
    out = answer(body).rstrip(b"\n")
    if not out:
        return ACCEPTED
    extra = b""
    version = headers.get(b"mcp-protocol-version")
    legacy = version is None or version.decode() in HANDSHAKE
    if legacy:
        if out.endswith(MODERN_CALL_TAIL):
            out = out[: -len(MODERN_CALL_TAIL)] + LEGACY_CALL_TAIL
        elif b'"protocolVersion"' in out and b'"serverInfo"' in out:  # the initialize answer
            extra = b"Mcp-Session-Id: bench-" + str(next(_sessions)).encode() + b"\r\n"
    return _head(b"200 OK", len(out), extra) + out


class HttpProtocol(asyncio.Protocol):
    def __init__(self, trace: bool) -> None:
        self.trace = trace
        self.buf = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        # asyncio's recv asks 256 KiB, over glibc's mmap threshold: every recv mapped and
        # unmapped its buffer (~100 us). The server must never be the bottleneck.
        if getattr(transport, "max_size", 0) > 65536:
            transport.max_size = 65536  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        out: list[bytes] = []
        close = False
        while not close:
            request = self._take()
            if request is None:
                break
            method, headers, body = request
            if method is None:
                out.append(BAD)
                close = True
                break
            if self.trace:
                sys.stderr.write(f"fast_http_server <- {method.decode()} {headers!r} {body!r}\n")
            out.append(respond(method, headers, body))
            close = headers.get(b"connection", b"").lower() == b"close"
        if out:
            self.transport.write(b"".join(out))  # type: ignore[union-attr]
        if close:
            self.transport.close()  # type: ignore[union-attr]

    def _take(self) -> tuple[bytes | None, dict[bytes, bytes], bytes] | None:
        """One complete request off the buffer, or None if it has not all arrived yet."""
        buf = self.buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            return None
        lines = buf[:end].split(b"\r\n")
        method = lines[0].split(b" ", 1)[0]
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        start = end + 4
        if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            body, pos = b"", start
            while True:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    return None
                try:
                    size = int(buf[pos:eol].split(b";", 1)[0], 16)
                except ValueError:
                    return None, {}, b""
                if size == 0:  # the last chunk, optional trailers, an empty line
                    trailer_end = buf.find(b"\r\n\r\n", eol)
                    if trailer_end < 0:
                        return None
                    pos = trailer_end + 4
                    break
                if len(buf) < eol + 2 + size + 2:
                    return None
                body += buf[eol + 2 : eol + 2 + size]
                pos = eol + 2 + size + 2
            self.buf = buf[pos:]
            return method, headers, body
        try:
            length = int(headers.get(b"content-length", b"0"))
        except ValueError:
            return None, {}, b""
        if len(buf) < start + length:
            return None
        self.buf = buf[start + length :]
        return method, headers, buf[start : start + length]


async def serve(host: str, port: int, trace: bool) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: HttpProtocol(trace), host, port, backlog=1024)
    bound = server.sockets[0].getsockname()[1]
    print(f"listening {bound}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0: pick a free port (printed)")
    p.add_argument("--trace", action="store_true", help="log every request to stderr")
    a = p.parse_args()
    asyncio.run(serve(a.host, a.port, a.trace))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
