"""JSON-RPC 2.0 framing and classification: bytes in, plain values out.

stdio carries newline-delimited JSON, one message per line with no embedded newline
(MCP spec, Transports, "stdio"), so :func:`encode` produces exactly one line and :class:`LineDecoder` splits a
byte stream back into lines. :func:`decode` classifies one line into the five shapes the
connection routes on. Nothing here does I/O or raises on server input: a broken frame is a
value (:class:`FrameError`, :class:`Invalid`), so the connection decides what it costs.

Speed: this module is on the per-message hot path. It uses orjson (about 17x faster than
``json`` for ``dumps``, 4x for ``loads`` on this machine), NamedTuples built
with ``tuple.__new__`` (about 2.5x cheaper than the generated ``__new__`` and than a frozen
dataclass), and plain dict lookups; see the notes next to each trick.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import orjson

from ..errors import Error

# -- error codes (MCP spec 2026-07-28, "Error codes") ------------------------------------------

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
#: Modern (2026-07-28): an HTTP header disagrees with the body (or is missing).
HEADER_MISMATCH: Final = -32020
#: Modern: the request needs a client capability it did not declare in ``_meta``.
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
#: Modern: the requested protocol version is not supported; ``data.supported`` lists them.
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
#: Legacy (2025-11-25 and earlier) "resource not found"; clients SHOULD still accept it.
RESOURCE_NOT_FOUND: Final = -32002
#: Legacy (2025-11-25 only) "URL elicitation required".
URL_ELICITATION_REQUIRED: Final = -32042

#: Draft-era numbers of -32020/-32021/-32022, renumbered before GA.
#: They are NOT recognised as modern: -32000..-32019 is "implementation-defined" and
#: receivers "MUST NOT assume any specific meaning" (e.g. the TypeScript SDK uses -32001
#: for its request timeout), so reading them as modern would misclassify legacy servers.
RETIRED_HEADER_MISMATCH: Final = -32001
RETIRED_MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32003
RETIRED_UNSUPPORTED_PROTOCOL_VERSION: Final = -32004

#: The codes that prove the peer speaks the modern era (final numbering only).
MODERN_ERROR_CODES: Final = frozenset(
    {HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION}
)

_REASONS: Final[dict[int, str]] = {
    PARSE_ERROR: "parse_error",
    INVALID_REQUEST: "invalid_request",
    METHOD_NOT_FOUND: "method_not_found",
    INVALID_PARAMS: "invalid_params",
    INTERNAL_ERROR: "internal_error",
    HEADER_MISMATCH: "header_mismatch",
    MISSING_REQUIRED_CLIENT_CAPABILITY: "missing_client_capability",
    UNSUPPORTED_PROTOCOL_VERSION: "unsupported_protocol_version",
    RESOURCE_NOT_FOUND: "resource_not_found",
    URL_ELICITATION_REQUIRED: "url_elicitation_required",
}
#: Longest server error message kept in an Error (a server may answer with a stack trace).
MAX_SERVER_MESSAGE: Final = 500

# -- encoding ------------------------------------------------------------------------------

# Bound once: attribute lookups on the orjson module cost ~20 ns per call on the hot path.
_dumps = orjson.dumps
_loads = orjson.loads
_NEWLINE: Final = orjson.OPT_APPEND_NEWLINE
# orjson's own messages for these causes name a type or a limit, never a value.
_SAFE_CAUSES: Final = (
    "Type is not JSON serializable",
    "Integer exceeds 64-bit range",
    "Dict key must be str",
    "Recursion limit reached",
    "str is not valid UTF-8",
)


def encode(message: dict[str, Any]) -> bytes:
    """One stdio frame: compact JSON plus ``b"\\n"`` (newline-delimited stdio).

    orjson never emits a raw newline in compact mode, so the output is exactly one line.
    Unserialisable input raises ``Error("argument", "not_json")`` whose message names the
    cause but never the value: the value may be a secret tool argument (docs/secrets.md).
    Note that orjson writes NaN and infinities as ``null``.
    """
    try:
        return _dumps(message, option=_NEWLINE)
    except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
        cause = str(exc)
        safe = next((c for c in _SAFE_CAUSES if cause.startswith(c)), None)
        text = cause if safe is not None and len(cause) < 120 else "unsupported value"
        # ``from None``: the chained orjson exception must not carry the value either.
        raise Error("argument", "not_json", f"message is not JSON-serialisable: {text}") from None


#: Frames shorter than this are copied by :func:`encode_kept`; longer ones sit in an
#: ``mmap`` of orjson's whose untouched tail is not resident, and a copy would double them.
KEEP_COPY_BELOW: Final = 1024 * 1024


def encode_kept(message: dict[str, Any]) -> bytes:
    """:func:`encode` for a frame that is kept while it waits (an HTTP request's body, held
    for a resend until its answer; an answer or a frame queued for an in-process server).

    orjson returns its output in the buffer it wrote into, which is far larger than the
    output: measured, a 100-byte frame holds 4 KiB and a 3 KB one 32 KiB, and 10,000 small
    frames held took 39.5 MiB of RSS where right-sized copies took 1.5 MiB. Limits counted
    in bytes (``max_answer_backlog``) would then understate memory 40 times. A copy costs
    about 0.25 us for a small frame; a frame written at once (stdio) needs none.

    >>> frame = encode_kept({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    >>> frame == encode({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    True
    """
    out = encode(message)
    return bytes(memoryview(out)) if len(out) < KEEP_COPY_BELOW else out


# -- framing -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FrameError:
    """A line the decoder refused. ``reason`` is ``"oversize"``; ``detail`` its size so far.

    For ``oversize`` the detail is the number of bytes of that line seen when it was
    rejected: always more than ``max_frame``, but how many more depends on how the bytes
    arrived, because the rest of the line is discarded unread. ``id`` is the id of the
    response the line was, when its first bytes say so (:func:`response_id`): the request
    it answers can then fail at once instead of running into its deadline.
    """

    reason: str
    detail: int | str
    id: int | str | None = None


#: How much of an oversize line's start is searched for its id: servers write ``jsonrpc``
#: and ``id`` before ``result`` (the official SDKs do), so the id is within a few bytes.
ID_SCAN: Final = 4096
_WS = re.compile(rb"[ \t\r\n]*")
# Alternatives that cannot both match a character: no catastrophic backtracking.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_INT = re.compile(rb"-?(?:0|[1-9][0-9]*)(?![0-9.eE])")
_SCALAR_END = re.compile(rb"[,}\] \t\r\n]")
_OPEN: Final = b"{["
_CLOSE: Final = b"}]"


def response_id(prefix: bytes | bytearray) -> int | str | None:
    """The id of the JSON-RPC response that a frame starting with ``prefix`` is, or None.

    Reads the top-level keys of the object in the first :data:`ID_SCAN` bytes, skipping
    nested values without decoding them. An id counts only once a ``result`` or ``error``
    key shows the frame is a response, and never if a ``method`` key shows a server
    request (whose ids are the server's own and could equal one of ours). Pure; never
    raises.

    >>> response_id(b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"text":"xxxx')
    7
    >>> response_id(b'{"id":"a","error":{"code":1')
    'a'
    >>> response_id(b'{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage"') is None
    True
    >>> response_id(b'{"result":{"id":3,"text":"xxxx') is None
    True
    """
    data = bytes(prefix[:ID_SCAN])
    pos = _ws(data, 0)
    if data[pos : pos + 1] != b"{":
        return None
    pos += 1
    rid: int | str | None = None
    while True:
        pos = _ws(data, pos)
        key = _STRING.match(data, pos)
        if key is None:
            return None
        pos = _ws(data, key.end())
        if data[pos : pos + 1] != b":":
            return None
        pos = _ws(data, pos + 1)
        name = key.group()
        if name == b'"method"':
            return None
        if name in (b'"result"', b'"error"'):
            return rid  # the value may run past the prefix: the id had to come first
        if name == b'"id"':
            value = _INT.match(data, pos) or _STRING.match(data, pos)
            if value is None:
                return None  # null, a float, or cut off: no id to fail
            try:
                got = _loads(value.group())
            except ValueError:
                return None
            rid = got if type(got) is int or type(got) is str else None
            pos = value.end()
        else:
            pos = _skip_value(data, pos)
            if pos < 0:
                return None
        pos = _ws(data, pos)
        if data[pos : pos + 1] != b",":
            return None
        pos += 1


def _ws(data: bytes, pos: int) -> int:
    m = _WS.match(data, pos)
    return m.end() if m is not None else pos


def _skip_value(data: bytes, pos: int) -> int:
    """The position after the JSON value at ``pos``, or -1 if it does not end in ``data``."""
    depth = 0
    end = len(data)
    while pos < end:
        c = data[pos]
        if c == 0x22:  # a string: skipped whole, so brackets inside it do not count
            m = _STRING.match(data, pos)
            if m is None:
                return -1
            pos = m.end()
            if depth == 0:
                return pos
            continue
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
            if depth <= 0:
                return pos + 1 if depth == 0 else -1
        elif depth == 0:
            m = _SCALAR_END.search(data, pos)
            return m.start() if m is not None else -1
        pos += 1
    return -1


class LineDecoder:
    """Split a byte stream into newline-delimited frames with bounded memory.

    ``feed`` returns the complete lines in order, without the ``b"\\n"`` and without one
    trailing ``b"\\r"`` (tolerating CRLF servers), skipping blank and whitespace-only lines.
    A line longer than ``max_frame`` bytes (after the ``\\r`` is stripped) yields exactly one
    ``FrameError("oversize", n)``, and the rest of it is dropped up to the next newline
    without being buffered: the decoder never holds more than ``max_frame + 1`` bytes (the
    ``+ 1`` is room for a ``\\r`` that may precede the newline), even for a 100 MB line.
    The verdict on each line depends only on its content, never on how it was chunked.
    """

    __slots__ = ("_buf", "_discarding", "_max")

    def __init__(self, max_frame: int) -> None:
        if type(max_frame) is not int or max_frame < 1:
            raise Error("config", "max_frame", "max_frame must be an int >= 1")
        self._max = max_frame
        self._buf = bytearray()
        self._discarding = False

    @property
    def max_frame(self) -> int:
        """The largest accepted frame, in bytes (not counting the line terminator)."""
        return self._max

    @property
    def buffered(self) -> int:
        """Bytes held for an unfinished line: never more than ``max_frame + 1``."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes | FrameError]:
        """Consume one chunk; return the frames (and oversize errors) it completed, in order."""
        if not data:
            return []
        if type(data) is not bytes:
            data = bytes(data)  # bytearray.split would yield bytearrays, not frames
        if not self._buf and not self._discarding and data.find(b"\n") == len(data) - 1:
            # One whole line and nothing held (a sequential server's answer): no split.
            line = data[:-1]
            if line.endswith(b"\r"):
                line = line[:-1]
            size = len(line)
            if size > self._max:
                return [FrameError("oversize", size, response_id(line[:ID_SCAN]))]
            return [line] if size and not line.isspace() else []
        if self._discarding:
            nl = data.find(b"\n")
            if nl < 0:
                return []  # still inside an oversize line: drop it unread
            self._discarding = False
            data = data[nl + 1 :]
        limit = self._max
        # One C-level split per chunk instead of a find() loop in Python: a chunk from a
        # pipe usually holds many small frames.
        parts = data.split(b"\n")
        tail = parts.pop()
        buf = self._buf
        if buf:
            if not parts:  # no newline: the unfinished line only grows
                return self._hold(tail, len(buf) + len(tail))
            parts[0] = bytes(buf) + parts[0]
            buf.clear()
        out: list[bytes | FrameError] = []
        append = out.append
        for line in parts:
            if line.endswith(b"\r"):
                line = line[:-1]
            size = len(line)
            if size > limit:  # size first, so a long blank line is rejected in any chunking
                append(FrameError("oversize", size, response_id(line[:ID_SCAN])))
            elif size and not line.isspace():
                append(line)
        if tail:
            out.extend(self._hold(tail, len(tail)))
        return out

    def _hold(self, tail: bytes, total: int) -> list[bytes | FrameError]:
        """Buffer the unfinished ``tail`` (``total`` bytes of its line so far) or reject it.

        The line is already too long if it has more than ``max_frame + 1`` bytes, or exactly
        ``max_frame + 1`` whose last is not the ``\\r`` a CRLF terminator would strip.
        """
        limit = self._max
        last = tail[-1] if tail else self._buf[-1]
        if total > limit + 1 or (total == limit + 1 and last != 13):  # 13 == ord("\r")
            # The line's start (buffered, or this tail) may name the request it answers.
            head = bytes(self._buf[:ID_SCAN]) + tail[:ID_SCAN]
            self._buf.clear()
            self._discarding = True
            return [FrameError("oversize", total, response_id(head))]
        self._buf += tail
        return []

    def finish(self) -> list[bytes | FrameError]:
        """End of stream: return the unterminated last line as a frame (if any) and reset.

        A server that exits after writing its last message without a newline still had
        something to say; handing it over is more useful than dropping it silently.
        """
        tail = bytes(self._buf)
        self._buf.clear()
        self._discarding = False
        if tail.endswith(b"\r"):
            tail = tail[:-1]
        if len(tail) > self._max:
            return [FrameError("oversize", len(tail), response_id(tail))]
        return [tail] if tail and not tail.isspace() else []


# -- classification ------------------------------------------------------------------------


class Response(NamedTuple):
    """A successful answer to one of our requests. ``id`` is exactly as received."""

    id: int | str | float
    result: Any


class ErrorResponse(NamedTuple):
    """A JSON-RPC error answer. ``id`` is None when the server could not tell whose it was."""

    id: int | str | float | None
    code: int
    message: str
    data: Any


class Notification(NamedTuple):
    """A server notification. ``params`` is None when the message had none."""

    method: str
    params: dict[str, Any] | None


class Request(NamedTuple):
    """A server-to-client request (legacy era only: sampling, elicitation, roots, ping).
    ``related``: the id of the client's request whose HTTP response stream carried it (None
    over stdio and on the standalone GET stream, where the wire names no relation)."""

    id: int | str | float
    method: str
    params: dict[str, Any] | None
    related: Any = None


class Invalid(NamedTuple):
    """A line that is not a usable JSON-RPC message; ``reason`` says why.

    ``id`` is the message's id when one could be read (a response with neither ``result``
    nor ``error``, say), so the connection can fail that request with a protocol error at
    once instead of letting it run into its deadline.
    """

    reason: str
    id: int | str | float | None = None


Inbound = Response | ErrorResponse | Notification | Request | Invalid

# tuple.__new__ skips the Python-level __new__ NamedTuple generates: ~170 ns instead of
# ~450 ns per message (measured with timeit on this machine).
_new = tuple.__new__
_MISSING: Final[Any] = object()


def _id_ok(value: object) -> bool:
    """MCP ``RequestId`` is ``string | number``: bool (an int subclass) and null are not.

    A float is accepted because orjson turns an integer beyond 64 bits into one; such an id
    can never match one of ours (small ints) and cannot be echoed exactly, which is the
    caller's concern, not a framing error.
    """
    t = type(value)
    return t is int or t is str or t is float


def decode(line: bytes | bytearray | memoryview | str) -> Inbound:
    """Classify one frame; never raises. One ``orjson.loads`` and a few dict lookups.

    JSON-RPC 2.0 shapes: ``method`` + ``id`` is a request, ``method`` alone a notification,
    ``result`` or ``error`` with an ``id`` a response. ``jsonrpc`` must be ``"2.0"``.
    ``params`` must be an object when present (MCP params are always objects). A JSON array
    (a batch, 2025-03-26 only) is ``Invalid("batch")``: no MCP server sends batches to
    clients, and batching was removed in 2025-06-18.
    """
    try:
        msg = _loads(line)
    except ValueError:  # orjson.JSONDecodeError, including invalid UTF-8
        return _new(Invalid, ("not_json", None))
    if type(msg) is not dict:
        return _new(Invalid, ("batch" if type(msg) is list else "not_object", None))
    get = msg.get
    mid = get("id", _MISSING)
    if get("jsonrpc") != "2.0":
        return _new(Invalid, ("bad_jsonrpc", mid if _id_ok(mid) else None))
    method = get("method", _MISSING)
    if method is _MISSING:
        result = get("result", _MISSING)
        if result is not _MISSING:
            if "error" in msg:
                return _new(Invalid, ("result_and_error", mid if _id_ok(mid) else None))
            # Our ids are ints: test that first and skip the call for the common case.
            if type(mid) is not int and not _id_ok(mid):
                return _new(Invalid, ("bad_id", None))
            return _new(Response, (mid, result))
        error = get("error", _MISSING)
        if error is not _MISSING:
            return _error_response(mid, error)
        return _new(Invalid, ("unrecognised", mid if _id_ok(mid) else None))
    if type(method) is not str:
        return _new(Invalid, ("bad_method", mid if _id_ok(mid) else None))
    params = get("params")
    if params is not None and type(params) is not dict:
        return _new(Invalid, ("bad_params", mid if _id_ok(mid) else None))
    if mid is _MISSING:
        return _new(Notification, (method, params))
    if not _id_ok(mid):
        return _new(Invalid, ("bad_id", None))
    return _new(Request, (mid, method, params, None))


def _error_response(mid: Any, error: Any) -> Inbound:
    """The error branch of :func:`decode`: ``code`` must be an int; the rest is lenient.

    A null id is allowed (JSON-RPC: the server could not read the request's id), and so is a
    foreign one like the ``"server-error"`` that mcp 1.30 sends over HTTP: the
    transport, not the id, says which request it answers there.
    """
    if mid is _MISSING or not (mid is None or _id_ok(mid)):
        return _new(Invalid, ("bad_id", None))
    if type(error) is not dict:
        return _new(Invalid, ("bad_error", mid))
    code = error.get("code")
    if type(code) is not int:
        return _new(Invalid, ("bad_error", mid))
    message = error.get("message")
    if type(message) is not str:
        message = "" if message is None else str(message)
    return _new(ErrorResponse, (mid, code, message, error.get("data")))


def error_reason(code: int) -> str:
    """The stable ``Error.reason`` for a JSON-RPC error code (``"other"`` when unnamed)."""
    return _REASONS.get(code, "other")


def server_error(resp: ErrorResponse, method: str) -> Error:
    """The ``Error("server", ...)`` a caller sees for the server's JSON-RPC error answer.

    The reason names the code (``method_not_found``, ``invalid_params``, ...). A ``-32602``
    from ``resources/read`` whose ``data`` names a ``uri`` is ``resource_not_found``:
    The 2026-07-28 spec moved "resource not found" from -32002 to -32602 (its example carries
    ``{"uri": ...}``), and the caller should see one reason for both eras. The
    server's message is kept, cut to :data:`MAX_SERVER_MESSAGE` characters; ``code`` and
    ``data`` are kept as sent (``data`` is never shown by ``repr``).
    """
    code = resp.code
    reason = _REASONS.get(code, "other")
    data = resp.data
    if (
        code == INVALID_PARAMS
        and method == "resources/read"
        and type(data) is dict
        and "uri" in data
    ):
        reason = "resource_not_found"
    message = resp.message
    if len(message) > MAX_SERVER_MESSAGE:
        message = message[: MAX_SERVER_MESSAGE - 1] + "\u2026"
    elif not message:
        message = f"{method} failed with JSON-RPC error {code}"
    return Error("server", reason, message, code=code, data=data)
