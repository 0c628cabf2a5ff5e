"""The handler against real servers nobody here wrote: what they ask of the client, answered
through ``mcp.Handler`` (docs/connection.md, "Server-to-client requests").

Peers:

* npm ``@modelcontextprotocol/server-everything`` (TS SDK, handshake era only), over stdio and
  streamable HTTP: ``trigger-sampling-request`` returns the sampling result it got,
  ``trigger-elicitation-request`` (form) and ``trigger-url-elicitation`` (URL mode) report the
  user's answer, ``get-roots-list`` lists the roots it got. It registers each of these tools
  only when the client declared the matching capability, so its tool list also shows which
  capabilities the handler's methods declared.
* npm ``@modelcontextprotocol/server-filesystem`` (stdio): asks the client for its roots right
  after ``initialized`` and then serves only files under them (started without directories).
* ``peers/handler_peer.py``: the official ``mcp`` 2.3.0 server whose tools elicit, sample and list
  roots through the SDK's resolvers, in both eras: ``input_required`` rounds (2026-07-28) and
  standalone server requests (2025-11-25), over stdio and HTTP; its prompt and template
  resource run hand-made rounds (modern only).
* ``peers/handler_legacy_peer.py``: ``mcp`` 1.30.0 ``FastMCP`` (legacy only), whose tools elicit and
  sample related to the call and ask for roots outside it (over HTTP: the GET stream).
* ``peers/probe_handler_official.py`` drives the same peers with the official client, by hand, to
  tell a peer's quirk from a bug of ours.

Every test asserts what a user sees: the tool's result, the requests the handler was given.
"""

from __future__ import annotations

import asyncio
import json
import queue
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.testing.waiting import until

from ..conftest import REPO_ROOT, missing_peer
from .http_peer import HttpPeer, free_port

pytestmark = [pytest.mark.timeout(60), pytest.mark.interop]

READY_TIMEOUT = 20.0
CALL_TIMEOUT = 15.0
# Not collected by pytest (``norecursedirs`` has "peers"): scripts for a peer's own venv.
PEERS = Path(__file__).resolve().parent / "peers"
HANDLER_PEER = PEERS / "handler_peer.py"
HANDLER_LEGACY_PEER = PEERS / "handler_legacy_peer.py"
BIND_LOCALHOST = REPO_ROOT / "tests" / "peers" / "bind-localhost.cjs"
FILESYSTEM_JS = (
    REPO_ROOT
    / ".peers"
    / "node"
    / "node_modules"
    / "@modelcontextprotocol"
    / "server-filesystem"
    / "dist"
    / "index.js"
)
EVERYTHING_SERVER_INFO = ("mcp-servers/everything", "2.0.0")
CONDITIONAL_TOOLS = {
    "trigger-sampling-request",
    "trigger-elicitation-request",
    "trigger-url-elicitation",
    "get-roots-list",
}
SAMPLED = "The tide comes in twice a day."
ROOTS = [
    mcp.Root("file:///srv/projects/alpha", name="alpha"),
    mcp.Root("file:///srv/projects/beta"),
]


# -- handlers ---------------------------------------------------------------------------------


class Seen:
    """What the server asked of a handler: (method, request, context) per call, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, mcp.HandlerContext]] = []
        self.lock = threading.Lock()

    def add(self, method: str, request: Any, ctx: mcp.HandlerContext) -> None:
        with self.lock:
            self.calls.append((method, request, ctx))

    def of(self, method: str) -> list[tuple[Any, mcp.HandlerContext]]:
        with self.lock:
            return [(r, c) for m, r, c in self.calls if m == method]


def answer_elicit(request: mcp.ElicitRequest, action: str) -> mcp.ElicitResult:
    """The user's answer to a form or URL elicitation, chosen by the test (``action``)."""
    if action == "decline":
        return mcp.ElicitResult.decline()
    if action == "cancel":
        return mcp.ElicitResult.cancel()
    if request.mode == "url":
        return mcp.ElicitResult("accept")
    properties = set((request.requested_schema or {}).get("properties", {}))
    answers: dict[str, Any] = {
        "name": "Ada Lovelace",
        "nickname": "Ada Lovelace",
        "password": "Ada Lovelace",
        "email": "ada@example.org",
        "check": True,
        "integer": 7,
        "yes": True,
        "colour": "red",
        "number": 7,
    }
    return mcp.ElicitResult.accept({k: v for k, v in answers.items() if k in properties})


class SyncHandler(mcp.Handler):
    """Every method, plain ``def``; answers are fixed, the elicitation action is settable."""

    elicitation_modes = ("form", "url")

    def __init__(self) -> None:
        super().__init__()
        self.seen = Seen()
        self.action = "accept"
        self.roots: list[Any] = list(ROOTS)

    def create_message(
        self, request: mcp.SamplingRequest, ctx: mcp.HandlerContext
    ) -> mcp.SamplingResult:
        self.seen.add("create_message", request, ctx)
        return mcp.SamplingResult(SAMPLED, model="stub-model")

    def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> mcp.ElicitResult:
        self.seen.add("elicit", request, ctx)
        return answer_elicit(request, self.action)

    def list_roots(self, ctx: mcp.HandlerContext) -> list[Any]:
        self.seen.add("list_roots", None, ctx)
        return list(self.roots)


class AsyncHandler(mcp.Handler):
    """The same answers from ``async def`` methods (run on the handler's own event loop)."""

    elicitation_modes = ("form", "url")

    def __init__(self) -> None:
        super().__init__()
        self.seen = Seen()
        self.action = "accept"
        self.roots: list[Any] = list(ROOTS)

    async def create_message(
        self, request: mcp.SamplingRequest, ctx: mcp.HandlerContext
    ) -> mcp.SamplingResult:
        await asyncio.sleep(0)
        self.seen.add("create_message", request, ctx)
        return mcp.SamplingResult(SAMPLED, model="stub-model")

    async def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> mcp.ElicitResult:
        await asyncio.sleep(0)
        self.seen.add("elicit", request, ctx)
        return answer_elicit(request, self.action)

    async def list_roots(self, ctx: mcp.HandlerContext) -> list[Any]:
        await asyncio.sleep(0)
        self.seen.add("list_roots", None, ctx)
        return list(self.roots)


HANDLERS = {"sync": SyncHandler, "async": AsyncHandler}


# -- peers ------------------------------------------------------------------------------------


@pytest.fixture
def http_peers() -> Iterator[Callable[..., HttpPeer]]:
    started: list[HttpPeer] = []

    def start(argv: list[str], port: int, **kw: Any) -> HttpPeer:
        peer = HttpPeer(argv, port, **kw)
        started.append(peer)
        return peer

    yield start
    for peer in started:
        peer.kill()


@pytest.fixture
def everything(
    everything_js: Path, http_peers: Callable[..., HttpPeer]
) -> Callable[[str], mcp.Stdio | mcp.Http]:
    """``everything(transport)``: a transport spec for a fresh server-everything process.

    Over HTTP the server is bound to 127.0.0.1 and started with an empty environment (its
    ``get-env`` tool dumps the environment); over stdio the client's minimal one is used.
    """
    node = shutil.which("node") or "node"

    def spec(transport: str) -> mcp.Stdio | mcp.Http:
        if transport == "stdio":
            # Its timers keep it running after stdin closes: stopped 0.3 s later, not 2
            return mcp.Stdio(node, [str(everything_js), "stdio"], close_grace=0.3)
        port = free_port()
        peer = http_peers(
            [node, "--require", str(BIND_LOCALHOST), str(everything_js), "streamableHttp"],
            port,
            ready=["listening on port"],
            env={"PATH": "/usr/bin:/bin", "PORT": str(port)},
        )
        return mcp.Http(peer.url)

    return spec


@pytest.fixture(scope="session")
def filesystem_js() -> Path:
    """``dist/index.js`` of npm ``@modelcontextprotocol/server-filesystem`` (in .peers/node)."""
    if shutil.which("node") is None:
        missing_peer("node (for @modelcontextprotocol/server-filesystem)")
    if not FILESYSTEM_JS.exists():
        missing_peer("@modelcontextprotocol/server-filesystem (in .peers/node)")
    return FILESYSTEM_JS


@pytest.fixture
def handler_peer(
    modern_peer_cmd: list[str], http_peers: Callable[..., HttpPeer]
) -> Callable[[str], mcp.Stdio | mcp.Http]:
    """``handler_peer(transport)``: a transport spec for a fresh ``handler_peer.py`` process
    (``modern_peer_cmd`` only stands for "mcp 2.3.0 is installed")."""

    def spec(transport: str) -> mcp.Stdio | mcp.Http:
        if transport == "stdio":
            return mcp.Stdio(sys.executable, [str(HANDLER_PEER), "stdio"])
        port = free_port()
        peer = http_peers(
            [sys.executable, str(HANDLER_PEER), "http", "--port", str(port)], port, ready=[]
        )
        return mcp.Http(peer.url)

    return spec


def related_method(transport: str, era: str) -> str | None:
    """The call a server request is named as part of: known when the wire says so (a legacy
    request on the call's HTTP POST stream, a modern round); over legacy stdio it is not."""
    return None if (transport, era) == ("stdio", "legacy") else "tools/call"


def texts(result: mcp.CallToolResult) -> list[str]:
    return [block["text"] for block in result.content if block.get("type") == "text"]


# -- server-everything (legacy, stdio and HTTP) ---------------------------------------------


@pytest.mark.parametrize("style", list(HANDLERS))
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_everything_sampling_returns_our_answer(
    start_client: Callable[..., mcp.Client],
    everything: Callable[[str], Any],
    transport: str,
    style: str,
) -> None:
    handler = HANDLERS[style]()
    client = start_client(everything(transport), handler=handler, protocol="legacy")
    status = client.await_ready(timeout=READY_TIMEOUT)
    assert (status.state, status.era, status.version) == ("ready", "legacy", "2025-11-25")
    assert CONDITIONAL_TOOLS <= {t.name for t in client.list_all_tools(timeout=10)}

    result = client.call_tool(
        "trigger-sampling-request",
        {"prompt": "How often does the tide come in?", "maxTokens": 42},
        timeout=CALL_TIMEOUT,
    )
    assert result.is_error is False
    [text] = texts(result)
    prefix = "LLM sampling result: \n"
    assert text.startswith(prefix)
    assert json.loads(text[len(prefix) :]) == {
        "model": "stub-model",
        "role": "assistant",
        "stopReason": "endTurn",
        "content": {"type": "text", "text": SAMPLED},
    }

    [(request, ctx)] = handler.seen.of("create_message")
    assert request.max_tokens == 42
    assert request.system_prompt == "You are a helpful test server."
    assert request.temperature == 0.7
    assert request.messages == [
        {
            "role": "user",
            "content": {
                "type": "text",
                "text": "Resource trigger-sampling-request context: How often does the tide come in?",
            },
        }
    ]
    assert ctx.era == "legacy"
    assert ctx.related_method == related_method(transport, "legacy")
    assert ctx.server_info is not None
    assert (ctx.server_info.name, ctx.server_info.version) == EVERYTHING_SERVER_INFO
    assert not ctx.cancelled.is_set()


@pytest.mark.parametrize("style", list(HANDLERS))
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_everything_elicitation_accept_decline_cancel(
    start_client: Callable[..., mcp.Client],
    everything: Callable[[str], Any],
    transport: str,
    style: str,
) -> None:
    handler = HANDLERS[style]()
    client = start_client(everything(transport), handler=handler, protocol="legacy")
    client.await_ready(timeout=READY_TIMEOUT)

    accepted = client.call_tool("trigger-elicitation-request", {}, timeout=CALL_TIMEOUT)
    assert accepted.is_error is False
    assert texts(accepted)[:2] == [
        "✅ User provided the requested information!",
        "User inputs:\n- Name: Ada Lovelace\n- Agreed to terms: true\n"
        "- Email: ada@example.org\n- Favorite Integer: 7\n- Favorite Number: 7",
    ]
    [(request, ctx)] = handler.seen.of("elicit")
    assert request.mode == "form"
    assert request.message == "Please provide inputs for the following fields:"
    assert request.requested_schema is not None
    assert request.requested_schema["required"] == ["name"]
    assert {"name", "check", "email", "integer"} <= set(request.requested_schema["properties"])
    assert (ctx.era, ctx.related_method) == ("legacy", related_method(transport, "legacy"))

    handler.action = "decline"
    declined = client.call_tool("trigger-elicitation-request", {}, timeout=CALL_TIMEOUT)
    assert texts(declined)[0] == "❌ User declined to provide the requested information."
    assert json.loads(texts(declined)[1].split("Raw result: ", 1)[1]) == {"action": "decline"}

    handler.action = "cancel"
    cancelled = client.call_tool("trigger-elicitation-request", {}, timeout=CALL_TIMEOUT)
    assert texts(cancelled)[0] == "⚠️ User cancelled the elicitation dialog."
    assert len(handler.seen.of("elicit")) == 3


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_everything_url_elicitation(
    start_client: Callable[..., mcp.Client],
    everything: Callable[[str], Any],
    transport: str,
) -> None:
    handler = SyncHandler()
    client = start_client(everything(transport), handler=handler, protocol="legacy")
    client.await_ready(timeout=READY_TIMEOUT)

    url = "https://pay.example.org/checkout?order=17"
    result = client.call_tool(
        "trigger-url-elicitation",
        {"url": url, "message": "Pay for order 17", "elicitationId": "order-17"},
        timeout=CALL_TIMEOUT,
    )
    assert result.is_error is False
    assert texts(result)[0] == (
        f"✅ User completed the URL elicitation flow.\nElicitation ID: order-17\nURL: {url}"
    )
    [(request, _)] = handler.seen.of("elicit")
    assert (request.mode, request.url, request.elicitation_id, request.message) == (
        "url",
        url,
        "order-17",
        "Pay for order 17",
    )

    handler.action = "decline"
    result = client.call_tool(
        "trigger-url-elicitation", {"url": url, "elicitationId": "order-18"}, timeout=CALL_TIMEOUT
    )
    assert texts(result)[0] == "❌ User declined to open the URL (Elicitation ID: order-18)."


def test_everything_url_elicitation_required_error_then_retry(
    start_client: Callable[..., mcp.Client], everything: Callable[[str], Any]
) -> None:
    """The error path: the tool fails with -32042, whose data names the page to open; the
    caller sees a clear ``Error`` carrying it, and the same call retried asks the handler."""
    handler = SyncHandler()
    client = start_client(everything("stdio"), handler=handler, protocol="legacy")
    client.await_ready(timeout=READY_TIMEOUT)
    args = {"url": "https://pay.example.org/x", "errorPath": True}
    with pytest.raises(mcp.Error) as err:
        client.call_tool("trigger-url-elicitation", args, timeout=CALL_TIMEOUT)
    assert (err.value.kind, err.value.reason, err.value.code) == (
        "server",
        "url_elicitation_required",
        -32042,
    )
    [wanted] = err.value.data["elicitations"]
    assert (wanted["mode"], wanted["url"]) == ("url", "https://modelcontextprotocol.io")
    assert handler.seen.of("elicit") == []

    retried = client.call_tool("trigger-url-elicitation", args, timeout=CALL_TIMEOUT)
    assert texts(retried)[0].startswith("✅ User completed the URL elicitation flow.")
    [(request, _)] = handler.seen.of("elicit")
    assert (request.mode, request.url) == ("url", "https://pay.example.org/x")


@pytest.mark.parametrize("style", list(HANDLERS))
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_everything_lists_our_roots(
    start_client: Callable[..., mcp.Client],
    everything: Callable[[str], Any],
    transport: str,
    style: str,
) -> None:
    handler = HANDLERS[style]()
    client = start_client(everything(transport), handler=handler, protocol="legacy")
    client.await_ready(timeout=READY_TIMEOUT)

    result = client.call_tool("get-roots-list", {}, timeout=CALL_TIMEOUT)
    assert result.is_error is False
    assert texts(result)[0].startswith(
        "Current MCP Roots (2 total):\n\n"
        "1. alpha\n   URI: file:///srv/projects/alpha\n\n"
        "2. Unnamed Root\n   URI: file:///srv/projects/beta\n\n"
    )
    assert handler.seen.of("list_roots"), "the server got roots without asking the handler?"
    assert all(ctx.era == "legacy" for _, ctx in handler.seen.of("list_roots"))


class Failing(mcp.Handler):
    """``create_message`` raises; ``elicit`` never answers (until it is cancelled)."""

    def __init__(self) -> None:
        super().__init__()
        self.cut_short: queue.Queue[bool] = queue.Queue()

    def create_message(
        self, request: mcp.SamplingRequest, ctx: mcp.HandlerContext
    ) -> mcp.SamplingResult:
        raise ValueError("a private failure text")

    def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> mcp.ElicitResult:
        ctx.cancelled.wait(CALL_TIMEOUT)
        self.cut_short.put(ctx.cancelled.is_set())
        return mcp.ElicitResult.decline()


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_everything_gets_an_error_when_the_handler_raises_or_times_out(
    start_client: Callable[..., mcp.Client],
    everything: Callable[[str], Any],
    transport: str,
) -> None:
    """The server is answered a JSON-RPC error it can report (its tool result says so),
    never the exception's text; a handler past ``handler_timeout`` is cancelled; the client
    stays up."""
    handler = Failing()
    client = start_client(
        everything(transport), handler=handler, protocol="legacy", handler_timeout=0.5
    )
    client.await_ready(timeout=READY_TIMEOUT)

    raised = client.call_tool("trigger-sampling-request", {"prompt": "x"}, timeout=CALL_TIMEOUT)
    assert (raised.is_error, raised.text) == (
        True,
        "MCP error -32603: the client's handler raised ValueError on sampling/createMessage",
    )
    late = client.call_tool("trigger-elicitation-request", {}, timeout=CALL_TIMEOUT)
    assert (late.is_error, late.text) == (
        True,
        "MCP error -32603: the client's handler did not answer elicitation/create within "
        "0.5 s (handler_timeout)",
    )
    assert handler.cut_short.get(timeout=5) is True
    assert client.status().state == "ready"
    assert client.call_tool("echo", {"message": "still here"}, timeout=10).text == (
        "Echo: still here"
    )


class ElicitOnly(mcp.Handler):
    def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> mcp.ElicitResult:
        return mcp.ElicitResult.decline()


class SampleOnly(mcp.Handler):
    def create_message(
        self, request: mcp.SamplingRequest, ctx: mcp.HandlerContext
    ) -> mcp.SamplingResult:
        return mcp.SamplingResult("x", model="m")


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        (None, set()),
        (ElicitOnly(), {"trigger-elicitation-request"}),
        (SampleOnly(), {"trigger-sampling-request"}),
        (SyncHandler(), CONDITIONAL_TOOLS),
    ],
    ids=["none", "elicit-form", "sampling", "all"],
)
def test_everything_sees_the_capabilities_the_methods_declare(
    start_client: Callable[..., mcp.Client],
    everything: Callable[[str], Any],
    handler: mcp.Handler | None,
    expected: set[str],
) -> None:
    """server-everything registers a tool only for the capability it needs: its tool list
    shows what the handler's methods (and ``elicitation_modes``) declared."""
    options = {} if handler is None else {"handler": handler}
    client = start_client(everything("stdio"), protocol="legacy", **options)
    client.await_ready(timeout=READY_TIMEOUT)
    names = {t.name for t in client.list_all_tools(timeout=10)}
    assert names & CONDITIONAL_TOOLS == expected


# -- server-filesystem: roots decide what it serves ------------------------------------------


@pytest.mark.parametrize("style", ["sync", "async", "plain-uris"])
def test_filesystem_serves_only_under_our_roots(
    start_client: Callable[..., mcp.Client],
    filesystem_js: Path,
    tmp_path: Path,
    style: str,
) -> None:
    inside = tmp_path / "workspace"
    outside = tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    (inside / "notes.txt").write_text("inside the root\n")
    (outside / "private.txt").write_text("outside the root\n")

    handler = AsyncHandler() if style == "async" else SyncHandler()
    root_uri = inside.resolve().as_uri()
    handler.roots = [root_uri] if style == "plain-uris" else [mcp.Root(root_uri, name="ws")]
    node = shutil.which("node") or "node"
    # Started without directories: it serves nothing until the client's roots arrive.
    client = start_client(mcp.Stdio(node, [str(filesystem_js)]), handler=handler, protocol="auto")
    status = client.await_ready(timeout=READY_TIMEOUT)
    assert (status.era, status.version) == ("legacy", "2025-11-25")

    updated = "Updated allowed directories from MCP roots: 1 valid directories"
    until(lambda: updated in client.stderr().decode(), what=f"{updated!r} on the server's stderr")
    stderr = client.stderr().decode()
    assert "Failed to request initial roots" not in stderr, stderr
    [(_, ctx)] = handler.seen.of("list_roots")
    assert ctx.era == "legacy"
    assert ctx.related_method is None  # asked after initialized, not for a call of ours

    read = client.call_tool(
        "read_text_file", {"path": str(inside / "notes.txt")}, timeout=CALL_TIMEOUT
    )
    assert (read.is_error, texts(read)) == (False, ["inside the root\n"])

    refused = client.call_tool(
        "read_text_file", {"path": str(outside / "private.txt")}, timeout=CALL_TIMEOUT
    )
    assert refused.is_error is True
    assert texts(refused)[0].startswith("Access denied - path outside allowed directories")
    assert "outside the root" not in "".join(texts(refused))

    allowed = client.call_tool("list_allowed_directories", {}, timeout=CALL_TIMEOUT)
    assert texts(allowed) == [f"Allowed directories:\n{inside.resolve()}"]


def test_filesystem_without_roots_method_keeps_its_own_directories(
    start_client: Callable[..., mcp.Client], filesystem_js: Path, tmp_path: Path
) -> None:
    """A handler with no ``list_roots`` declares no ``roots``: the server is not asked and
    keeps the directories it was started with."""
    (tmp_path / "a.txt").write_text("from the command line\n")
    node = shutil.which("node") or "node"
    client = start_client(
        mcp.Stdio(node, [str(filesystem_js), str(tmp_path)]), handler=ElicitOnly()
    )
    client.await_ready(timeout=READY_TIMEOUT)
    read = client.call_tool("read_text_file", {"path": str(tmp_path / "a.txt")}, timeout=10)
    assert texts(read) == ["from the command line\n"]
    stderr = client.stderr().decode()
    assert "Client does not support MCP Roots" in stderr
    assert "Failed to request" not in stderr


# -- mcp 2.3.0 server whose tools elicit: both eras, stdio and HTTP -------------------------

ERAS = {"modern": ("modern", "2026-07-28"), "legacy": ("legacy", "2025-11-25")}


@pytest.mark.parametrize("style", list(HANDLERS))
@pytest.mark.parametrize("protocol", list(ERAS))
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_mcp_peer_tools_elicit_sample_and_list_roots(
    start_client: Callable[..., mcp.Client],
    handler_peer: Callable[[str], Any],
    transport: str,
    protocol: str,
    style: str,
) -> None:
    handler = HANDLERS[style]()
    client = start_client(handler_peer(transport), handler=handler, protocol=protocol)
    status = client.await_ready(timeout=READY_TIMEOUT)
    era, version = ERAS[protocol]
    assert (status.state, status.era, status.version) == ("ready", era, version)

    booked = client.call_tool("book_table", {"party": 4}, timeout=CALL_TIMEOUT)
    assert (booked.is_error, booked.text) == (
        False,
        "booked a table for 4: Ada Lovelace <ada@example.org>",
    )
    [(request, ctx)] = handler.seen.of("elicit")
    assert (request.mode, request.message) == ("form", "Who is the table for 4 for?")
    assert request.requested_schema is not None
    assert set(request.requested_schema["properties"]) == {"name", "email"}
    assert ctx.era == era
    assert ctx.related_method == related_method(transport, era)
    assert ctx.server_info == client.server_info()

    assert client.call_tool("confirm", {"question": "Go?"}, timeout=CALL_TIMEOUT).text == (
        "accepted: yes"
    )
    assert client.call_tool("two_questions", {}, timeout=CALL_TIMEOUT).text == "red 7"
    asked = sorted(r.message for r, _ in handler.seen.of("elicit"))
    assert asked == ["Go?", "Pick a colour", "Pick a number", "Who is the table for 4 for?"]

    summary = client.call_tool("summarize", {"text": "tides"}, timeout=CALL_TIMEOUT)
    assert summary.text == f"stub-model: {SAMPLED}"
    [(sampling, sctx)] = handler.seen.of("create_message")
    assert (sampling.max_tokens, sampling.system_prompt) == (64, "Be brief.")
    assert sampling.messages == [
        {"role": "user", "content": {"type": "text", "text": "Summarize: tides"}}
    ]
    assert sctx.era == era

    roots = client.call_tool("client_roots", {}, timeout=CALL_TIMEOUT)
    assert json.loads(roots.text) == [
        ["file:///srv/projects/alpha", "alpha"],
        ["file:///srv/projects/beta", None],
    ]

    handler.action = "decline"
    assert client.call_tool("confirm", {"question": "Go?"}, timeout=CALL_TIMEOUT).text == (
        "declined"
    )
    handler.action = "cancel"
    assert client.call_tool("confirm", {"question": "Go?"}, timeout=CALL_TIMEOUT).text == (
        "cancelled"
    )
    refused = client.call_tool("book_table", {"party": 2}, timeout=CALL_TIMEOUT)
    assert refused.is_error is True
    assert refused.text.endswith("could not resolve: elicitation was cancel")


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_mcp_peer_modern_round_asks_both_questions_at_once(
    start_client: Callable[..., mcp.Client], handler_peer: Callable[[str], Any], transport: str
) -> None:
    """One ``input_required`` round carries two questions: the handler gets both at the same
    time (each waits for the other at a barrier, which a one-at-a-time client never passes)."""
    both = threading.Barrier(2, timeout=10)

    class Together(SyncHandler):
        def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> mcp.ElicitResult:
            both.wait()
            return super().elicit(request, ctx)

    handler = Together()
    client = start_client(handler_peer(transport), handler=handler, protocol="modern")
    assert client.await_ready(timeout=READY_TIMEOUT).era == "modern"
    assert client.call_tool("two_questions", {}, timeout=CALL_TIMEOUT).text == "red 7"
    assert sorted(r.message for r, _ in handler.seen.of("elicit")) == [
        "Pick a colour",
        "Pick a number",
    ]


@pytest.mark.parametrize("protocol", list(ERAS))
def test_handler_context_names_the_server(
    start_client: Callable[..., mcp.Client], handler_peer: Callable[[str], Any], protocol: str
) -> None:
    """``ctx.server_info`` is the same ``mcp.ServerInfo`` the client reports."""
    handler = SyncHandler()
    client = start_client(handler_peer("stdio"), handler=handler, protocol=protocol)
    client.await_ready(timeout=READY_TIMEOUT)
    assert client.call_tool("confirm", {"question": "Go?"}, timeout=CALL_TIMEOUT).text == (
        "accepted: yes"
    )
    [(_, ctx)] = handler.seen.of("elicit")
    info = client.server_info()
    assert info is not None and (info.name, info.version) == ("conduit-handler-peer", "1.0.0")
    assert ctx.server_info == info


class DeclinesSampling(mcp.Handler):
    """Elicits, refuses to sample (the user said no), and has no roots."""

    def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> mcp.ElicitResult:
        return mcp.ElicitResult.accept({"yes": True})

    def create_message(
        self, request: mcp.SamplingRequest, ctx: mcp.HandlerContext
    ) -> mcp.SamplingResult:
        raise mcp.Declined()


@pytest.mark.parametrize("protocol", list(ERAS))
def test_mcp_peer_declined_sampling_and_undeclared_roots_fail_the_call(
    start_client: Callable[..., mcp.Client], handler_peer: Callable[[str], Any], protocol: str
) -> None:
    """A ``create_message`` that raises ``mcp.Declined`` fails the call (modern: the client's
    own ``handler``/``declined`` error; legacy: the server relays the -1 it was answered), and
    a handler without ``list_roots`` declares no roots, which the server refuses (-32021)."""
    client = start_client(handler_peer("stdio"), handler=DeclinesSampling(), protocol=protocol)
    client.await_ready(timeout=READY_TIMEOUT)
    assert client.call_tool("confirm", {"question": "Go?"}, timeout=CALL_TIMEOUT).text == (
        "accepted: yes"
    )

    with pytest.raises(mcp.Error) as declined:
        client.call_tool("summarize", {"text": "tides"}, timeout=CALL_TIMEOUT)
    if protocol == "modern":
        assert (declined.value.kind, declined.value.reason) == ("handler", "declined")
    else:
        assert (declined.value.kind, declined.value.code) == ("server", -1)
        assert "User rejected sampling request" in str(declined.value)

    with pytest.raises(mcp.Error) as no_roots:
        client.call_tool("client_roots", {}, timeout=CALL_TIMEOUT)
    assert (no_roots.value.kind, no_roots.value.reason, no_roots.value.code) == (
        "server",
        "missing_client_capability",
        -32021,
    )
    assert "roots" in str(no_roots.value)
    # The client is still fine.
    assert client.call_tool("confirm", {"question": "Go?"}, timeout=CALL_TIMEOUT).text == (
        "accepted: yes"
    )


class SlowHuman(SyncHandler):
    """Takes ``think`` seconds to answer (a person reading the question)."""

    think = 3.0

    def __init__(self) -> None:
        super().__init__()
        self.cut_short: queue.Queue[bool] = queue.Queue()

    def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> mcp.ElicitResult:
        ctx.cancelled.wait(self.think)  # returns early only if the wait is cut short
        self.cut_short.put(ctx.cancelled.is_set())
        return super().elicit(request, ctx)


@pytest.mark.parametrize("protocol", list(ERAS))
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_mcp_peer_call_deadline_pauses_while_the_user_answers(
    start_client: Callable[..., mcp.Client],
    handler_peer: Callable[[str], Any],
    transport: str,
    protocol: str,
) -> None:
    """A call with a 2 s timeout whose server asks the user, who takes 3 s, still succeeds:
    the deadline is paused while the handler works."""
    handler = SlowHuman()
    client = start_client(handler_peer(transport), handler=handler, protocol=protocol)
    client.await_ready(timeout=READY_TIMEOUT)

    started = time.monotonic()
    booked = client.call_tool("book_table", {"party": 3}, timeout=2.0)
    assert booked.text == "booked a table for 3: Ada Lovelace <ada@example.org>"
    assert time.monotonic() - started >= SlowHuman.think
    assert handler.cut_short.get(timeout=5) is False


@pytest.mark.parametrize(
    ("transport", "protocol"),
    [
        ("stdio", "legacy"),
        ("stdio", "modern"),
        ("http", "legacy"),
        ("http", "modern"),
    ],
)
def test_mcp_peer_max_total_timeout_ends_the_call_and_the_question(
    start_client: Callable[..., mcp.Client],
    handler_peer: Callable[[str], Any],
    transport: str,
    protocol: str,
) -> None:
    """``max_total_timeout`` bounds the paused call; when it ends the call, the question the
    user is still reading is withdrawn too (``ctx.cancelled`` is set): modern by the client
    itself, legacy by the server's ``notifications/cancelled`` once it cancels the tool."""
    handler = SlowHuman()
    client = start_client(handler_peer(transport), handler=handler, protocol=protocol)
    client.await_ready(timeout=READY_TIMEOUT)

    with pytest.raises(mcp.Error) as err:
        client.call_tool("book_table", {"party": 5}, timeout=2.0, max_total_timeout=2.5)
    assert (err.value.kind, err.value.reason) == ("timeout", "max_total_timeout")
    assert handler.cut_short.get(timeout=5) is True


class Listener(SyncHandler):
    """Records server logs and notifications, in order, as they reach the handler."""

    def __init__(self) -> None:
        super().__init__()
        self.logs: queue.Queue[tuple[str, Any, str | None]] = queue.Queue()
        self.notes: queue.Queue[str] = queue.Queue()

    def handle_log(
        self, level: str, data: object, logger: str | None, ctx: mcp.HandlerContext
    ) -> None:
        self.logs.put((level, data, logger))

    def handle_notification(
        self, method: str, params: dict[str, Any] | None, ctx: mcp.HandlerContext
    ) -> None:
        self.notes.put(method)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_everything_logs_and_notifications_reach_the_handler(
    start_client: Callable[..., mcp.Client],
    everything: Callable[[str], Any],
    transport: str,
) -> None:
    """server-everything logs "Roots updated" once our roots reached it (over HTTP on the
    GET stream): ``handle_log`` gets it. Over stdio its ``tools/list_changed`` (it registers
    tools by the client's capabilities around ``initialized``; how many it sends varies)
    reach ``handle_notification``."""
    handler = Listener()
    client = start_client(everything(transport), handler=handler, protocol="legacy")
    client.await_ready(timeout=READY_TIMEOUT)
    level, data, logger = handler.logs.get(timeout=10)
    assert (level, data, logger) == (
        "info",
        "Roots updated: 2 root(s) received from client",
        "everything-server",
    )
    if transport == "stdio":
        assert handler.notes.get(timeout=10) == "notifications/tools/list_changed"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_mcp_peer_prompt_and_resource_rounds(
    start_client: Callable[..., mcp.Client], handler_peer: Callable[[str], Any], transport: str
) -> None:
    """Modern rounds on ``prompts/get`` and ``resources/read`` (the peer's prompt and template
    resource return ``input_required`` themselves and read the answer on the retry, which
    must echo their ``requestState``)."""
    handler = SyncHandler()
    client = start_client(handler_peer(transport), handler=handler, protocol="modern")
    assert client.await_ready(timeout=READY_TIMEOUT).era == "modern"

    prompt = client.get_prompt("welcome", {"guest": "Ada"}, timeout=CALL_TIMEOUT)
    [message] = prompt.messages
    assert message["content"]["text"] == "Welcome Ada, alias Ada Lovelace (state welcome:Ada)"

    read = client.read_resource("peer://secret/diary", timeout=CALL_TIMEOUT)
    [content] = read.contents
    assert (content["uri"], content["text"]) == (
        "peer://secret/diary",
        "diary unlocked with Ada Lovelace",
    )
    asked = [(r.message, ctx.related_method) for r, ctx in handler.seen.of("elicit")]
    assert asked == [
        ("Nickname for Ada?", "prompts/get"),
        ("Password for diary?", "resources/read"),
    ]


# -- mcp 1.30.0 FastMCP (legacy only): ctx.elicit, session.create_message, list_roots --------


@pytest.fixture
def legacy_handler_peer(
    legacy_python: Path, http_peers: Callable[..., HttpPeer]
) -> Callable[[str], mcp.Stdio | mcp.Http]:
    """``legacy_handler_peer(transport)``: a fresh ``handler_legacy_peer.py`` (mcp 1.30.0)."""
    script = str(HANDLER_LEGACY_PEER)

    def spec(transport: str) -> mcp.Stdio | mcp.Http:
        if transport == "stdio":
            return mcp.Stdio(str(legacy_python), [script, "stdio"])
        port = free_port()
        peer = http_peers([str(legacy_python), script, "http", "--port", str(port)], port, ready=[])
        return mcp.Http(peer.url)

    return spec


@pytest.mark.parametrize("style", list(HANDLERS))
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_legacy_sdk_peer_asks_in_the_call_and_outside_it(
    start_client: Callable[..., mcp.Client],
    legacy_handler_peer: Callable[[str], Any],
    transport: str,
    style: str,
) -> None:
    """mcp 1.30.0 sends its elicitation and sampling requests related to the call (over HTTP
    on the call's POST stream) and its ``roots/list`` unrelated (over HTTP on the GET
    stream); ``auto`` falls back to the handshake."""
    handler = HANDLERS[style]()
    client = start_client(legacy_handler_peer(transport), handler=handler, protocol="auto")
    status = client.await_ready(timeout=READY_TIMEOUT)
    assert (status.era, status.version, status.origin) == ("legacy", "2025-11-25", "probe")

    assert client.call_tool("ask_name", {}, timeout=CALL_TIMEOUT).text == "hello Ada Lovelace"
    assert client.call_tool("sample", {"prompt": "hi"}, timeout=CALL_TIMEOUT).text == (
        f"stub-model: {SAMPLED}"
    )
    assert json.loads(client.call_tool("roots", {}, timeout=CALL_TIMEOUT).text) == [
        ["file:///srv/projects/alpha", "alpha"],
        ["file:///srv/projects/beta", None],
    ]
    handler.action = "decline"
    assert client.call_tool("ask_name", {}, timeout=CALL_TIMEOUT).text == "declined"

    [(_, elicit_ctx), _] = handler.seen.of("elicit")
    [(_, sample_ctx)] = handler.seen.of("create_message")
    [(_, roots_ctx)] = handler.seen.of("list_roots")
    assert elicit_ctx.related_method == related_method(transport, "legacy")
    assert sample_ctx.related_method == related_method(transport, "legacy")
    assert roots_ctx.related_method is None


class ToolUser(SyncHandler):
    """A model that answers by calling the tool it was offered."""

    def create_message(
        self, request: mcp.SamplingRequest, ctx: mcp.HandlerContext
    ) -> mcp.SamplingResult:
        self.seen.add("create_message", request, ctx)
        [tool] = request.tools or [{}]
        call = {"type": "tool_use", "id": "t1", "name": tool.get("name"), "input": {"city": "Oslo"}}
        return mcp.SamplingResult(content=[call], model="stub-model", stop_reason="toolUse")


@pytest.mark.parametrize("protocol", list(ERAS))
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_mcp_peer_sampling_with_tools(
    start_client: Callable[..., mcp.Client],
    handler_peer: Callable[[str], Any],
    transport: str,
    protocol: str,
) -> None:
    """``capabilities={"sampling": {"tools": {}}}`` declares sampling with tools: the peer
    offers its tool and takes the model's ``tool_use`` answer; without it the peer refuses
    the call (-32021, naming ``sampling.tools``)."""
    handler = ToolUser()
    client = start_client(
        handler_peer(transport),
        handler=handler,
        protocol=protocol,
        capabilities={"sampling": {"tools": {}}},
    )
    client.await_ready(timeout=READY_TIMEOUT)
    planned = client.call_tool("plan_trip", {"city": "Oslo"}, timeout=CALL_TIMEOUT)
    assert (planned.is_error, planned.text) == (False, 'toolUse: get_weather({"city": "Oslo"})')
    [(request, _)] = handler.seen.of("create_message")
    assert [t["name"] for t in request.tools or []] == ["get_weather"]
    assert request.tool_choice == {"mode": "auto"}
    assert request.messages == [
        {"role": "user", "content": {"type": "text", "text": "Trip to Oslo?"}}
    ]

    plain = start_client(handler_peer(transport), handler=ToolUser(), protocol=protocol)
    plain.await_ready(timeout=READY_TIMEOUT)
    with pytest.raises(mcp.Error) as err:
        plain.call_tool("plan_trip", {"city": "Oslo"}, timeout=CALL_TIMEOUT)
    assert (err.value.reason, err.value.code) == ("missing_client_capability", -32021)
    assert "sampling.tools" in str(err.value)
