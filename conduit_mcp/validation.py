"""Checking a tool call against the tool's schemas, on the caller's side of the request.

A tool that declares an ``outputSchema`` has its ``structuredContent`` checked against it
(MCP spec, Server Features, Tools, "Output Schema": clients SHOULD validate), unless the client
was started with ``validate_output=False``; with ``validate_arguments=True`` a call's arguments
are checked against the tool's ``inputSchema`` before anything is sent. The schemas come from
the cached tool list; a tool never listed has the list fetched first (as the official SDK's
client does), by the front end, which knows how its caller waits.

Where it runs, and why: in the caller's thread (or its asyncio loop, or the futures' worker),
inside the request's parser, like the rest of result parsing. Compiling a schema is
user-shaped work of unbounded cost in principle (the server writes the schema), so it never
runs in the connection actor (docs/architecture.md, "Threads and I/O"); the bounds of
``conduit_mcp.protocol.schema`` keep it to tens of milliseconds at worst, once per definition.

Compiled validators are kept in :data:`VALIDATORS`, one bounded table for the process, keyed
by the schema object (a cached tool list's schemas are the same objects call after call: one
dict lookup) and, behind that, by the schema's content, so a re-fetched list whose definitions
did not change compiles nothing (docs/validation.md).
"""

from __future__ import annotations

import hashlib
import json
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

import jsonschema_rs
import orjson

from .config import Config
from .errors import Error
from .protocol.results import parse_call_tool
from .protocol.schema import (
    Failure,
    SchemaProblem,
    compile_schema,
    error_for,
    first_failure,
)
from .request import Handle, Request
from .types import CallToolResult, Tool

#: How many compiled schemas the process keeps (each table); the oldest goes first.
MAX_COMPILED: Final = 512
#: The most schema JSON the tables keep alive, in bytes (each table): 512 schemas at the
#: 1 MiB bound would otherwise be half a gigabyte, held past the tool lists they came from.
MAX_COMPILED_BYTES: Final = 64 * 1024 * 1024

Compiled = jsonschema_rs.Validator | SchemaProblem


class _Table:
    """An insertion-ordered table bounded by entries and by the bytes of their schemas; the
    oldest go first. Writers hold the owner's lock; readers ``get`` without one."""

    __slots__ = ("entries", "size", "most", "most_bytes")

    def __init__(self, most: int, most_bytes: int) -> None:
        self.entries: dict[Any, tuple[Any, int]] = {}  # key -> (value, bytes)
        self.size = 0
        self.most = most
        self.most_bytes = most_bytes

    def put(self, key: Any, value: Any, size: int) -> None:
        old = self.entries.pop(key, None)
        if old is not None:
            self.size -= old[1]
        while self.entries and (
            len(self.entries) >= self.most or self.size + size > self.most_bytes
        ):
            self.size -= self.entries.pop(next(iter(self.entries)))[1]
        self.entries[key] = (value, size)
        self.size += size


class Validators:
    """Compiled validators (or the :class:`SchemaProblem` of a schema that does not compile),
    bounded at ``size`` entries and ``most_bytes`` of schema per table. Readers take no lock
    (one ``dict.get``, atomic under the GIL); a miss compiles outside the lock, then stores
    under it.

    >>> table = Validators(size=2)
    >>> schema = {"type": "integer"}
    >>> table.get(schema) is table.get(schema) is table.get({"type": "integer"})
    True
    >>> table.compiled
    1
    """

    __slots__ = ("_by_id", "_by_content", "_lock", "compiled")

    def __init__(self, size: int = MAX_COMPILED, most_bytes: int = MAX_COMPILED_BYTES) -> None:
        # id(schema) -> ((schema, compiled), bytes): the schema is held, so its id is not
        # reused while the entry lives.
        self._by_id = _Table(size, most_bytes)
        # digest of the schema's canonical JSON -> (compiled, bytes)
        self._by_content = _Table(size, most_bytes)
        self._lock = threading.Lock()
        #: How many schemas were compiled (a measure for tests and benchmarks).
        self.compiled = 0

    def get(self, schema: Any) -> Compiled:
        """The compiled ``schema``: a validator, or the problem that stops it compiling."""
        hit = self._by_id.entries.get(id(schema))
        if hit is not None and hit[0][0] is schema:
            return cast(Compiled, hit[0][1])
        text = _canonical(schema)
        key = hashlib.blake2b(text, digest_size=32).digest()
        found = self._by_content.entries.get(key)
        if found is not None:
            compiled: Compiled = found[0]
        else:
            try:
                compiled = compile_schema(schema)
            except SchemaProblem as problem:
                compiled = problem
            with self._lock:
                self.compiled += 1
                self._by_content.put(key, compiled, len(text))
        with self._lock:
            self._by_id.put(id(schema), (schema, compiled), len(text))
        return compiled


def _canonical(schema: Any) -> bytes:
    try:
        return orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # an integer over 64 bits (decoded by the fallback decoder)
        return json.dumps(schema, sort_keys=True, separators=(",", ":")).encode()


#: The process's compiled validators.
VALIDATORS: Final = Validators()


@dataclass(frozen=True, slots=True)
class ToolChecks:
    """What one call to ``tool`` checks: its arguments (``arguments``), its result
    (``output``)."""

    tool: Tool
    arguments: bool
    output: bool


class ListFirst:
    """The type of :data:`LIST`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "LIST"


#: :func:`find_tool`'s answer when the tool list must be fetched first.
LIST: Final = ListFirst()


#: client tree -> (the cache, its version) when a tool list could not be fetched for the
#: checks: its calls go unchecked rather than fetching again, until the cache changes (a
#: new connection has a new cache; a list stored meanwhile, a new version: tried again).
_UNLISTABLE: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_unlistable_lock = threading.Lock()


def listing_failed(handle: Handle, error: Error) -> None:
    """After the tool list could not be fetched for a call's checks (``error``: over the
    client's limits, refused, timed out, the connection lost): the call goes on unchecked,
    and so do the next calls of this connection until a tool list is cached (a
    ``list_all_tools``, a refresh), rather than each waiting on a listing that fails. The
    call then succeeds or fails on its own (a closed client still fails it ``closed``). A
    new connection (a new cache) tries again. A schema check is a check of a consistent
    server, not a defence against a hostile one (which can declare no schema at all)."""
    runtime = handle.find()
    cache = runtime.shared.cache if runtime is not None else None
    if cache is not None:
        try:
            version = cache.version
        except Error:  # gone with its connection: the next one tries again
            return
        with _unlistable_lock:
            _UNLISTABLE[runtime] = (cache, version)


def _wanted(config: Config) -> tuple[bool, bool]:
    return config.validate_arguments, config.validate_output


def find_tool(handle: Handle, req: Request[CallToolResult]) -> ToolChecks | ListFirst | None:
    """The checks of a ``tools/call`` from the cached tool list: None when there is nothing
    to check (both options off, no client yet, a tool missing from a current list, a list
    this connection could not fetch), :data:`LIST` when the list must be fetched first
    (never listed, or the tool is missing from a list a ``list_changed`` made out of date).
    A tool found in the cached list is checked against that definition, fresh or not; a
    ``list_changed`` refreshes the list in the background (docs/cache.md)."""
    runtime = handle.find()
    if runtime is None or req.params is None:
        return None
    arguments, output = _wanted(runtime.config)
    if not (arguments or output):
        return None
    cache = runtime.shared.cache
    if cache is None:
        return None
    try:
        # The hot path: one point lookup (a listed tool); the list's state only on a miss.
        tool = cache.lookup("tools", req.params["name"])
    except Error:  # the cache went with its connection: the call fails or succeeds alone
        return None
    if tool is None:
        # Never listed, or missing from a list a list_changed made out of date: it may be
        # new. A name missing from a current list is sent unchecked (the server answers it).
        try:
            changed = cache.changed("tools")
            failed = _UNLISTABLE.get(runtime) == (cache, cache.version)
        except Error:
            return None
        # (a list stored since a failed listing changes the version: listed again)
        return LIST if changed and not failed else None
    return ToolChecks(tool, arguments, output)


def from_listing(
    handle: Handle, req: Request[CallToolResult], tools: Sequence[Tool]
) -> ToolChecks | None:
    """The checks of a ``tools/call`` once the list was fetched (the fetched items, whether
    or not the cache could keep them); None for a tool the server does not list."""
    runtime = handle.find()
    if runtime is None or req.params is None:
        return None
    name = req.params["name"]
    tool = next((t for t in tools if t.name == name), None)
    if tool is None:
        return None
    arguments, output = _wanted(runtime.config)
    return ToolChecks(tool, arguments, output)


def checked(req: Request[CallToolResult], checks: ToolChecks | None) -> Request[CallToolResult]:
    """``req``, its arguments checked now and its result checked when it is parsed.

    Raises ``argument``/``invalid_arguments`` (naming the first failing path) before anything
    is sent, and ``protocol``/``invalid_output_schema`` when the tool's ``outputSchema`` does
    not compile: a result that could never be checked is refused before the tool runs.
    """
    if checks is None or req.params is None:
        return req
    tool = checks.tool
    if checks.arguments and type(tool.input_schema) is dict:
        compiled = VALIDATORS.get(tool.input_schema)
        # An inputSchema that does not compile is not checked: the server stays the judge.
        if not isinstance(compiled, SchemaProblem):
            failure = first_failure(compiled, req.params.get("arguments") or {})
            if failure is not None:
                raise error_for(failure, tool=tool.name, what="arguments")
    schema = tool.output_schema
    if checks.output and schema is not None:
        compiled = VALIDATORS.get(schema)
        if isinstance(compiled, SchemaProblem):
            raise Error(
                "protocol",
                "invalid_output_schema",
                f"tool {tool.name!r} declares an outputSchema that cannot be checked: "
                f"{compiled.why}; the call was not sent (start the client with "
                "validate_output=False to call it unchecked)",
                data={"tool": tool.name},
            )
        req.parse = _checking_parser(tool.name, compiled)
    return req


def _checking_parser(name: str, validator: jsonschema_rs.Validator) -> Any:
    def parse(raw: Any) -> CallToolResult:
        result = parse_call_tool(raw)
        # A tool error is a result about the failure, not the tool's output (the spec's
        # outputSchema constrains the structured results of a successful call).
        if result.is_error:
            return result
        if "structuredContent" not in result.raw:
            raise Error(
                "protocol",
                "invalid_structured_content",
                f"the result of tool {name!r} has no structuredContent, but the tool declares "
                "an outputSchema (start the client with validate_output=False to accept it)",
                data={"tool": name, "path": "", "keyword": "structuredContent"},
            )
        failure: Failure | None = first_failure(validator, result.structured_content)
        if failure is not None:
            raise error_for(failure, tool=name, what="output")
        return result

    return parse
