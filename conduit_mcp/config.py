"""Client options, validated once at start into a frozen value (like aiohttp's ClientTimeout).

Every problem is an ``Error("config", <option name>, ...)`` raised by ``Client.start`` in the
caller's thread, before any actor or process exists: a typo never surfaces later as a
mysterious failure inside the connection.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from .errors import Error
from .protocol.client_caps import for_handler
from .protocol.messages import client_info
from .protocol.server_logs import LEVELS, LoggingLevel
from .protocol.versions import ProtocolChoice, parse_protocol_option
from .task_store import MemoryTaskStore, check_store

DEFAULT_CLIENT_INFO: Mapping[str, str] = client_info()
#: ``max_list_bytes``'s default: the most one walk of a list's pages may fetch.
DEFAULT_MAX_LIST_BYTES = 64 * 1024 * 1024


class ClientOptions(TypedDict, total=False):
    """The options of ``Client.start`` and ``Client.child_spec``, each typed and documented
    so an IDE shows them and a type checker rejects a misspelt one. Every one is checked
    again at run time, before anything starts: a bad value is ``Error("config", <option>)``.
    Durations are seconds. The limits-and-defaults page of the documentation has them in one
    table.

    >>> import sys
    >>> import conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
    >>> options: mcp.ClientOptions = {"request_timeout": 10.0, "max_in_flight": 32}
    >>> with mcp.Client.start(server, **options) as client:
    ...     client.call_tool("add", {"a": 1, "b": 2}).text
    '3'

    Each option's example below shows the edge it enforces, with the ``mcp`` and ``server``
    above (``tests/docs/test_docstrings.py`` runs them):

    >>> mcp.Client.start(server, max_in_flite=8)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (unknown_option): unknown option(s): max_in_flite
    """

    protocol: str
    """``"auto"`` (the default) probes with ``server/discover`` and falls back to
    ``initialize`` on legacy evidence; ``"modern"`` never falls back (legacy evidence closes);
    ``"legacy"`` goes straight to ``initialize``; or an explicit version (``"2026-07-28"``,
    ``"2025-11-25"``, ``"2025-06-18"``, ``"2025-03-26"``, ``"2024-11-05"``).

    >>> mcp.Client.start(server, protocol='2099-01-01')
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (protocol): protocol must be one of 'auto', 'modern', 'legacy', '2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'
    """
    prior: Literal["legacy"] | None
    """``"legacy"``: skip the probe once (a server known to be legacy). Default None.

    >>> mcp.Client.start(server, prior='modern')
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (prior): option 'prior' must be None or 'legacy'
    """
    request_timeout: float
    """Default deadline of a request; also bounds connecting and ``initialize``. Default 30.

    >>> mcp.Client.start(server, request_timeout=0)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (request_timeout): option 'request_timeout' must be a positive number of seconds
    """
    probe_timeout: float
    """How long the auto-mode probe waits before taking silence as legacy evidence.
    Default 5.

    >>> mcp.Client.start(server, probe_timeout=-1)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (probe_timeout): option 'probe_timeout' must be a positive number of seconds
    """
    max_in_flight: int
    """Requests sent and unanswered; one more gets ``overloaded``/``max_in_flight``.
    Default 100.

    >>> mcp.Client.start(server, max_in_flight=0)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (max_in_flight): option 'max_in_flight' must be an integer >= 1
    """
    max_queued: int
    """Requests and ``await_ready`` calls waiting for ``ready``; one more gets
    ``overloaded``/``max_queued``. Default 100.

    >>> mcp.Client.start(server, max_queued=-1)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (max_queued): option 'max_queued' must be an integer >= 0
    """
    max_reconnects: int | None
    """Consecutive failed attempts before ``closed``/``max_reconnects`` (None: forever).
    Default 10.

    >>> mcp.Client.start(server, max_reconnects=-1)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (max_reconnects): option 'max_reconnects' must be an integer >= 0 or None
    """
    backoff: Callable[[int], float] | None
    """``f(attempt) -> seconds`` between attempts; one that raises or returns anything but a
    finite number >= 0 is replaced by full jitter. Default: full jitter.

    >>> mcp.Client.start(server, backoff=3)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (backoff): option 'backoff' must be a function attempt -> seconds
    """
    backoff_base: float
    """Full jitter's base. Default 0.1.

    >>> mcp.Client.start(server, backoff_base=-1)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (backoff_base): option 'backoff_base' must be a positive number of seconds
    """
    backoff_max: float
    """Full jitter's cap. Default 30.

    >>> mcp.Client.start(server, backoff_max=float('inf'))
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (backoff_max): option 'backoff_max' must be a positive number of seconds
    """
    on_give_up: Literal["close", "stop"]
    """``"close"`` (the default) keeps the client in ``closed`` to show why; ``"stop"`` ends
    the client (for a supervisor to restart).

    >>> mcp.Client.start(server, on_give_up='restart')
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (on_give_up): option 'on_give_up' must be 'close' or 'stop'
    """
    stable_after: float
    """Time in ``ready`` after which the attempt count resets. Default 10.

    >>> mcp.Client.start(server, stable_after=-1)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (stable_after): option 'stable_after' must be a number of seconds >= 0
    """
    health_check: float | None
    """Ping every ``health_check`` seconds (None, the default: never).

    >>> mcp.Client.start(server, health_check=0)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (health_check): option 'health_check' must be a positive number of seconds or None
    """
    health_timeout: float
    """A health ping unanswered within this reconnects. Default 5.

    >>> mcp.Client.start(server, health_timeout=0)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (health_timeout): option 'health_timeout' must be a positive number of seconds
    """
    max_frame: int
    """Largest inbound frame in bytes (a stdio line). A response over it fails the request
    it answers at once with ``protocol``/``response_too_large``; any other frame over it is
    dropped; the connection keeps working. Default 16 MiB.

    >>> mcp.Client.start(server, max_frame=100)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (max_frame): option 'max_frame' must be an integer >= 1024
    """
    max_list_bytes: int
    """The most one ``list_all_*`` may fetch, in bytes of its pages' JSON; a list over it
    fails with ``protocol``/``list_too_large`` (a server whose cursors never end cannot grow
    the client without bound). Default 64 MiB.

    >>> mcp.Client.start(server, max_list_bytes=100)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (max_list_bytes): option 'max_list_bytes' must be an integer >= 1024
    """
    client_info: Mapping[str, Any]
    """What the client declares about itself (string ``name`` and ``version``). Default:
    conduit-mcp's.

    >>> mcp.Client.start(server, client_info={'name': 'my-app'})
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (client_info): option 'client_info' needs string 'name' and 'version'
    """
    capabilities: Mapping[str, Any]
    """The capabilities the client declares, merged over those its ``handler`` implies
    (``sampling``, ``elicitation``, ``roots``); declaring one of those without the handler
    method that serves it is ``Error("config", "capabilities")``. Default ``{}``.

    >>> mcp.Client.start(server, capabilities=['sampling'])
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (capabilities): option 'capabilities' must be a mapping with string keys
    """
    tasks: bool | None
    """Whether modern requests declare the Tasks extension (``io.modelcontextprotocol/tasks``)
    in their client capabilities, so that a long ``tools/call`` may be answered with a task
    that ``call_tool`` polls to its end (docs/tasks.md). None (the default): declared when
    the server advertises the extension in ``server/discover``; False: never.

    >>> mcp.Client.start(server, tasks="yes")
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (tasks): option 'tasks' must be True, False or None
    """
    task_store: Any
    """Where the client keeps its unfinished tasks (a ``conduit_mcp.TaskStore``), so that
    ``client.tasks.unfinished()`` and ``client.tasks.resume(record)`` find them after a
    restart of the process: ``mcp.SqliteTaskStore(path)`` for that; the default, a
    ``mcp.MemoryTaskStore()`` of the client's own, lives as long as the process
    (docs/tasks.md).

    >>> mcp.Client.start(server, task_store="tasks.db")
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (task_store): option 'task_store' must be a TaskStore (put, delete, records), e.g. mcp.MemoryTaskStore() or mcp.SqliteTaskStore(path)
    """
    handler: Any
    """A ``conduit_mcp.Handler``: what the client answers when the server asks (sampling,
    elicitation, roots) and where notifications and logs go. Default None (no handler
    actor; every server request but ``ping`` is answered ``-32601``).

    >>> mcp.Client.start(server, handler=object())
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (handler): handler must be an instance of a conduit_mcp.Handler subclass, not object
    """
    handler_timeout: float
    """The longest one handler method may run; past it the server gets an error (legacy)
    or the call fails (modern). Default 300.

    >>> mcp.Client.start(server, handler_timeout=0)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (handler_timeout): option 'handler_timeout' must be a positive number of seconds
    """
    max_server_requests: int
    """Handler methods running at once; one more legacy server request is refused at once
    with a JSON-RPC error, never queued, while a modern round's entries past it wait for a
    slot. Default 8.

    >>> mcp.Client.start(server, max_server_requests=0)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (max_server_requests): option 'max_server_requests' must be an integer >= 1
    """
    max_total_timeout: float
    """The longest a call may take in all, however its deadline is extended: paused while a
    handler works for it (a person answering an elicitation) or restarted by progress
    (``reset_timeout_on_progress``); also a per-call keyword. Default 600.

    >>> mcp.Client.start(server, max_total_timeout=0)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (max_total_timeout): option 'max_total_timeout' must be a positive number of seconds
    """
    reset_timeout_on_progress: bool
    """Each progress report for a call gives it its whole ``timeout`` again, so a long call
    that reports progress is not cut off and one that falls silent still ends a ``timeout``
    after its last report; ``max_total_timeout`` (default 600) still bounds it, whatever
    the server reports. The client asks for progress (a ``progressToken``) whenever it is on,
    with or without ``on_progress``. It applies to ``call_tool``, ``get_prompt``,
    ``read_resource`` and ``request``, each of which also takes it as a keyword. Default
    False.

    >>> mcp.Client.start(server, reset_timeout_on_progress="yes")
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (reset_timeout_on_progress): option 'reset_timeout_on_progress' must be True or False
    """
    max_input_rounds: int
    """``input_required`` rounds of one modern call; one more fails it with
    ``protocol``/``too_many_rounds``. Default 16.

    >>> mcp.Client.start(server, max_input_rounds=0)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (max_input_rounds): option 'max_input_rounds' must be an integer >= 1
    """
    max_round_inputs: int
    """``inputRequests`` entries one modern round may ask; more fail the call with
    ``protocol``/``too_many_inputs``. Entries past ``max_server_requests`` wait for a slot.
    Default 64.

    >>> mcp.Client.start(server, max_round_inputs=0)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (max_round_inputs): option 'max_round_inputs' must be an integer >= 1
    """
    shutdown_timeout: float
    """Bound on stopping the actors. Default 5.

    >>> mcp.Client.start(server, shutdown_timeout=0)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (shutdown_timeout): option 'shutdown_timeout' must be a positive number of seconds
    """
    max_inbox: int
    """Notifications and server requests read from the server and not yet handled by the
    connection; beyond it, what the server sends (but answers to the client's own requests)
    is dropped and counted (``mcp.client.dropped``, kind ``inbound``) until the connection
    catches up. Bounds the memory a flooding server can take. Default 10000.

    >>> mcp.Client.start(server, max_inbox=0)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (max_inbox): option 'max_inbox' must be an integer >= 1
    """
    max_answer_backlog: int
    """Bytes written for the server and not yet taken by it (stdio: the pipe's backlog;
    HTTP: answer bodies waiting or being POSTed, 32 POSTs at once); an answer to a
    server request (``ping``, ``-32601``) beyond it is dropped and counted (kind ``answer``).
    The client's own requests are never dropped (``max_in_flight`` bounds them). Default
    1 MiB.

    >>> mcp.Client.start(server, max_answer_backlog=-1)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (max_answer_backlog): option 'max_answer_backlog' must be an integer >= 0
    """
    max_subscriber_backlog: int
    """Notifications waiting for the notifier, and for each subscriber it runs (a callable,
    in the notifier's thread) or schedules on a busy loop (an ``asyncio.Queue``); one more is
    dropped (for that subscriber) and counted (kind ``notification``). Default 1000.

    >>> mcp.Client.start(server, max_subscriber_backlog=0)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (max_subscriber_backlog): option 'max_subscriber_backlog' must be an integer >= 1
    """
    max_cache_ttl: float | None
    """A cached list is fresh for the server's ``ttlMs``, capped at this (None: no cap).
    Default 300.

    >>> mcp.Client.start(server, max_cache_ttl=-1)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (max_cache_ttl): option 'max_cache_ttl' must be a number of seconds >= 0 or None
    """
    log_level: LoggingLevel | None
    """The least severe server log message to receive from the start, as if
    ``client.set_logging_level(log_level)`` were called before the first request: modern,
    every request carries it; legacy, ``logging/setLevel`` follows every ``initialize`` of a
    server that declares ``logging`` (docs/telemetry.md, "Server logs"). Default None: the
    server's own default (legacy), no log messages (modern).

    >>> mcp.Client.start(server, log_level="verbose")
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (log_level): option 'log_level' must be None or one of debug, info, notice, warning, error, critical, alert, emergency
    """
    validate_output: bool
    """Check the ``structuredContent`` of a tool that declares an ``outputSchema`` against
    it (the schema from the cached tool list, fetched first for a tool never listed); a
    mismatch is ``protocol``/``invalid_structured_content``, naming the first failing path.
    False accepts whatever the server sends. Default True.

    >>> mcp.Client.start(server, validate_output='no')
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (validate_output): option 'validate_output' must be True or False
    """
    validate_arguments: bool
    """Check a call's arguments against the tool's cached ``inputSchema`` before anything is
    sent: a mismatch is ``argument``/``invalid_arguments``, naming the first failing path,
    without a round trip to a server that would refuse it. Default False.

    >>> mcp.Client.start(server, validate_arguments=1)
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (validate_arguments): option 'validate_arguments' must be True or False
    """
    tracer_provider: Any
    """An OpenTelemetry ``TracerProvider`` (None, the default: the global one).

    >>> mcp.Client.start(server, tracer_provider=object())
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (tracer_provider): option 'tracer_provider' must be None or an OpenTelemetry provider (with get_tracer())
    """
    meter_provider: Any
    """An OpenTelemetry ``MeterProvider`` (None, the default: the global one).

    >>> mcp.Client.start(server, meter_provider=object())
    Traceback (most recent call last):
    conduit_mcp.errors.Error: config (meter_provider): option 'meter_provider' must be None or an OpenTelemetry provider (with get_meter())
    """


@dataclass(frozen=True, slots=True)
class Config:
    """The validated options of one client, built by :func:`build_config` from the keyword
    options of ``Client.start`` (:class:`ClientOptions` documents each one). Internal: it is
    not exported, because users pass options as keywords, checked once, typed by
    ``ClientOptions``."""

    protocol: ProtocolChoice
    prior: Literal["legacy"] | None = None
    request_timeout: float = 30.0
    probe_timeout: float = 5.0
    max_in_flight: int = 100
    max_queued: int = 100
    max_reconnects: int | None = 10
    backoff: Callable[[int], float] | None = field(default=None, repr=False)
    backoff_base: float = 0.1
    backoff_max: float = 30.0
    on_give_up: Literal["close", "stop"] = "close"
    stable_after: float = 10.0
    health_check: float | None = None
    health_timeout: float = 5.0
    max_frame: int = 16 * 1024 * 1024
    max_list_bytes: int = DEFAULT_MAX_LIST_BYTES
    client_info: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_CLIENT_INFO))
    capabilities: Mapping[str, Any] = field(default_factory=dict)
    # The Tasks extension (docs/tasks.md): None, declared when the server offers it.
    tasks: bool | None = None
    task_store: Any = field(default_factory=MemoryTaskStore, repr=False, compare=False)
    handler: Any = field(default=None, repr=False, compare=False)
    handler_timeout: float = 300.0
    max_server_requests: int = 8
    max_total_timeout: float = 600.0
    reset_timeout_on_progress: bool = False
    max_input_rounds: int = 16
    max_round_inputs: int = 64
    shutdown_timeout: float = 5.0
    # Flood bounds (docs/connection.md, "Floods").
    max_inbox: int = 10_000
    max_answer_backlog: int = 1024 * 1024
    max_subscriber_backlog: int = 1000
    # The longest a cached list stays fresh, whatever the server's ttlMs says (None: no cap).
    max_cache_ttl: float | None = 300.0
    # The server log level to ask for from the start (docs/telemetry.md, "Server logs").
    log_level: LoggingLevel | None = None
    # Tool schema checks (docs/validation.md).
    validate_output: bool = True
    validate_arguments: bool = False
    # OpenTelemetry providers (docs/telemetry.md, "Telemetry"); None: the global ones, resolved lazily.
    tracer_provider: Any = field(default=None, repr=False, compare=False)
    meter_provider: Any = field(default=None, repr=False, compare=False)


_NUMBERS = {
    # option: (allow None, strictly positive)
    "request_timeout": (False, True),
    "probe_timeout": (False, True),
    "backoff_base": (False, True),
    "backoff_max": (False, True),
    "stable_after": (False, False),
    "health_check": (True, True),
    "health_timeout": (False, True),
    "shutdown_timeout": (False, True),
    "max_cache_ttl": (True, False),
    "handler_timeout": (False, True),
    "max_total_timeout": (False, True),
}
_INTS = {
    # option: (allow None, minimum)
    "max_in_flight": (False, 1),
    "max_queued": (False, 0),
    "max_reconnects": (True, 0),
    "max_frame": (False, 1024),
    "max_list_bytes": (False, 1024),
    "max_inbox": (False, 1),
    "max_answer_backlog": (False, 0),
    "max_subscriber_backlog": (False, 1),
    "max_server_requests": (False, 1),
    "max_input_rounds": (False, 1),
    "max_round_inputs": (False, 1),
}
_BOOLS = ("validate_output", "validate_arguments")
OPTION_NAMES = frozenset(Config.__dataclass_fields__)


def _number(name: str, value: Any, allow_none: bool, positive: bool) -> float | None:
    if value is None and allow_none:
        return None
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value < 0
        or (positive and value == 0)
    ):
        need = "a positive number of seconds" if positive else "a number of seconds >= 0"
        raise Error("config", name, f"option {name!r} must be {need}" + (" or None" * allow_none))
    return float(value)


def _int(name: str, value: Any, allow_none: bool, minimum: int) -> int | None:
    if value is None and allow_none:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise Error(
            "config",
            name,
            f"option {name!r} must be an integer >= {minimum}" + (" or None" * allow_none),
        )
    return value


def _json_object(name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise Error("config", name, f"option {name!r} must be a mapping with string keys")
    return dict(value)


def build_config(options: Mapping[str, Any] | ClientOptions) -> Config:
    """Validate keyword options into a :class:`Config`.

    >>> build_config({"protocol": "legacy", "max_in_flight": 8}).max_in_flight
    8
    >>> build_config({"max_in_flight": 0})
    Traceback (most recent call last):
    ...
    conduit_mcp.errors.Error: config (max_in_flight): option 'max_in_flight' must be an integer >= 1
    """
    unknown = sorted(set(options) - OPTION_NAMES)
    if unknown:
        raise Error("config", "unknown_option", f"unknown option(s): {', '.join(unknown)}")
    values: dict[str, Any] = dict(options)
    values["protocol"] = parse_protocol_option(values.get("protocol", "auto"))
    for name, (allow_none, positive) in _NUMBERS.items():
        if name in values:
            values[name] = _number(name, values[name], allow_none, positive)
    for name, (allow_none, minimum) in _INTS.items():
        if name in values:
            values[name] = _int(name, values[name], allow_none, minimum)
    if not isinstance(values.get("reset_timeout_on_progress", False), bool):
        raise Error(
            "config",
            "reset_timeout_on_progress",
            "option 'reset_timeout_on_progress' must be True or False",
        )
    for name in _BOOLS:
        if name in values and type(values[name]) is not bool:
            raise Error("config", name, f"option {name!r} must be True or False")
    if "task_store" in values:
        values["task_store"] = check_store(values["task_store"])
    if values.get("tasks") not in (None, True, False):
        raise Error("config", "tasks", "option 'tasks' must be True, False or None")
    prior = values.get("prior")
    if prior not in (None, "legacy"):
        raise Error("config", "prior", "option 'prior' must be None or 'legacy'")
    if values.get("on_give_up", "close") not in ("close", "stop"):
        raise Error("config", "on_give_up", "option 'on_give_up' must be 'close' or 'stop'")
    backoff = values.get("backoff")
    if backoff is not None and not callable(backoff):
        raise Error("config", "backoff", "option 'backoff' must be a function attempt -> seconds")
    if "client_info" in values:
        info = _json_object("client_info", values["client_info"])
        if not isinstance(info.get("name"), str) or not isinstance(info.get("version"), str):
            raise Error(
                "config", "client_info", "option 'client_info' needs string 'name' and 'version'"
            )
        values["client_info"] = info
    declared = (
        _json_object("capabilities", values["capabilities"]) if "capabilities" in values else None
    )
    if declared is not None or values.get("handler") is not None:
        # Derived once, here: the connection never looks at the handler's methods
        # (docs/connection.md, "Server-to-client requests").
        values["capabilities"] = for_handler(values.get("handler"), declared)
    level = values.get("log_level")
    if level is not None and (type(level) is not str or level not in LEVELS):
        raise Error(
            "config",
            "log_level",
            f"option 'log_level' must be None or one of {', '.join(LEVELS)}",
        )
    for name, method in (("tracer_provider", "get_tracer"), ("meter_provider", "get_meter")):
        provider = values.get(name)
        if provider is not None and not callable(getattr(provider, method, None)):
            raise Error(
                "config",
                name,
                f"option {name!r} must be None or an OpenTelemetry provider (with {method}())",
            )
    return Config(**values)
