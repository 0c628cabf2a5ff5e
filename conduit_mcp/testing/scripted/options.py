"""Options of the scripted MCP server: :class:`Config` and the command line that builds it.

:func:`build_parser` defines the options of ``python -m conduit_mcp.testing`` and
:func:`config_from_args` turns them, plus the ``--script`` file (through
:func:`~conduit_mcp.testing.scripted.rules.parse_rules`), into a validated :class:`Config`. It exists so
that the server's whole configuration surface (defaults, validation, flags) reads in one place,
apart from the protocol logic that consumes it.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..common.tls import add_tls_arguments, check_tls_arguments
from .protocol import DEFAULT_LEGACY_VERSIONS, DEFAULT_MODERN_VERSIONS, is_modern_version
from .rules import ConfigError, Rule, parse_rules

__all__ = ["DEFAULT_INSTRUCTIONS", "Config", "build_parser", "config_from_args"]

#: ``--skills`` values: ``honest`` (the default), or what of a skill to tamper with
#: (``conduit_mcp.testing.scripted.skills``).
SKILL_MODES = ("honest", "digest", "size", "frontmatter")

DEFAULT_INSTRUCTIONS = (
    "Scripted MCP test server (conduit_mcp.testing): deterministic tools for exercising clients."
)


@dataclass(slots=True)
class Config:
    """Everything the server needs; built from the command line by :func:`config_from_args`."""

    era: str = "both"
    versions: tuple[str, ...] | None = None
    name: str = "scripted"
    server_version: str = "1.0.0"
    instructions: str = DEFAULT_INSTRUCTIONS
    page_size: int | None = None
    ttl_ms: int = 0
    cache_scope: str = "public"
    advertise_legacy: bool = False
    extra_tools: int = 0
    rules: list[Rule] = field(default_factory=list)
    script_path: str | None = None
    log_path: str | None = None
    log_out: bool = False
    stderr_noise: int = 0
    startup_delay: float = 0.0
    ignore_eof: bool = False
    ignore_sigterm: bool = False
    fork_child: bool = False
    header_tools: bool = False
    flood_tools: bool = False
    metadata: bool = False
    skills: str | None = None
    ask_roots: bool = False
    no_logging: bool = False
    on_initialized: list[dict[str, Any]] = field(default_factory=list)
    http: bool = False
    port: int = 0
    port_file: str | None = None
    http_response: str = "auto"
    sse_retry_ms: int = 50
    end_get_streams: bool = False
    require_bearer: str | None = None
    require_oauth: str | None = None
    oauth_scope: str = "mcp"
    tool_scopes: dict[str, str] = field(default_factory=dict)
    prm_resource: str | None = None
    prm_scopes: list[str] | None = None
    prm_at: str = "both"
    introspection_url: str | None = None
    introspection_cert: tuple[str, str] | None = None
    introspection_cache: float = 0.0
    no_resource_metadata_param: bool = False
    require_dpop: bool = False
    dpop_nonce: bool = False
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    tasks: bool = True
    tasks_durable: str | None = None
    tasks_conformance: bool = False
    modern_versions: tuple[str, ...] = ()
    legacy_versions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.era not in ("both", "modern", "legacy"):
            raise ConfigError(f"era must be both, modern or legacy, not {self.era!r}")
        if self.versions is None:
            modern = DEFAULT_MODERN_VERSIONS if self.era != "legacy" else ()
            legacy = DEFAULT_LEGACY_VERSIONS if self.era != "modern" else ()
        else:
            modern = tuple(v for v in self.versions if is_modern_version(v))
            legacy = tuple(v for v in self.versions if not is_modern_version(v))
            if self.era == "modern":
                legacy = ()
            elif self.era == "legacy":
                modern = ()
        self.modern_versions = modern
        self.legacy_versions = legacy
        if self.page_size is not None and self.page_size < 1:
            raise ConfigError("page size must be >= 1")
        if self.cache_scope not in ("public", "private"):
            raise ConfigError("cache scope must be public or private")
        if self.http_response not in ("auto", "json", "sse"):
            raise ConfigError("http response must be auto, json or sse")
        if not 0 <= self.port <= 65535 or self.sse_retry_ms < 0:
            raise ConfigError("--port must be 0..65535 and --sse-retry-ms >= 0")


def parse_on_initialized(spec: str) -> dict[str, Any]:
    """``--on-initialized`` value: a method name, or a JSON object ``{"method", "params"?}``."""
    if not spec.lstrip().startswith("{"):
        if not spec.strip():
            raise ValueError("--on-initialized needs a method name or a JSON object")
        return {"method": spec.strip()}
    try:
        value = orjson.loads(spec)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"--on-initialized is not valid JSON: {e}") from None
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("method"), str)
        or not isinstance(value.get("params", {}), dict)
    ):
        raise ValueError('--on-initialized JSON must be {"method": string, "params"?: object}')
    return {"method": value["method"], **({"params": value["params"]} if "params" in value else {})}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m conduit_mcp.testing",
        description="A scriptable MCP server (modern 2026-07-28 and legacy eras) over stdio "
        "or Streamable HTTP (--http).",
        epilog="The manual (what each era answers, the tools, --script rules, the HTTP front) "
        "is docs/testing.md in the conduit-mcp repository.",
    )
    p.add_argument("--era", choices=("both", "modern", "legacy"), default="both")
    p.add_argument("--versions", help="comma-separated protocol versions the server supports")
    p.add_argument("--name", default="scripted", help="serverInfo name")
    p.add_argument("--server-version", default="1.0.0", help="serverInfo version")
    p.add_argument("--instructions", default=DEFAULT_INSTRUCTIONS)
    p.add_argument("--page-size", type=int, help="items per page of every */list result")
    p.add_argument("--ttl-ms", type=int, default=0, help="ttlMs of cacheable modern results")
    p.add_argument("--cache-scope", choices=("public", "private"), default="public")
    p.add_argument(
        "--advertise-legacy",
        action="store_true",
        help="also list the legacy versions in supportedVersions and -32022 data.supported",
    )
    p.add_argument("--extra-tools", type=int, default=0, help="add N tools extra_0..extra_N-1")
    p.add_argument("--log", help="append one JSON line per received message and event")
    p.add_argument("--log-out", action="store_true", help="also log every sent message")
    p.add_argument("--script", help="JSON rules file")
    p.add_argument("--stderr-noise", type=int, default=0, help="write N lines to stderr at start")
    p.add_argument("--startup-delay", type=float, default=0.0, help="seconds before reading")
    p.add_argument("--ignore-eof", action="store_true", help="keep running after stdin closes")
    p.add_argument("--ignore-sigterm", action="store_true", help="survive SIGTERM (logged)")
    p.add_argument(
        "--fork-child",
        action="store_true",
        help="stdio: fork a child at start that ignores SIGTERM and outlives the server "
        "(logged as child with its pid)",
    )
    p.add_argument(
        "--header-tools", action="store_true", help="add the tools weather and bad_header"
    )
    p.add_argument(
        "--flood-tools",
        action="store_true",
        help="add the tool flood (server requests, notifications or progress without waiting)",
    )
    p.add_argument(
        "--metadata",
        action="store_true",
        help="give the server info, some tools, prompts, resources and templates a title, "
        "icons (one unsafe), annotations and _meta",
    )
    p.add_argument(
        "--skills",
        nargs="?",
        const="honest",
        choices=SKILL_MODES,
        help="serve the skills extension (skills/list, skills/get, skill:// files); a mode "
        "serves the greeting skill's SKILL.md tampered: digest, size or frontmatter",
    )
    p.add_argument(
        "--ask-roots",
        action="store_true",
        help="legacy: send roots/list after notifications/initialized and after each "
        "notifications/roots/list_changed, when the client declared roots",
    )
    p.add_argument(
        "--no-logging",
        action="store_true",
        help="declare no logging capability (logging/setLevel is then -32601)",
    )
    p.add_argument(
        "--on-initialized",
        action="append",
        default=[],
        metavar="REQUEST",
        help="legacy: send this server request after notifications/initialized: a method, or "
        'JSON {"method": ..., "params": {...}} (repeatable, sent in order)',
    )
    tasks = p.add_argument_group("Tasks (docs/testing-guide.md, 'Tasks')")
    tasks.add_argument(
        "--no-tasks",
        action="store_true",
        help="serve no tasks: no io.modelcontextprotocol/tasks extension (modern), no tasks "
        "capability nor execution.taskSupport (legacy); task tools run inline",
    )
    tasks.add_argument(
        "--tasks-durable",
        metavar="PATH",
        help="keep task state in this JSON file (owner-only): a restarted server with the "
        "same PATH still knows its tasks and finishes them by wall-clock time",
    )
    tasks.add_argument(
        "--tasks-conformance",
        action="store_true",
        help="add the tools the conformance harness's tasks scenarios call (greet, "
        "slow_compute, failing_job, protocol_error_job, confirm_delete, multi_input, "
        "test_tool_with_task)",
    )
    http = p.add_argument_group("Streamable HTTP (instead of stdio)")
    http.add_argument("--http", action="store_true", help="serve http://127.0.0.1:PORT/mcp")
    http.add_argument("--port", type=int, default=0, help="0: pick a free port")
    http.add_argument("--port-file", help="write the port to this file once listening")
    http.add_argument(
        "--http-response",
        choices=("auto", "json", "sse"),
        default="auto",
        help="answer requests with JSON, SSE, or SSE only with a progressToken (auto)",
    )
    http.add_argument(
        "--sse-retry-ms", type=int, default=50, help="retry field of legacy SSE streams"
    )
    http.add_argument(
        "--end-get-streams",
        action="store_true",
        help="answer every legacy GET with its retry field and end the stream at once (churn)",
    )
    http.add_argument("--require-bearer", metavar="TOKEN", help="401 without this bearer token")
    add_tls_arguments(http)
    oauth = p.add_argument_group(
        "OAuth-protected /mcp (docs/testing.md, 'The protected MCP server')"
    )
    oauth.add_argument(
        "--require-oauth",
        metavar="AS_URL",
        help="a bearer token issued by this authorization server (checked by introspection)",
    )
    oauth.add_argument(
        "--oauth-scope",
        default="mcp",
        help="scopes every request needs, space-separated (the 401 challenge's scope)",
    )
    oauth.add_argument(
        "--tool-scope",
        action="append",
        default=[],
        metavar="TOOL=SCOPE",
        help="tools/call of TOOL also needs SCOPE (403 insufficient_scope; repeatable)",
    )
    oauth.add_argument("--prm-resource", help="the resource metadata's resource (a wrong one)")
    oauth.add_argument("--prm-scopes", help="scopes_supported, comma-separated")
    oauth.add_argument(
        "--prm-at",
        choices=("both", "path", "root", "none"),
        default="both",
        help="serve the resource metadata at the path-aware URL, the root one, both, or none",
    )
    oauth.add_argument("--introspection-url", help="default: AS_URL/introspect")
    oauth.add_argument(
        "--introspection-cache", type=float, default=0.0, help="seconds to cache an answer"
    )
    oauth.add_argument(
        "--introspection-cert",
        metavar="FILE",
        help="present this client certificate to the authorization server (mutual TLS)",
    )
    oauth.add_argument("--introspection-key", metavar="FILE", help="its private key")
    oauth.add_argument(
        "--no-resource-metadata-param",
        action="store_true",
        help="challenges carry no resource_metadata (clients fall back to well-known URLs)",
    )
    oauth.add_argument(
        "--require-dpop",
        action="store_true",
        help="DPoP-bound tokens only (RFC 9449): the metadata says so, challenges are DPoP",
    )
    oauth.add_argument(
        "--dpop-nonce", action="store_true", help="requests with a DPoP token need a DPoP nonce"
    )
    return p


def config_from_args(argv: Iterable[str] | None = None) -> Config:
    """Parse the command line (argparse exits with code 2 on a bad option) and the script."""
    ns = build_parser().parse_args(None if argv is None else list(argv))
    versions = None
    if ns.versions is not None:
        versions = tuple(v.strip() for v in ns.versions.split(",") if v.strip())
    rules: list[Rule] = []
    if ns.script:
        try:
            with open(ns.script, "rb") as f:
                raw = orjson.loads(f.read())
        except (OSError, orjson.JSONDecodeError) as e:
            raise ConfigError(f"cannot read script {ns.script}: {e}") from e
        rules = parse_rules(raw)
    try:
        on_initialized = [parse_on_initialized(spec) for spec in ns.on_initialized]
    except ValueError as e:
        raise ConfigError(str(e)) from None
    tool_scopes: dict[str, str] = {}
    for spec in ns.tool_scope:
        tool, sep, scope = spec.partition("=")
        if not sep or not tool or not scope.strip():
            raise ConfigError(f"--tool-scope wants TOOL=SCOPE, not {spec!r}")
        tool_scopes[tool] = scope
    if ns.require_oauth is not None and not ns.http:
        raise ConfigError("--require-oauth needs --http (OAuth protects HTTP servers only)")
    if ns.require_oauth is None and (tool_scopes or ns.prm_resource or ns.prm_scopes):
        raise ConfigError("--tool-scope, --prm-resource and --prm-scopes need --require-oauth")
    if ns.introspection_cache < 0:
        raise ConfigError("--introspection-cache must be >= 0")
    prm_scopes = None
    if ns.prm_scopes is not None:
        prm_scopes = [s.strip() for s in ns.prm_scopes.split(",") if s.strip()]
    tls_problem = check_tls_arguments(ns.tls_cert, ns.tls_key, ns.tls_client_ca)
    if tls_problem is not None or (ns.tls_cert is not None and not ns.http):
        raise ConfigError(tls_problem or "--tls-cert needs --http")
    if ns.extra_tools < 0 or ns.stderr_noise < 0 or ns.ttl_ms < 0:
        raise ConfigError("--extra-tools, --stderr-noise and --ttl-ms must be >= 0")
    if ns.tasks_durable is not None:
        check_durable(ns.tasks_durable)
    return Config(
        era=ns.era,
        versions=versions,
        name=ns.name,
        server_version=ns.server_version,
        instructions=ns.instructions,
        page_size=ns.page_size,
        ttl_ms=ns.ttl_ms,
        cache_scope=ns.cache_scope,
        advertise_legacy=ns.advertise_legacy,
        extra_tools=ns.extra_tools,
        rules=rules,
        script_path=ns.script,
        log_path=ns.log,
        log_out=ns.log_out,
        stderr_noise=ns.stderr_noise,
        startup_delay=ns.startup_delay,
        ignore_eof=ns.ignore_eof,
        ignore_sigterm=ns.ignore_sigterm,
        fork_child=ns.fork_child,
        header_tools=ns.header_tools,
        flood_tools=ns.flood_tools,
        metadata=ns.metadata,
        skills=ns.skills,
        ask_roots=ns.ask_roots,
        no_logging=ns.no_logging,
        on_initialized=on_initialized,
        http=ns.http,
        port=ns.port,
        port_file=ns.port_file,
        http_response=ns.http_response,
        sse_retry_ms=ns.sse_retry_ms,
        end_get_streams=ns.end_get_streams,
        require_bearer=ns.require_bearer,
        require_oauth=ns.require_oauth,
        oauth_scope=ns.oauth_scope,
        tool_scopes=tool_scopes,
        prm_resource=ns.prm_resource,
        prm_scopes=prm_scopes,
        prm_at=ns.prm_at,
        introspection_url=ns.introspection_url,
        introspection_cert=(
            (ns.introspection_cert, ns.introspection_key or ns.introspection_cert)
            if ns.introspection_cert
            else None
        ),
        introspection_cache=ns.introspection_cache,
        require_dpop=ns.require_dpop,
        dpop_nonce=ns.dpop_nonce,
        no_resource_metadata_param=ns.no_resource_metadata_param,
        tls_cert=ns.tls_cert,
        tls_key=ns.tls_key,
        tls_client_ca=ns.tls_client_ca,
        tasks=not ns.no_tasks,
        tasks_durable=ns.tasks_durable,
        tasks_conformance=ns.tasks_conformance,
    )


def check_durable(path: str) -> None:
    """A ``--tasks-durable`` file must be readable task state (or not exist yet) in an
    existing directory: say so at start rather than at the first task."""
    from .task_state import TaskTable, TaskTableError

    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ConfigError(f"--tasks-durable: the directory {folder} does not exist")
    try:
        TaskTable(path)
    except TaskTableError as e:
        raise ConfigError(f"--tasks-durable: {e}") from None
