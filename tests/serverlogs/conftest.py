"""Fixtures for the server log tests: clients against scripted servers, and a capture of
the records of ``conduit_mcp.server.<client name>``."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import conduit_mcp as mcp


@pytest.fixture
def start_client() -> Iterator[Callable[..., mcp.Client]]:
    clients: list[mcp.Client] = []

    def start(transport: Any, **options: Any) -> mcp.Client:
        options.setdefault("backoff", lambda attempt: 0.01)
        client = mcp.Client.start(transport, **options)
        clients.append(client)
        return client

    yield start
    for client in clients:
        client.stop()


class Records(logging.Handler):
    """The records one logger gets, each with the thread that logged it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.queue: queue.Queue[logging.LogRecord] = queue.Queue()
        self.threads: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        self.threads.add(threading.current_thread().name)
        self.queue.put(record)

    def next(self, timeout: float = 10.0) -> logging.LogRecord:
        return self.queue.get(timeout=timeout)

    def none_within(self, seconds: float) -> bool:
        try:
            self.queue.get(timeout=seconds)
        except queue.Empty:
            return True
        return False


@pytest.fixture
def capture() -> Iterator[Callable[[str], Records]]:
    """``capture(name)``: the records of logger ``name`` (DEBUG and up), detached after."""
    attached: list[tuple[logging.Logger, Records, int]] = []

    def attach(name: str) -> Records:
        lg = logging.getLogger(name)
        handler = Records()
        attached.append((lg, handler, lg.level))
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
        return handler

    yield attach
    for lg, handler, level in attached:
        lg.removeHandler(handler)
        lg.setLevel(level)
