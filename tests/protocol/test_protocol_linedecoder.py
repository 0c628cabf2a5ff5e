"""protocol.jsonrpc.LineDecoder: newline framing with bounded memory (unit + properties)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conduit_mcp.errors import Error
from conduit_mcp.protocol.jsonrpc import FrameError, LineDecoder

pytestmark = pytest.mark.timeout(20)


def feed_all(decoder: LineDecoder, chunks: list[bytes]) -> list[bytes | FrameError]:
    out: list[bytes | FrameError] = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
        assert decoder.buffered <= decoder.max_frame + 1
    return out


def test_splits_lines_and_strips_cr() -> None:
    d = LineDecoder(100)
    assert d.feed(b'{"a":1}\n{"b":2}\r\n{"c"') == [b'{"a":1}', b'{"b":2}']
    assert d.buffered == 4
    assert d.feed(b":3}\n") == [b'{"c":3}']
    assert d.buffered == 0


def test_skips_blank_and_whitespace_lines() -> None:
    d = LineDecoder(100)
    assert d.feed(b"\n\r\n  \n\t\r\nx\n\n") == [b"x"]


def test_only_one_trailing_cr_is_stripped() -> None:
    assert LineDecoder(100).feed(b"a\r\r\n") == [b"a\r"]
    assert LineDecoder(100).feed(b"a\rb\n") == [b"a\rb"]


def test_cr_split_from_its_newline() -> None:
    d = LineDecoder(100)
    assert d.feed(b"abc\r") == []
    assert d.feed(b"\n") == [b"abc"]


def test_accepts_bytearray_and_memoryview_and_returns_bytes() -> None:
    d = LineDecoder(100)
    out = d.feed(bytearray(b"a\nb")) + d.feed(memoryview(b"c\n"))
    assert out == [b"a", b"bc"]
    assert all(type(x) is bytes for x in out)


def test_frame_of_exactly_max_is_accepted_even_with_crlf() -> None:
    d = LineDecoder(4)
    assert d.feed(b"1234\n1234\r\n") == [b"1234", b"1234"]
    # byte by byte: the CR may sit in the buffer as the (max + 1)th byte
    d2 = LineDecoder(4)
    assert feed_all(d2, [bytes([b]) for b in b"1234\r\n"]) == [b"1234"]


def test_oversize_line_in_one_chunk() -> None:
    d = LineDecoder(4)
    assert d.feed(b"ok\n123456789\nok2\n") == [b"ok", FrameError("oversize", 9), b"ok2"]


def test_oversize_line_across_chunks_is_discarded_unbuffered() -> None:
    d = LineDecoder(4)
    assert d.feed(b"12") == []
    assert d.feed(b"345") == [FrameError("oversize", 5)]
    assert d.buffered == 0
    assert d.feed(b"6789" * 100) == []  # still the same line: dropped, not kept
    assert d.buffered == 0
    assert d.feed(b"tail\nnext\n") == [b"next"]


def test_oversize_cr_case_rejected_when_more_bytes_follow() -> None:
    d = LineDecoder(4)
    assert d.feed(b"1234\r") == []
    assert d.feed(b"5") == [FrameError("oversize", 6)]
    assert d.feed(b"\nok\n") == [b"ok"]


def test_oversize_exactly_max_plus_one_without_cr() -> None:
    d = LineDecoder(4)
    assert d.feed(b"12345") == [FrameError("oversize", 5)]
    assert d.feed(b"\nok\n") == [b"ok"]


def test_long_whitespace_line_is_oversize_not_blank() -> None:
    assert LineDecoder(4).feed(b"          \n") == [FrameError("oversize", 10)]


def test_hundred_megabyte_line_keeps_memory_bounded() -> None:
    d = LineDecoder(64 * 1024)
    chunk = b"x" * (1024 * 1024)
    errors = []
    for _ in range(100):
        errors.extend(d.feed(chunk))
        assert d.buffered <= 64 * 1024 + 1
    assert d.feed(b"xx\n" + b'{"ok":1}\n') == [b'{"ok":1}']
    assert len(errors) == 1
    assert errors[0].reason == "oversize" and errors[0].detail > 64 * 1024


def test_finish_returns_unterminated_tail() -> None:
    d = LineDecoder(100)
    assert d.feed(b"a\nlast") == [b"a"]
    assert d.finish() == [b"last"]
    assert d.buffered == 0
    assert d.finish() == []
    d.feed(b"  \r")
    assert d.finish() == []


def test_finish_after_oversize_resets() -> None:
    d = LineDecoder(2)
    assert d.feed(b"12345") == [FrameError("oversize", 5)]
    assert d.finish() == []
    assert d.feed(b"ok\n") == [b"ok"]  # no longer discarding


def test_empty_chunk() -> None:
    assert LineDecoder(10).feed(b"") == []


def test_empty_chunk_while_a_cr_sits_at_the_limit() -> None:
    # Found by the chunking property: the buffered line's last byte decides, not the chunk's.
    d = LineDecoder(4)
    assert d.feed(b"1234\r") == []
    assert d.feed(b"") == []
    assert d.feed(b"\n") == [b"1234"]


@pytest.mark.parametrize("bad", [0, -1, 1.5, "10", None, True])
def test_max_frame_must_be_positive_int(bad: object) -> None:
    with pytest.raises(Error) as info:
        LineDecoder(bad)  # type: ignore[arg-type]
    assert (info.value.kind, info.value.reason) == ("config", "max_frame")


def test_frame_error_is_frozen_value() -> None:
    err = FrameError("oversize", 10)
    assert err == FrameError("oversize", 10)
    with pytest.raises(AttributeError):
        err.reason = "x"  # type: ignore[misc]


# -- properties --------------------------------------------------------------------------

MAX = 16

# Lines never contain b"\n"; they may contain b"\r" (also trailing), blanks, and be oversize.
line_bytes = st.binary(max_size=3 * MAX).map(lambda b: b.replace(b"\n", b"."))
lines = st.lists(
    st.one_of(
        line_bytes,
        line_bytes.map(lambda b: b + b"\r"),
        st.sampled_from([b"", b" ", b"\r", b"\t \r"]),
        st.integers(MAX - 1, MAX + 2).map(lambda n: b"y" * n),
        st.integers(MAX - 1, MAX + 2).map(lambda n: b"y" * n + b"\r"),
    ),
    max_size=20,
)


def expected_for(seq: list[bytes], max_frame: int) -> list[object]:
    """The reference model: one verdict per line, from its content alone."""
    out: list[object] = []
    for line in seq:
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > max_frame:
            out.append("oversize")
        elif line and not line.isspace():
            out.append(line)
    return out


def normalise(frames: list[bytes | FrameError], max_frame: int) -> list[object]:
    out: list[object] = []
    for f in frames:
        if isinstance(f, FrameError):
            assert f.reason == "oversize"
            assert isinstance(f.detail, int) and f.detail > max_frame
            out.append("oversize")
        else:
            assert type(f) is bytes
            out.append(f)
    return out


@st.composite
def chunked(draw: st.DrawFn) -> tuple[list[bytes], list[bytes]]:
    seq = draw(lines)
    stream = b"".join(line + b"\n" for line in seq)
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    return seq, chunks


@settings(max_examples=300, deadline=None)
@given(chunked())
def test_any_chunking_yields_the_same_frames(case: tuple[list[bytes], list[bytes]]) -> None:
    seq, chunks = case
    decoder = LineDecoder(MAX)
    got = normalise(feed_all(decoder, chunks), MAX)
    assert got == expected_for(seq, MAX)
    assert decoder.buffered == 0


@settings(max_examples=200, deadline=None)
@given(chunked())
def test_byte_by_byte_equals_all_at_once(case: tuple[list[bytes], list[bytes]]) -> None:
    _, chunks = case
    stream = b"".join(chunks)
    whole = normalise(LineDecoder(MAX).feed(stream), MAX)
    single = normalise(feed_all(LineDecoder(MAX), [bytes([b]) for b in stream]), MAX)
    assert whole == single


@settings(max_examples=100, deadline=None)
@given(
    sizes=st.lists(st.integers(MAX + 1, 50 * MAX), min_size=1, max_size=5),
    chunk=st.integers(1, 3 * MAX),
)
def test_oversize_lines_one_error_each_and_bounded(sizes: list[int], chunk: int) -> None:
    stream = b"".join(b"z" * n + b"\nok\n" for n in sizes)
    decoder = LineDecoder(MAX)
    out = feed_all(decoder, [stream[i : i + chunk] for i in range(0, len(stream), chunk)])
    assert normalise(out, MAX) == ["oversize", b"ok"] * len(sizes)


# -- an oversize response names its id --------------------------------------------------------


def response(rid: str, size: int) -> bytes:
    head = b'{"jsonrpc":"2.0","id":' + rid.encode() + b',"result":{"text":"'
    return head + b"x" * (size - len(head) - 3) + b'"}}'


@pytest.mark.parametrize("chunk", [1 << 20, 7, 1])
def test_an_oversize_response_carries_its_id_in_any_chunking(chunk: int) -> None:
    limit = 200
    fits, over = response("5", limit), response('"r-6"', limit + 1)
    assert len(fits) == limit and len(over) == limit + 1
    data = fits + b"\n" + over + b"\n" + response("7", 150) + b"\n"
    out = feed_all(LineDecoder(limit), [data[i : i + chunk] for i in range(0, len(data), chunk)])
    assert out[0] == fits  # exactly max_frame: accepted
    assert isinstance(out[1], FrameError) and out[1].id == "r-6"
    assert out[2] == response("7", 150)


def test_an_oversize_server_request_or_unknown_line_carries_no_id() -> None:
    request = b'{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"x":"'
    out = LineDecoder(100).feed(request + b"y" * 200 + b'"}}\n' + b"z" * 200 + b"\n")
    assert [(type(f), getattr(f, "id", None)) for f in out] == [(FrameError, None)] * 2


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40).filter(lambda b: b"\n" not in b), st.integers(1, 30))
def test_a_chunk_of_one_whole_line_is_decoded_as_any_other_chunking(
    line: bytes, limit: int
) -> None:
    """One whole line with nothing held (a sequential server's answer) takes a short path
    in ``feed``; its frames and verdicts are those of the line cut in two (an oversize
    line's byte count is what was seen when it was refused, so it may differ)."""
    decoder = LineDecoder(limit)
    whole = decoder.feed(line + b"\n")
    halves = [line[: len(line) // 2], line[len(line) // 2 :] + b"\n"]
    assert normalise(whole, limit) == normalise(feed_all(LineDecoder(limit), halves), limit)
    assert decoder.buffered == 0


def test_an_oversize_response_alone_in_its_chunk_carries_its_id() -> None:
    limit = 200
    over = response('"r-6"', limit + 1)
    for line in (over + b"\n", over + b"\r\n"):
        (error,) = LineDecoder(limit).feed(line)
        assert isinstance(error, FrameError) and error.id == "r-6" and error.detail == limit + 1
