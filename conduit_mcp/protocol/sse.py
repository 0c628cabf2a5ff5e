"""Server-Sent Events parsing for the HTTP transport: bytes in, events out, bounded memory.

A Streamable HTTP server may answer a POST with ``text/event-stream`` (MCP spec,
Transports, "Streamable HTTP"), and the listen and legacy GET streams are SSE too. The
format is small enough to parse here (measured with aiohttp 3.14): aiohttp's ``readline``
splits only on LF, caps lines at 512 KiB with an exception that is not a ``ClientError``, and the third-party SSE clients bring reconnect loops
that would fight the connection actor. :class:`SseParser` follows the WHATWG "event stream
interpretation" rules, restricted to what a client needs:

* a blank line dispatches the event; a line starting with ``:`` is a comment (keep-alive);
* ``field: value`` strips ONE leading space from the value; a line without ``:`` is a field
  with an empty value; unknown fields are ignored;
* ``data`` lines are joined with ``b"\\n"``; an event without any ``data`` line is not
  dispatched (its ``id`` still updates :attr:`SseParser.last_event_id`);
* ``event`` defaults to ``"message"``; an ``id`` containing NUL is ignored;
  ``retry`` is milliseconds, ASCII digits only, otherwise ignored;
* LF, CRLF and bare CR all end a line, even when a CRLF is split across two chunks;
* one UTF-8 BOM at the start of the stream is dropped;
* an incomplete event at the end of the stream is discarded (:meth:`SseParser.at_eof`).

Data stays ``bytes``: the connection hands it to ``orjson.loads`` directly, so the UTF-8 is
validated once, by orjson, without a ``str`` round trip.

Speed: a typical MCP event is ``event: message\\ndata: {...}\\n\\n``. Each chunk is split into
lines by one C-level ``bytes.split`` (after at most two ``replace`` calls when it holds a CR),
and each line costs a couple of ``startswith`` checks; no Python loop runs per byte.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from ..errors import Error

#: The UTF-8 byte order mark, dropped once at the start of a stream.
BOM: Final = b"\xef\xbb\xbf"
#: Room, beyond ``max_event``, that one line may take for its field name: ``b"data: "``.
LINE_OVERHEAD: Final = len(b"data: ")

_DATA: Final = b"data"
_DEFAULT_EVENT: Final = "message"
# The decoded event types MCP servers send, so the common case skips a decode.
_KNOWN_TYPES: Final = {b"message": "message", b"endpoint": "endpoint", b"": ""}


class SseEvent(NamedTuple):
    """One dispatched event.

    ``data`` is the event's data lines joined with ``b"\\n"``; ``id`` is the stream's last
    event id when the event was dispatched (it persists across events, per the SSE rules),
    or None when the server never sent one.
    """

    event: str
    data: bytes
    id: str | None


# tuple.__new__ skips the Python-level __new__ that NamedTuple generates (see jsonrpc.py).
_new = tuple.__new__


class SseParser:
    """Incremental SSE parser: :meth:`feed` chunks split anywhere, get whole events back.

    >>> p = SseParser(max_event=1 << 20)
    >>> p.feed(b'event: message\\ndata: {"a":')
    []
    >>> p.feed(b'1}\\nid: 7\\n\\n: keep-alive\\n\\n')
    [SseEvent(event='message', data=b'{"a":1}', id='7')]
    >>> p.last_event_id
    '7'

    Limits: an event whose data (the joined ``data`` values) is longer than ``max_event``
    bytes, or a single line longer than ``max_event + LINE_OVERHEAD`` bytes (the overhead is
    room for the ``data:`` field name, so that a one-line event of exactly ``max_event`` bytes
    of data fits), raises ``Error("protocol", "event_too_large")`` as soon as it is seen. The
    unfinished line is never buffered past that bound, so memory stays bounded even for a
    100 MB line without a newline. The events the same chunk completed before the offending
    line are not lost: they are the error's ``data`` (a list of :class:`SseEvent`), so a
    caller sees the same events whatever the chunking. After that error the parser is
    broken: further :meth:`feed` calls raise it again until :meth:`at_eof` or :meth:`close`.

    ``last_event_id`` and ``retry`` survive :meth:`at_eof`, so a legacy-era reconnect
    (``Last-Event-ID``) can keep feeding the same parser.
    """

    __slots__ = (
        "_max",
        "_line_max",
        "_buf",
        "_skip_lf",
        "_start",
        "_failed",
        "_data",
        "_size",
        "_type",
        "_id",
        "_pending",
        "last_event_id",
        "retry",
    )

    def __init__(self, max_event: int) -> None:
        if type(max_event) is not int or max_event < 1:
            raise Error("config", "max_event", "max_event must be an int >= 1")
        self._max = max_event
        self._line_max = max_event + LINE_OVERHEAD
        self._buf = bytearray()  # the unfinished line: never holds a CR or an LF
        self._skip_lf = False  # the last chunk ended with CR: drop an LF that starts the next
        self._start = True  # no byte seen yet: a BOM may still come (the buffer holds its prefix)
        self._failed = False
        self._data: list[bytes] = []
        self._size = 0  # len(b"\n".join(self._data))
        self._type = b""
        self._id: str | None = None  # the "last event ID buffer": set by id, used at dispatch
        self._pending = False  # a field line was seen since the last blank line
        #: The id of the last dispatched event (persists; an ``id`` with NUL is ignored).
        self.last_event_id: str | None = None
        #: The server's reconnection time in milliseconds, or None until it sends one.
        self.retry: int | None = None

    @property
    def max_event(self) -> int:
        """The largest accepted event data, in bytes."""
        return self._max

    @property
    def buffered(self) -> int:
        """Bytes held for an unfinished line: never more than ``max_event + LINE_OVERHEAD``."""
        return len(self._buf)

    def feed(self, chunk: bytes | bytearray | memoryview) -> list[SseEvent]:
        """Consume one chunk; return the events it completed, in order.

        Raises ``Error("protocol", "event_too_large")`` when a line or an event's data goes
        over the limit (see the class docstring; ``error.data`` holds the events this chunk
        completed before the offending line).
        """
        if self._failed:
            raise self._too_large("the stream already broke the event size limit", [])
        if not chunk:
            return []
        if type(chunk) is not bytes:
            chunk = bytes(chunk)  # bytearray.split would yield bytearrays
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == 10:  # the LF of a CRLF split across chunks
                chunk = chunk[1:]
                if not chunk:
                    return []
        if self._start:
            chunk = self._strip_bom(chunk)
            if not chunk:
                return []
        if b"\r" in chunk:
            # A CR at the very end already ends its line; remember to drop the LF that may
            # follow it in the next chunk.
            self._skip_lf = chunk[-1] == 13
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = chunk.split(b"\n")
        tail = lines.pop()
        buf = self._buf
        if buf:
            if not lines:  # no line ended: the unfinished one only grows
                if len(buf) + len(tail) > self._line_max:
                    raise self._too_large("a line is longer than the limit", [])
                buf += tail
                return []
            lines[0] = bytes(buf) + lines[0]
            buf.clear()
        out: list[SseEvent] = []
        line_max = self._line_max
        for line in lines:
            if not line:
                if self._pending:
                    self._dispatch(out)
                continue
            if len(line) > line_max:
                raise self._too_large("a line is longer than the limit", out)
            if line[0] == 58:  # b":": a comment, typically a keep-alive
                continue
            self._pending = True
            if line.startswith(_DATA):
                # The fast path: "data: ..." and "data:..." (a longer name, like "datax",
                # is an unknown field and falls through to the general case).
                if line.startswith(b"data: "):
                    self._add_data(line[6:], out)
                    continue
                if len(line) == 4 or line[4] == 58:
                    self._add_data(line[5:], out)
                    continue
            self._field(line)
        if tail:
            if len(tail) > line_max:
                raise self._too_large("a line is longer than the limit", out)
            buf += tail
        return out

    def at_eof(self) -> bool:
        """End of stream: discard an incomplete event; return whether there was one.

        An event is incomplete when the stream ended inside a line or after field lines not
        yet followed by a blank line; per the SSE rules it is never dispatched. True tells
        the caller the stream broke off mid-event. The parser is then ready for a new stream
        (a BOM is stripped again); ``last_event_id`` and ``retry`` are kept.
        """
        pending = self._pending or (bool(self._buf) and not self._start)
        self._reset()
        return pending

    def close(self) -> None:
        """End of stream, when the caller does not care: :meth:`at_eof` without the answer."""
        self._reset()

    # -- internals ---------------------------------------------------------------------------

    def _reset(self) -> None:
        self._buf.clear()
        self._skip_lf = False
        self._start = True
        self._failed = False
        self._data = []
        self._size = 0
        self._type = b""
        self._id = self.last_event_id  # an id of the discarded event does not carry over
        self._pending = False

    def _strip_bom(self, chunk: bytes) -> bytes:
        """Drop a BOM at the start of the stream, even one split across chunks."""
        buf = self._buf
        if buf:  # a BOM prefix held from the previous chunk(s)
            chunk = bytes(buf) + chunk
            buf.clear()
        if len(chunk) < 3 and BOM.startswith(chunk):
            buf += chunk  # could still become a BOM: wait for more
            return b""
        self._start = False
        return chunk[3:] if chunk.startswith(BOM) else chunk

    def _add_data(self, value: bytes, out: list[SseEvent]) -> None:
        data = self._data
        size = self._size + len(value) + (1 if data else 0)
        if size > self._max:
            raise self._too_large("an event's data is longer than the limit", out)
        data.append(value)
        self._size = size

    def _field(self, line: bytes) -> None:
        """The fields other than ``data``: ``event``, ``id`` and ``retry``; others are ignored."""
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"event":
            self._type = value
        elif name == b"id":
            if b"\0" not in value:
                self._id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():  # bytes.isdigit: ASCII digits only
            try:
                self.retry = int(value)
            except ValueError:  # beyond int's 4300-digit str conversion limit
                pass
        # "data" never gets here: feed's fast path takes every data line.

    def _dispatch(self, out: list[SseEvent]) -> None:
        """A blank line: publish the id, then the event if it has data, and start anew."""
        self._pending = False
        self.last_event_id = self._id
        data = self._data
        if data:
            raw = data[0] if len(data) == 1 else b"\n".join(data)
            kind = self._type
            name = _KNOWN_TYPES.get(kind)
            if name is None:
                name = kind.decode("utf-8", "replace")
            out.append(_new(SseEvent, (name or _DEFAULT_EVENT, raw, self._id)))
            self._data = []
            self._size = 0
        self._type = b""

    def _too_large(self, what: str, completed: list[SseEvent]) -> Error:
        """Drop everything buffered, mark the parser broken, and build the error to raise."""
        self._buf.clear()
        self._data = []
        self._size = 0
        self._failed = True
        return Error(
            "protocol",
            "event_too_large",
            f"SSE stream rejected: {what} ({self._max} bytes of event data)",
            data=completed,
        )
