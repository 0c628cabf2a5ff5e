"""protocol.sse.SseParser: the event-stream rules, limits, and chunking independence."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conduit_mcp.errors import Error
from conduit_mcp.protocol.sse import BOM, LINE_OVERHEAD, SseEvent, SseParser

pytestmark = pytest.mark.timeout(30)

BIG = 1 << 20


def parse(stream: bytes, max_event: int = BIG) -> list[SseEvent]:
    return SseParser(max_event).feed(stream)


def feed_chunks(parser: SseParser, chunks: list[bytes]) -> list[SseEvent]:
    out: list[SseEvent] = []
    for chunk in chunks:
        out.extend(parser.feed(chunk))
        assert parser.buffered <= parser.max_event + LINE_OVERHEAD
    return out


def bytewise(stream: bytes) -> list[bytes]:
    return [stream[i : i + 1] for i in range(len(stream))]


# -- the basic rules -----------------------------------------------------------------------


def test_typical_mcp_event() -> None:
    events = parse(b'event: message\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n')
    assert events == [SseEvent("message", b'{"jsonrpc":"2.0","id":1,"result":{}}', None)]
    assert type(events[0].data) is bytes


def test_event_defaults_to_message_and_resets_after_dispatch() -> None:
    assert parse(b"event: endpoint\ndata: /post\n\ndata: x\n\n") == [
        SseEvent("endpoint", b"/post", None),
        SseEvent("message", b"x", None),
    ]
    assert parse(b"event:\ndata: x\n\n") == [SseEvent("message", b"x", None)]
    assert parse(b"event: caf\xc3\xa9\ndata: x\n\n")[0].event == "café"


def test_data_lines_are_joined_with_lf() -> None:
    assert parse(b"data: a\ndata: b\ndata:\ndata: c\n\n") == [
        SseEvent("message", b"a\nb\n\nc", None)
    ]


def test_exactly_one_leading_space_is_stripped() -> None:
    assert parse(b"data:x\n\n")[0].data == b"x"
    assert parse(b"data: x\n\n")[0].data == b"x"
    assert parse(b"data:  x \n\n")[0].data == b" x "
    assert parse(b"event:  two\ndata: x\n\n")[0].event == " two"


def test_field_without_colon_has_empty_value() -> None:
    assert parse(b"data\n\n") == [SseEvent("message", b"", None)]
    assert parse(b"data\ndata\n\n") == [SseEvent("message", b"\n", None)]


def test_comments_and_unknown_fields_are_ignored() -> None:
    stream = b": keep-alive\n:\nfoo: bar\ndatax: y\ndata x\nDATA: z\ndata: ok\n\n"
    assert parse(stream) == [SseEvent("message", b"ok", None)]


def test_only_comments_dispatch_nothing() -> None:
    p = SseParser(BIG)
    assert p.feed(b": ping\n\n:\n\n\n\n") == []
    assert p.at_eof() is False


def test_event_without_data_is_not_dispatched() -> None:
    assert parse(b"event: x\n\nid: 3\n\nretry: 5\n\n") == []


def test_value_may_contain_colons() -> None:
    assert parse(b"data: a:b: c\n\n")[0].data == b"a:b: c"


# -- line endings and the BOM --------------------------------------------------------------


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending(eol: bytes) -> None:
    stream = eol.join([b"event: e", b"data: 1", b"data: 2", b"", b"data: 3", b"", b""])
    expected = [SseEvent("e", b"1\n2", None), SseEvent("message", b"3", None)]
    assert parse(stream) == expected
    assert feed_chunks(SseParser(BIG), bytewise(stream)) == expected


def test_mixed_line_endings() -> None:
    assert parse(b"data: a\r\ndata: b\rdata: c\n\r\n") == [SseEvent("message", b"a\nb\nc", None)]


def test_crlf_split_across_chunks_is_one_line_ending() -> None:
    p = SseParser(BIG)
    assert p.feed(b"data: a\r") == []
    assert p.feed(b"\n") == []  # the LF of the CRLF, not a blank line
    assert p.feed(b"\r") == [SseEvent("message", b"a", None)]
    assert p.feed(b"\ndata: b\n\n") == [SseEvent("message", b"b", None)]


def test_cr_then_cr_is_a_blank_line() -> None:
    p = SseParser(BIG)
    assert p.feed(b"data: a\r") == []
    assert p.feed(b"\rdata: b\r\r") == [
        SseEvent("message", b"a", None),
        SseEvent("message", b"b", None),
    ]


def test_bom_at_start_is_stripped_even_split() -> None:
    stream = BOM + b"data: x\n\n"
    assert parse(stream) == [SseEvent("message", b"x", None)]
    assert feed_chunks(SseParser(BIG), bytewise(stream)) == [SseEvent("message", b"x", None)]


def test_only_one_bom_is_stripped() -> None:
    # a second BOM makes the field name "\ufeffdata": an unknown field
    assert parse(BOM + BOM + b"data: x\n\ndata: y\n\n") == [SseEvent("message", b"y", None)]
    # and a BOM later in the stream is not special either
    assert parse(b"data: x\n\n" + BOM + b"data: y\n\n") == [SseEvent("message", b"x", None)]


def test_bom_prefix_that_is_not_a_bom_is_kept() -> None:
    p = SseParser(BIG)
    assert p.feed(b"\xef\xbb") == []
    assert p.feed(b"x: 1\ndata: y\n\n") == [SseEvent("message", b"y", None)]


def test_accepts_bytearray_and_memoryview() -> None:
    p = SseParser(BIG)
    out = p.feed(bytearray(b"data: a\n")) + p.feed(memoryview(b"\n"))
    assert out == [SseEvent("message", b"a", None)]
    assert type(out[0].data) is bytes


def test_empty_chunk_is_a_no_op() -> None:
    p = SseParser(BIG)
    assert p.feed(b"") == []
    assert p.feed(b"data: a\n") == []
    assert p.feed(b"") == []
    assert p.feed(b"\n") == [SseEvent("message", b"a", None)]


# -- id and retry --------------------------------------------------------------------------


def test_id_persists_across_events() -> None:
    p = SseParser(BIG)
    assert p.last_event_id is None
    events = p.feed(b"id: 1\ndata: a\n\ndata: b\n\nid: 2\ndata: c\n\n")
    assert [e.id for e in events] == ["1", "1", "2"]
    assert p.last_event_id == "2"


def test_empty_id_resets_to_empty_string() -> None:
    p = SseParser(BIG)
    events = p.feed(b"id: 1\ndata: a\n\nid\ndata: b\n\n")
    assert [e.id for e in events] == ["1", ""]
    assert p.last_event_id == ""


def test_id_with_nul_is_ignored() -> None:
    p = SseParser(BIG)
    events = p.feed(b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n")
    assert [e.id for e in events] == ["1", "1"]
    assert p.last_event_id == "1"


def test_id_without_data_still_updates_last_event_id() -> None:
    p = SseParser(BIG)
    assert p.feed(b"id: 7\n\n") == []
    assert p.last_event_id == "7"
    assert p.feed(b"data: x\n\n") == [SseEvent("message", b"x", "7")]


def test_id_of_an_unfinished_event_is_not_published() -> None:
    p = SseParser(BIG)
    p.feed(b"id: 1\ndata: a\n\nid: 2\ndata: b\n")
    assert p.last_event_id == "1"
    assert p.at_eof() is True
    assert p.last_event_id == "1"
    assert p.feed(b"data: c\n\n") == [SseEvent("message", b"c", "1")]


def test_retry_digits_only() -> None:
    p = SseParser(BIG)
    assert p.retry is None
    p.feed(b"retry: 1500\n\n")
    assert p.retry == 1500
    for bad in (
        b"retry: 1.5",
        b"retry: -1",
        b"retry: 1a",
        b"retry:",
        b"retry: \xd9\xa1",
        b"retry:  1",
    ):
        p.feed(bad + b"\n\n")
        assert p.retry == 1500, bad
    p.feed(b"retry:0\n\n")
    assert p.retry == 0


def test_huge_retry_is_ignored() -> None:
    p = SseParser(BIG)
    p.feed(b"retry: " + b"9" * 5000 + b"\n\n")
    assert p.retry is None


def test_retry_applies_even_without_dispatch() -> None:
    p = SseParser(BIG)
    p.feed(b"retry: 10\n")
    assert p.retry == 10


# -- end of stream -------------------------------------------------------------------------


def test_incomplete_event_at_eof_is_discarded() -> None:
    p = SseParser(BIG)
    assert p.feed(b"data: a\n\ndata: b\n") == [SseEvent("message", b"a", None)]
    assert p.at_eof() is True
    # the pending data is gone: a new stream starts clean
    assert p.feed(b"data: c\n\n") == [SseEvent("message", b"c", None)]


def test_at_eof_reports_an_unterminated_line() -> None:
    p = SseParser(BIG)
    p.feed(b'data: a\n\ndata: {"partial')
    assert p.at_eof() is True
    assert p.at_eof() is False  # already reset


def test_at_eof_after_complete_events_is_false() -> None:
    p = SseParser(BIG)
    p.feed(b"data: a\n\n: bye\n")
    assert p.at_eof() is False


def test_close_discards_and_keeps_id_and_retry() -> None:
    p = SseParser(BIG)
    p.feed(b"id: 4\nretry: 9\ndata: a\n\ndata: half")
    p.close()
    assert (p.last_event_id, p.retry, p.buffered) == ("4", 9, 0)
    # a fresh stream: its BOM is stripped again
    assert p.feed(BOM + b"data: b\n\n") == [SseEvent("message", b"b", "4")]


def test_cr_at_eof_does_not_leak_into_the_next_stream() -> None:
    p = SseParser(BIG)
    p.feed(b"data: a\r")
    p.close()
    assert p.feed(b"\ndata: b\n\n") == [SseEvent("message", b"b", None)]


# -- limits --------------------------------------------------------------------------------


def test_max_event_must_be_a_positive_int() -> None:
    for bad in (0, -1, 1.5, True, "10"):
        with pytest.raises(Error) as info:
            SseParser(bad)  # type: ignore[arg-type]
        assert (info.value.kind, info.value.reason) == ("config", "max_event")


@pytest.mark.parametrize("prefix", [b"data: ", b"data:"])
def test_data_exactly_at_the_limit_is_accepted(prefix: bytes) -> None:
    stream = prefix + b"x" * 10 + b"\n\n"
    assert parse(stream, 10) == [SseEvent("message", b"x" * 10, None)]
    assert feed_chunks(SseParser(10), bytewise(stream)) == [SseEvent("message", b"x" * 10, None)]


@pytest.mark.parametrize("prefix", [b"data: ", b"data:"])
def test_data_one_over_the_limit_is_rejected(prefix: bytes) -> None:
    stream = prefix + b"x" * 11 + b"\n\n"
    with pytest.raises(Error) as info:
        parse(stream, 10)
    assert (info.value.kind, info.value.reason) == ("protocol", "event_too_large")
    with pytest.raises(Error):
        feed_chunks(SseParser(10), bytewise(stream))


def test_multi_line_data_counts_the_joining_newlines() -> None:
    ok = b"data: 1234\ndata: 12345\n\n"  # 4 + 1 + 5 = 10
    assert parse(ok, 10) == [SseEvent("message", b"1234\n12345", None)]
    with pytest.raises(Error) as info:
        parse(b"data: 1234\ndata: 123456\n\n", 10)
    assert info.value.reason == "event_too_large"
    # empty data lines: only the joining newlines count
    assert parse(b"data\n" * 11 + b"\n", 10) == [SseEvent("message", b"\n" * 10, None)]
    with pytest.raises(Error):
        parse(b"data\n" * 12 + b"\n", 10)


def test_data_limit_is_per_event() -> None:
    stream = b"data: 1234567890\n\n" * 3
    assert len(parse(stream, 10)) == 3


def test_line_limit_exactly_at_and_one_over() -> None:
    limit = 10 + LINE_OVERHEAD
    at = b":" + b"c" * (limit - 1) + b"\n"
    assert parse(at + b"data: x\n\n", 10) == [SseEvent("message", b"x", None)]
    assert feed_chunks(SseParser(10), bytewise(at)) == []
    over = b":" + b"c" * limit + b"\n"
    with pytest.raises(Error) as info:
        parse(over, 10)
    assert info.value.reason == "event_too_large"
    with pytest.raises(Error):
        feed_chunks(SseParser(10), bytewise(over))


def test_oversize_partial_line_raises_at_once() -> None:
    p = SseParser(10)
    assert p.feed(b"x" * (10 + LINE_OVERHEAD)) == []
    assert p.buffered == 10 + LINE_OVERHEAD
    with pytest.raises(Error):
        p.feed(b"x")  # still no newline: rejected without waiting for one
    assert p.buffered == 0


def test_a_100_mb_line_without_newline_stays_bounded() -> None:
    p = SseParser(1 << 16)
    chunk = b"d" * (1 << 16)
    fed = 0
    with pytest.raises(Error):
        for _ in range(100 * 16):  # up to 100 MiB, 64 KiB at a time
            p.feed(chunk)
            fed += len(chunk)
            assert p.buffered <= (1 << 16) + LINE_OVERHEAD
    assert fed <= 2 * (1 << 16)  # rejected on the second chunk, not at the end
    assert p.buffered == 0


def test_oversize_in_one_big_chunk_is_rejected() -> None:
    with pytest.raises(Error):
        parse(b"data: " + b"x" * (5 << 20), 1 << 20)


def test_events_before_the_offending_line_are_in_the_error() -> None:
    with pytest.raises(Error) as info:
        parse(b"data: a\n\ndata: b\n\ndata: " + b"x" * 11 + b"\n\n", 10)
    assert info.value.data == [SseEvent("message", b"a", None), SseEvent("message", b"b", None)]
    with pytest.raises(Error) as info:
        parse(b"data: a\n\n" + b"x" * 20, 10)  # the unfinished tail is the offender
    assert info.value.data == [SseEvent("message", b"a", None)]


def test_parser_stays_broken_until_reset() -> None:
    p = SseParser(10)
    with pytest.raises(Error):
        p.feed(b"data: " + b"x" * 11 + b"\n")
    with pytest.raises(Error) as info:
        p.feed(b"data: ok\n\n")
    assert info.value.reason == "event_too_large"
    p.at_eof()
    assert p.feed(b"data: ok\n\n") == [SseEvent("message", b"ok", None)]


def test_error_message_carries_no_data() -> None:
    with pytest.raises(Error) as info:
        parse(b"data: secret-token-" + b"x" * 50 + b"\n\n", 10)
    assert "secret" not in str(info.value)
    assert "secret" not in repr(info.value)


# -- properties ----------------------------------------------------------------------------

_EOLS = st.sampled_from([b"\n", b"\r\n", b"\r"])
_LINE_TEXT = st.binary(max_size=30).filter(lambda b: b"\r" not in b and b"\n" not in b)
_NAME = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x00"), max_size=8
)


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[SseEvent], str | None, int | None]:
    """A valid stream and the events, last id and retry a correct parser must report."""
    lines: list[bytes] = []
    expected: list[SseEvent] = []
    last_id: str | None = None
    retry: int | None = None
    if draw(st.booleans()):
        lines.append(BOM)  # glued to the first line below
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):
            lines.append(b":" + draw(_LINE_TEXT))
        name = draw(st.none() | _NAME)
        if name is not None:
            lines.append(b"event: " + name.encode())
        new_id = draw(st.none() | _NAME)
        if new_id is not None:
            lines.append(b"id: " + new_id.encode())
            last_id = new_id
        if draw(st.booleans()):
            retry = draw(st.integers(0, 10**6))
            lines.append(b"retry: " + str(retry).encode())
        data = draw(st.lists(_LINE_TEXT, max_size=3))
        parsed = []
        for value in data:
            if draw(st.booleans()):
                lines.append(b"data: " + value)
                parsed.append(value)
            else:  # no space after the colon: a space of the value's own is stripped
                lines.append(b"data:" + value)
                parsed.append(value[1:] if value[:1] == b" " else value)
        lines.append(b"")  # dispatch
        if data:
            expected.append(SseEvent(name or "message", b"\n".join(parsed), last_id))
    # Join with random line endings; a BOM entry is glued to the following line.
    # After a bare CR, an empty line must not end with LF: CR + LF would be one CRLF.
    out = bytearray()
    for i, line in enumerate(lines):
        out += line
        if line is not BOM or i == len(lines) - 1:
            if not line and out[-1:] == b"\r":
                out += draw(st.sampled_from([b"\r", b"\r\n"]))
            else:
                out += draw(_EOLS)
    return bytes(out), expected, last_id, retry


def _split(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(stream) + 1) for c in cuts})
    chunks, start = [], 0
    for point in [*points, len(stream)]:
        chunks.append(stream[start:point])
        start = point
    return chunks


@settings(max_examples=300, deadline=None)
@given(streams(), st.lists(st.integers(0, 10_000), max_size=12))
def test_any_chunking_yields_the_same_events(
    case: tuple[bytes, list[SseEvent], str | None, int | None], cuts: list[int]
) -> None:
    stream, expected, last_id, retry = case
    whole = SseParser(BIG)
    assert whole.feed(stream) == expected
    assert (whole.last_event_id, whole.retry) == (last_id, retry)
    split = SseParser(BIG)
    assert feed_chunks(split, _split(stream, cuts)) == expected
    assert (split.last_event_id, split.retry) == (last_id, retry)
    assert whole.at_eof() is False
    assert split.at_eof() is False


@settings(max_examples=100, deadline=None)
@given(streams())
def test_byte_by_byte_yields_the_same_events(
    case: tuple[bytes, list[SseEvent], str | None, int | None],
) -> None:
    stream, expected, _, _ = case
    assert feed_chunks(SseParser(BIG), bytewise(stream)) == expected


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.binary(max_size=24).filter(lambda b: b"\r" not in b and b"\n" not in b), max_size=8
    ),
    st.integers(1, 40),
    st.lists(st.integers(0, 10_000), max_size=8),
)
def test_limit_verdict_does_not_depend_on_chunking(
    values: list[bytes], max_event: int, cuts: list[int]
) -> None:
    stream = b"".join(
        b"data: " + v + b"\n" + (b"\n" if i % 2 else b"") for i, v in enumerate(values)
    )

    def run(chunks: list[bytes]) -> tuple[list[SseEvent], bool]:
        p = SseParser(max_event)
        got: list[SseEvent] = []
        for chunk in chunks:
            try:
                got += p.feed(chunk)
            except Error as exc:
                return got + exc.data, True
        return got, False

    assert run([stream]) == run(_split(stream, cuts)) == run(bytewise(stream))
