"""No secret the handler sees or makes reaches a log, a repr, a span or a crash report
(docs/secrets.md).

The secrets: what the server asks (an elicitation's message and schema, the text it wants
sampled, a log notification's data) and what the handler answers (a user's answer, sampled
text, a root). Each scenario plants them, drives the paths that log and fail (a handler that
raises, one that hangs past ``handler_timeout``, the handler actor and the connection crashing
while a method holds the secret), then searches everything captured. The scripted server's
``client_request`` tool asks the client once: a server request (legacy) or one
``input_required`` round (modern), and returns the answer it got, which proves the secret did
travel.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import conduit_mcp as mcp
from conduit_mcp.actors.events import (
    HandlerNotification,
    Serve,
    ServeContext,
    Served,
    ServeError,
    Unserve,
)

pytestmark = pytest.mark.timeout(60)

ASKED = "sk-asked-4d1c9e7a"  # in the server's request params
ANSWER = "pw-answer-8b2f6e31"  # a user's elicitation answer
SAMPLED = "llm-sampled-c0ffee42"  # the model's text
ROOT = "root-path-5e6d7c8b"  # a root's URI
LOGGED = "log-data-9a8b7c6d"  # a server log notification's data
SECRETS = (ASKED, ANSWER, SAMPLED, ROOT, LOGGED)


class _Capture(logging.Handler):
    """Every record at DEBUG and up, formatted with its traceback (crash reports included)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.texts: list[str] = []  # emit runs under the Handler's own lock
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

        # The server's own log messages (conduit_mcp.server.<client>): its words, logged by
        # design (docs/secrets.md), kept apart and checked on their own.
        self.server_logs: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = self.format(record)
        text += f" args={record.args!r} extra={record.__dict__!r}"
        if record.name.startswith("conduit_mcp.server."):
            self.server_logs.append(text)
        else:
            self.texts.append(text)


@pytest.fixture
def captured() -> Iterator[_Capture]:
    handler = _Capture()
    root = logging.getLogger()
    package = logging.getLogger("conduit_mcp")
    old = (root.level, package.level)
    root.setLevel(logging.DEBUG)
    package.setLevel(logging.DEBUG)
    root.addHandler(handler)
    yield handler
    root.removeHandler(handler)
    root.setLevel(old[0])
    package.setLevel(old[1])


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def span_texts(span: ReadableSpan) -> list[str]:
    texts = [span.name, str(span.status.description), span.to_json()]
    for key, value in (span.attributes or {}).items():
        texts += [key, repr(value)]
    for event in span.events:
        texts += [event.name, repr(dict(event.attributes or {}))]
    return texts


class SecretHandler(mcp.Handler):
    """Answers with the planted secrets; ``"raise"`` in a message makes it raise, ``"hang"``
    makes it block (holding the request) until ``release`` is set or it is cancelled."""

    def __init__(self) -> None:
        super().__init__()
        self.holding = threading.Event()
        self.release = threading.Event()
        self.contexts: list[mcp.HandlerContext] = []
        self.requests: list[Any] = []
        self.logs: list[Any] = []

    def _maybe_fail(self, text: str, ctx: mcp.HandlerContext) -> None:
        if "raise" in text:
            raise RuntimeError("the handler failed")  # its locals hold the secret
        if "hang" in text:
            self.holding.set()
            while not (self.release.is_set() or ctx.cancelled.is_set()):
                ctx.cancelled.wait(0.02)

    def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> mcp.ElicitResult:
        self.contexts.append(ctx)
        self.requests.append(request)
        self._maybe_fail(request.message, ctx)
        if request.mode == "url":
            return mcp.ElicitResult.accept()
        return mcp.ElicitResult.accept({"password": ANSWER})

    def create_message(
        self, request: mcp.SamplingRequest, ctx: mcp.HandlerContext
    ) -> mcp.SamplingResult:
        self.contexts.append(ctx)
        self.requests.append(request)
        self._maybe_fail(str(request.system_prompt), ctx)
        return mcp.SamplingResult(SAMPLED, model="stub-model")

    def list_roots(self, ctx: mcp.HandlerContext) -> list[mcp.Root]:
        self.contexts.append(ctx)
        return [mcp.Root(f"file:///home/{ROOT}", name="home")]

    def handle_log(
        self, level: str, data: object, logger: str | None, ctx: mcp.HandlerContext
    ) -> None:
        self.logs.append(data)


def elicit_params(tag: str = "") -> dict[str, Any]:
    return {
        "mode": "form",
        "message": f"{tag} Enter the vault password for {ASKED}",
        "requestedSchema": {
            "type": "object",
            "properties": {"password": {"type": "string", "description": ASKED}},
        },
        "_meta": {"token": ASKED},
    }


def sampling_params(tag: str = "") -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": {"type": "text", "text": f"Repeat {ASKED}"}}],
        "systemPrompt": f"{tag} {ASKED}",
        "maxTokens": 10,
        "metadata": {"key": ASKED},
    }


class _Boom:
    """A message the patched handler actor crashes on (fault injection)."""


def crash_handler_actor(client: mcp.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Crash the live handler actor (its supervisor logs a crash report, then restarts it)."""
    ref = client._runtime().registry.get("handler")
    assert ref is not None, "no handler actor in the client's tree"
    cls = ref.actor_class
    original = cls.receive

    def receive(self: Any, message: Any) -> Any:
        if isinstance(message, _Boom):
            raise RuntimeError("injected handler crash")
        return original(self, message)

    monkeypatch.setattr(cls, "receive", receive)
    ref.tell(_Boom())


def record_handler_messages(
    client: mcp.Client, monkeypatch: pytest.MonkeyPatch, into: list[str]
) -> None:
    """Record the repr of every message the handler actor receives (what a crash report or a
    debug log of it would show)."""
    ref = client._runtime().registry.get("handler")
    assert ref is not None, "no handler actor in the client's tree"
    cls = ref.actor_class
    original = cls.receive

    def receive(self: Any, message: Any) -> Any:
        into.append(repr(message))
        return original(self, message)

    monkeypatch.setattr(cls, "receive", receive)


def drive(
    client: mcp.Client,
    handler: SecretHandler,
    monkeypatch: pytest.MonkeyPatch,
    crashable: Callable[[], Any],
    era: str,
) -> tuple[list[str], list[BaseException]]:
    """Every path, in order; returns the texts to search and the errors raised."""
    texts: list[str] = []
    errors: list[BaseException] = []
    record_handler_messages(client, monkeypatch, texts)

    def call(params: dict[str, Any], method: str, **kw: Any) -> mcp.CallToolResult | None:
        try:
            return client.call_tool("client_request", {"method": method, "params": params}, **kw)
        except mcp.Error as exc:
            errors.append(exc)
            return None

    # The answers reach the server: the traffic carries the secrets.
    answered = call(elicit_params(), "elicitation/create", timeout=10)
    assert answered is not None and ANSWER in answered.text
    sampled = call(sampling_params(), "sampling/createMessage", timeout=10)
    assert sampled is not None and SAMPLED in sampled.text
    rooted = call({"_meta": {"token": ASKED}}, "roots/list", timeout=10)
    assert rooted is not None and ROOT in rooted.text
    if era == "legacy":
        client.call_tool("log", {"level": "error", "data": {"token": LOGGED}}, timeout=10)

    # The handler raises; the handler hangs past handler_timeout (0.5 s).
    for params, method in (
        (elicit_params("raise"), "elicitation/create"),
        (sampling_params("raise"), "sampling/createMessage"),
        (elicit_params("hang"), "elicitation/create"),
    ):
        result = call(params, method, timeout=10)
        if result is not None:
            texts.append(repr(result))  # an error answer the server echoed back
            for secret in (ANSWER, SAMPLED):
                assert secret not in result.text

    # The handler actor crashes while a method holds the secret.
    handler.holding.clear()
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(call, elicit_params("hang"), "elicitation/create", timeout=5)
        assert handler.holding.wait(10), "the handler never got the request"
        crash_handler_actor(client, monkeypatch)
        handler.release.set()
        pending.result(timeout=15)
    handler.release.clear()
    client.await_ready(timeout=10)

    # The connection crashes while a method holds the secret.
    handler.holding.clear()
    runtime = client._runtime()
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(call, sampling_params("hang"), "sampling/createMessage", timeout=10)
        assert handler.holding.wait(10), "the handler never got the request"
        conn = runtime.registry.get("connection")
        texts.append(repr(conn))
        conn.tell(crashable())
        pending.result(timeout=15)
        handler.release.set()
    client.await_ready(timeout=10)

    texts += [repr(client), str(client), repr(client.status()), repr(runtime.config)]
    texts += [repr(ctx) for ctx in handler.contexts]
    return texts, errors


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_no_handler_secret_in_logs_reprs_spans_or_crash_reports(
    make_server: Callable[..., Any],
    captured: _Capture,
    spans: tuple[TracerProvider, InMemorySpanExporter],
    crashable: Callable[[], Any],
    monkeypatch: pytest.MonkeyPatch,
    era: str,
    transport: str,
) -> None:
    server = make_server(era=era)
    provider, exporter = spans
    handler = SecretHandler()
    options: dict[str, Any] = {
        "handler": handler,
        "handler_timeout": 0.5,
        "protocol": era,
        "backoff": lambda attempt: 0.01,
        "tracer_provider": provider,
    }
    if transport == "stdio":
        client = mcp.Client.start(server.stdio(), **options)
        try:
            client.await_ready(timeout=10)
            texts, errors = drive(client, handler, monkeypatch, crashable, era)
        finally:
            client.stop()
    else:
        with server.http_server() as srv:
            client = mcp.Client.start(srv.spec(), **options)
            try:
                client.await_ready(timeout=10)
                texts, errors = drive(client, handler, monkeypatch, crashable, era)
            finally:
                client.stop()

    # the secrets did travel (the test exercises real traffic) ...
    assert any(ASKED in str(e.get("params")) for e in server.received("tools/call"))
    if era == "legacy":
        assert handler.logs and LOGGED in str(handler.logs)
        # The server logged it: on its client's server logger, and nowhere else (below).
        assert any(LOGGED in t for t in captured.server_logs)
    # The server's log records carry nothing the client adds (the other secrets).
    for secret in (ASKED, ANSWER, SAMPLED, ROOT):
        assert not [t for t in captured.server_logs if secret in t]
    # ... and a crash report was logged for each injected crash ...
    assert any("injected handler crash" in t for t in captured.texts)
    assert any("injected connection crash" in t for t in captured.texts)
    # ... but no secret anywhere we looked.
    texts += [t for e in errors for t in (str(e), repr(e), repr(e.args))]
    texts += captured.texts
    exported = exporter.get_finished_spans()
    assert exported
    texts += [t for s in exported for t in span_texts(s)]
    for secret in SECRETS:
        leaks = [t for t in texts if secret in t]
        assert leaks == [], (secret, leaks[:3])


def test_handler_messages_never_show_params_or_results() -> None:
    """The messages between the connection and the handler actor (what a crash report of
    either shows) name the method and key, never the params or the answer."""
    context = ServeContext("legacy", "s-1", "tools/call", 7)
    messages = [
        Serve(("s-1", 1), "elicitation/create", elicit_params(), context),
        Served(("s-1", 1), {"action": "accept", "content": {"password": ANSWER}}),
        Served(("s-1", 1), {"content": {"type": "text", "text": SAMPLED}, "model": "m"}),
        Served(("s-1", 1), None, ServeError(-32603, "the handler raised", "raised")),
        Unserve(("s-1", 1)),
        HandlerNotification("notifications/message", {"level": "info", "data": LOGGED}),
    ]
    for message in messages:
        for secret in SECRETS:
            assert secret not in repr(message)
            assert secret not in str(message)


class UrlSecretHandler(SecretHandler):
    elicitation_modes = ("form", "url")


def search(
    texts: list[str], errors: list[BaseException], captured: _Capture, exporter: Any
) -> None:
    texts = texts + [t for e in errors for t in (str(e), repr(e), repr(e.args))]
    texts += captured.texts
    exported = exporter.get_finished_spans()
    assert exported
    texts += [t for s in exported for t in span_texts(s)]
    for secret in SECRETS:
        leaks = [t for t in texts if secret in t]
        assert leaks == [], (secret, leaks[:3])


def test_no_secret_from_modern_rounds(
    make_server: Callable[..., Any],
    captured: _Capture,
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """A modern call of three rounds: every kind of input request with the secret in its
    params, a secret ``requestState`` (echoed byte for byte), a state-only round; then a
    round whose answer the handler refuses (raises), which fails the call."""
    server = make_server(era="modern")
    provider, exporter = spans
    handler = SecretHandler()
    script = {
        "rounds": [
            {
                "inputRequests": {
                    "ask": {"method": "elicitation/create", "params": elicit_params()},
                    "llm": {"method": "sampling/createMessage", "params": sampling_params()},
                    "roots": {"method": "roots/list", "params": {"_meta": {"k": ASKED}}},
                },
                "requestState": f"state-{ASKED}",
            },
            {"requestState": f"state2-{ASKED}"},
        ],
        "strict": True,
    }
    client = mcp.Client.start(
        server.stdio(), handler=handler, protocol="modern", tracer_provider=provider
    )
    errors: list[BaseException] = []
    try:
        client.await_ready(timeout=10)
        result = client.call_tool("rounds", script, timeout=20)
        report = result.structured_content
        assert report["ok"] is True and report["rounds"] == 2
        sent = report["requests"][1]["inputResponses"]
        assert ANSWER in str(sent["ask"]) and SAMPLED in str(sent["llm"]) and ROOT in str(sent)
        failing = {
            "rounds": [
                {
                    "inputRequests": {
                        "x": {
                            "method": "sampling/createMessage",
                            "params": sampling_params("raise"),
                        }
                    },
                    "requestState": f"state3-{ASKED}",
                }
            ],
            "tag": 2,
        }
        with pytest.raises(mcp.Error) as err:
            client.call_tool("rounds", failing, timeout=20)
        errors.append(err.value)
        texts = [repr(client), repr(client.status())]
        texts += [repr(ctx) for ctx in handler.contexts]
        texts += [repr(r) for r in handler.requests]
    finally:
        client.stop()
    search(texts, errors, captured, exporter)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_no_secret_from_cancelled_and_url_server_requests(
    make_server: Callable[..., Any],
    captured: _Capture,
    spans: tuple[TracerProvider, InMemorySpanExporter],
    transport: str,
) -> None:
    """Legacy: the server cancels a request the handler is holding (the secret in its
    params), then sends a URL-mode elicitation whose URL and id carry the secret, and its
    ``notifications/elicitation/complete``."""
    server = make_server(era="legacy")
    provider, exporter = spans
    handler = UrlSecretHandler()
    asks = {
        "requests": [
            {"method": "elicitation/create", "params": elicit_params("hang"), "cancel_after": 0.3},
            {
                "method": "elicitation/create",
                "params": {
                    "mode": "url",
                    "message": f"Open the page for {ASKED}",
                    "url": f"https://pay.example.org/{ASKED}",
                    "elicitationId": f"id-{ASKED}",
                },
                "complete": True,
            },
        ]
    }
    options: dict[str, Any] = {
        "handler": handler,
        "protocol": "legacy",
        "tracer_provider": provider,
    }

    def run(spec: Any) -> tuple[list[str], Any]:
        client = mcp.Client.start(spec, **options)
        try:
            client.await_ready(timeout=10)
            result = client.call_tool("ask", asks, timeout=20)
            return [repr(client), repr(client.status())], result
        finally:
            client.stop()

    if transport == "stdio":
        texts, result = run(server.stdio())
    else:
        with server.http_server() as srv:
            texts, result = run(srv.spec())
    cancelled, url = result.structured_content["answers"]
    assert (cancelled["outcome"], cancelled["answered_after_cancel"]) == ("cancelled", False)
    assert (url["outcome"], url["result"], url["completed"]) == (
        "result",
        {"action": "accept"},
        True,
    )
    texts += [repr(ctx) for ctx in handler.contexts] + [repr(r) for r in handler.requests]
    search(texts, [], captured, exporter)
