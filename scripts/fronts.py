"""Request methods written once, rendered into every front end that offers them.

conduit-mcp has three ways in: blocking (``Client``), asyncio (``client.aio``) and Pykka
futures (``client.futures``). Their request methods mean the same and differ only in how the
caller waits, so each is declared once, as a :class:`Method` (signature, the call that builds
and hands over its request, docstring), and rendered per front end by a
:class:`Flavor` (``def`` or ``async def``, the result wrapped or not, how ``on_progress`` is
typed, each front end's own line in the docstring). The rendered source is checked in, in a
marked region of each front end's class, so that ``mypy --strict``, the docs and
``inspect.signature`` see ordinary methods: nothing is built at run time.

A *family* is one set of methods and the front ends that carry them; the client's is
``scripts/fronts_client.py``. What a front end's hand-written part must provide is the
dispatch that the methods' ``body`` statements call (the client's: ``self._call(request,
timeout, on_progress)``, ``self._list_all(kind, timeout, refresh)``,
``self._await_ready(seconds)``), each returning the front end's own kind of answer (a value,
a coroutine's value, a ``pykka.Future``).

Adding a request method (to an existing family):
    1. Write its request builder in ``conduit_mcp/request.py`` (``rq.foo(...) -> Request[R]``).
    2. Add a ``Method(...)`` to the family's ``METHODS`` (e.g. ``scripts/fronts_client.py``):
       ``params`` as source, ``$progress`` where ``on_progress``'s type goes; ``result``
       unwrapped; ``body`` ending with one call; ``doc`` saying why, front-end neutral;
       ``raises``.
    3. Run ``.venv/bin/python scripts/gen_fronts.py`` and import any new result type in the
       front ends' hand-written imports (ruff and mypy name a missing one).

Adding a family of front ends (the Hub's ``hub``, ``hub.aio``, ``hub.futures``):
    1. In each target class, put an empty region where the methods go::

           # BEGIN GENERATED requests
           # END GENERATED requests

    2. Write ``scripts/fronts_<family>.py`` with ``FAMILY = Family(...)``: its methods (new
       ones, or a client method adapted with ``dataclasses.replace``, from
       ``fronts_client.BY_NAME``) and one
       ``Front(path, class, flavor)`` per target, using :data:`BLOCKING`, :data:`ASYNCIO`,
       :data:`FUTURES` (or a ``dataclasses.replace`` of one, for other wording).
    3. Give each target class the dispatch its bodies call, and name the module in
       ``FAMILIES`` in ``scripts/gen_fronts.py``. A body may differ by class through
       ``Front.names``: the Hub's routed call resolves its member in the caller, then sends
       through that member's matching front end::

           body='''
               found, tool = routing.tool(self._board, name)
               found.client$member.call_tool(tool, arguments, timeout=timeout)
           '''
           Front("conduit_mcp/hub/fronts.py", "AsyncHub", ASYNCIO, names={"member": ".aio"})

``scripts/gen_fronts.py --check`` (run by ``make lint``) fails, naming the file, when a region
is not what its family renders; without ``--check`` it rewrites the regions.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

#: Docstrings are wrapped to this width (ruff keeps code to 100; prose reads better a little short).
WIDTH = 96
#: A method's indentation, and its body's, inside a class.
METHOD_INDENT = " " * 4
BODY_INDENT = " " * 8


@dataclass(frozen=True)
class Method:
    """One request method, as every front end offers it."""

    name: str
    #: The parameters after ``self``, as source; ``$progress`` stands for ``on_progress``'s type.
    params: str
    #: The result type as the blocking front end returns it (a flavor may wrap it).
    result: str
    #: The work, through the front end's dispatch: statements whose last is one call (its
    #: value is returned, awaited on an asyncio front end). ``$name`` placeholders are
    #: filled from the flavor's ``types`` and the front's ``names``.
    body: str
    #: Why and what, front-end neutral; paragraphs separated by blank lines.
    doc: str
    #: The ``Raises:`` text after ``Error:``, front-end neutral.
    raises: str
    #: A sentence per flavor name, appended to the doc's last paragraph on that front end.
    notes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Flavor:
    """How one kind of front end waits, and what that changes in a method's text."""

    name: str
    #: ``async def`` and ``await`` of the body.
    asynchronous: bool
    #: The result type, ``{}`` standing for the method's own (e.g. ``pykka.Future[{}]``).
    result: str
    #: What each ``$name`` placeholder of ``Method.params`` becomes.
    types: Mapping[str, str]
    #: The ``Raises:`` text, ``{}`` standing for the method's own.
    raises: str
    #: A sentence per parameter name, appended to the doc of each method that has it.
    notes: Mapping[str, str] = field(default_factory=dict)


BLOCKING = Flavor(
    "blocking",
    asynchronous=False,
    result="{}",
    types={"progress": "Callable[[Progress], object] | None"},
    raises="{}",
    notes={
        "on_progress": "``on_progress`` runs in this thread for each progress notification; "
        "if it raises, the request is cancelled and the exception propagates."
    },
)

ASYNCIO = Flavor(
    "asyncio",
    asynchronous=True,
    result="{}",
    types={"progress": "Callable[[Progress], object] | None"},
    raises="{} Cancelling the awaiting task gives the call up "
    "(a request is cancelled at the server).",
    notes={
        "on_progress": "``on_progress`` runs on this loop for each progress notification "
        "(an exception it raises goes to the loop's exception handler)."
    },
)

FUTURES = Flavor(
    "futures",
    asynchronous=False,
    result="pykka.Future[{}]",
    types={"progress": "pykka.ActorRef[Any] | None"},
    raises="at once ``argument`` or ``closed``; from ``get()``: {}",
    notes={
        "on_progress": "``on_progress`` is a ``pykka.ActorRef``, told "
        '``("conduit_mcp.progress", request_id, params)`` for each progress notification.'
    },
)


@dataclass(frozen=True)
class Front:
    """One front-end class that carries a family's methods, in a region of its source."""

    #: The source file, relative to the repository's root.
    path: str
    #: The class whose body holds the region.
    cls: str
    flavor: Flavor
    #: The region's name in its ``# BEGIN GENERATED <region>`` / ``# END GENERATED`` markers.
    region: str = "requests"
    #: What each ``$name`` placeholder of a method's ``body`` becomes in this class (e.g. the
    #: Hub's ``$member``: ``""``, ``".aio"``, ``".futures"`` after a member's client).
    names: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Family:
    """A set of methods and the front ends that carry them all."""

    #: The spec module's path, named in the generated header.
    spec: str
    methods: Sequence[Method]
    fronts: Sequence[Front]


class GenerationError(Exception):
    """A front end's file cannot take its region or a spec cannot be rendered."""


# -- rendering ----------------------------------------------------------------------------------


def _paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in textwrap.dedent(text).strip().split("\n\n")]


def _params(method: Method, flavor: Flavor) -> tuple[str, set[str]]:
    """The method's parameters on this front end, as source and as names (checked: a spec
    mistake is named here, not as a syntax error in a front end)."""
    try:
        params = Template(" ".join(method.params.split())).substitute(flavor.types)
        fn = ast.parse(f"def f(self, {params}): pass").body[0]
    except (KeyError, ValueError, SyntaxError) as exc:
        raise GenerationError(f"{method.name}: bad params for {flavor.name}: {exc}") from None
    assert isinstance(fn, ast.FunctionDef)
    args = fn.args
    return params, {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}


_NBSP = "\x00"


def _fill(text: str, **kwargs: Any) -> list[str]:
    """``text`` wrapped to the docstring width, never inside a ````literal````."""
    parts = text.split("``")
    kept = "``".join(p.replace(" ", _NBSP) if i % 2 else p for i, p in enumerate(parts))
    wrapped = textwrap.fill(
        kept,
        width=WIDTH - len(BODY_INDENT),
        break_on_hyphens=False,
        break_long_words=False,
        **kwargs,
    )
    return wrapped.replace(_NBSP, " ").splitlines()


def docstring(method: Method, flavor: Flavor) -> str:
    """The method's docstring on this front end, wrapped and indented as in a class."""
    paragraphs = _paragraphs(method.doc)
    _, names = _params(method, flavor)
    extra = [note for param, note in flavor.notes.items() if param in names]
    if flavor.name in method.notes:
        extra.append(" ".join(method.notes[flavor.name].split()))
    if extra:
        paragraphs[-1] = " ".join([paragraphs[-1], *extra])
    lines: list[str] = []
    for i, paragraph in enumerate(paragraphs):
        if i:
            lines.append("")
        first = '"""' if i == 0 else ""
        lines += _fill(paragraph, initial_indent=first)
    raises = " ".join(flavor.raises.format(" ".join(method.raises.split())).split())
    lines += ["", "Raises:"]
    lines += _fill(f"Error: {raises}", initial_indent="    ", subsequent_indent="        ")
    lines.append('"""')
    return "\n".join(BODY_INDENT + line if line else "" for line in lines)


def _body(method: Method, front: Front) -> list[str]:
    """The method's statements on this front end, the last one returning (and awaiting) the
    call's value; line breaks and comments kept (``ruff format`` lays them out)."""
    flavor = front.flavor
    try:
        text = Template(textwrap.dedent(method.body).strip()).substitute(
            {**flavor.types, **front.names}
        )
        statements = ast.parse(text).body
    except (KeyError, ValueError, SyntaxError) as exc:
        raise GenerationError(f"{method.name}: bad body for {front.cls}: {exc}") from None
    last = statements[-1] if statements else None
    if not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)):
        raise GenerationError(f"{method.name}: a body must end with a call (its result)")
    lines = text.splitlines()
    i, col = last.lineno - 1, last.col_offset
    call = lines[i][col:]
    if flavor.asynchronous:
        call = f"await {call}"
    # A method of no value on a front end that does not wrap it just runs its body.
    if flavor.result.format(method.result) != "None":
        call = f"return {call}"
    lines[i] = lines[i][:col] + call
    return lines


def render_method(method: Method, front: Front) -> str:
    """One method's source on this front end (before ``ruff format``)."""
    flavor = front.flavor
    params, _ = _params(method, flavor)
    result = flavor.result.format(method.result)
    keyword = "async def" if flavor.asynchronous else "def"
    body = "".join(
        f"{BODY_INDENT}{line}\n" if line.strip() else "\n" for line in _body(method, front)
    )
    return (
        f"{METHOD_INDENT}{keyword} {method.name}(self, {params}) -> {result}:\n"
        f"{docstring(method, flavor)}\n"
        f"{body}"
    )


def header(family: Family) -> str:
    """The comment that opens every region: where its text comes from, and how to change it."""
    classes = [f.cls for f in family.fronts]
    names = ", ".join(classes[:-1]) + f" and {classes[-1]}" if len(classes) > 1 else classes[0]
    lines = textwrap.wrap(
        f"Generated by scripts/gen_fronts.py from {family.spec}, the one source of these "
        f'methods in {names} (docs/architecture.md, "Adding a request method"). Do not '
        "edit: change the spec and run "
        "`.venv/bin/python scripts/gen_fronts.py` (`make lint` fails while this is stale).",
        width=WIDTH - len(METHOD_INDENT) - 2,
    )
    return "".join(f"{METHOD_INDENT}# {line}\n" for line in lines)


def render_region(family: Family, front: Front) -> str:
    """What goes between the region's markers."""
    methods = "\n".join(render_method(m, front) for m in family.methods)
    return header(family) + "\n" + methods


# -- the regions in the files -------------------------------------------------------------------


def _markers(front: Front) -> tuple[str, str]:
    return f"# BEGIN GENERATED {front.region}", f"# END GENERATED {front.region}"


def splice(source: str, family: Family, front: Front) -> str:
    """``source`` with the front's region replaced by what the family renders. The markers
    are looked for in the class's own lines, so one file may hold several front ends."""
    begin, end = _markers(front)
    lines = source.splitlines(keepends=True)
    first, last = _class_lines(source, front)
    starts = [i for i in range(first, last) if lines[i].strip() == begin]
    ends = [i for i in range(first, last) if lines[i].strip() == end]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise GenerationError(
            f"{front.path}: class {front.cls} needs exactly one '{begin}' line and, after it, "
            f"one '{end}' line (found {len(starts)} and {len(ends)})"
        )
    start, stop = starts[0], ends[0]
    indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
    if indent != METHOD_INDENT:
        raise GenerationError(f"{front.path}: '{begin}' must be indented as a method of the class")
    region = render_region(family, front)
    spliced = "".join([*lines[: start + 1], region, *lines[stop:]])
    _check_defined_once(spliced, family, front)
    return spliced


def _class_lines(source: str, front: Front) -> tuple[int, int]:
    """The 0-based line range of the class: from its ``class`` line to the next top-level
    statement (a region at the class's end is comments only, outside the class's node until
    it is filled)."""
    body = ast.parse(source, front.path).body
    for i, node in enumerate(body):
        if isinstance(node, ast.ClassDef) and node.name == front.cls:
            following = body[i + 1] if i + 1 < len(body) else None
            if following is None:
                return node.lineno, len(source.splitlines())
            # The next statement starts at its first decorator, if it has any.
            top = min([following.lineno, *(d.lineno for d in _decorators(following))])
            return node.lineno, top - 1
    raise GenerationError(f"{front.path}: no top-level class {front.cls}")


def _decorators(node: ast.stmt) -> list[ast.expr]:
    if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        return list(node.decorator_list)
    return []


def _check_defined_once(source: str, family: Family, front: Front) -> None:
    """No hand-written method of the class shadows or is shadowed by a generated one."""
    for node in ast.parse(source, front.path).body:
        if isinstance(node, ast.ClassDef) and node.name == front.cls:
            functions = (ast.FunctionDef, ast.AsyncFunctionDef)
            defined = [n.name for n in node.body if isinstance(n, functions)]
            twice = sorted({m.name for m in family.methods if defined.count(m.name) > 1})
            if twice:
                raise GenerationError(
                    f"{front.path}: {front.cls} also defines {', '.join(twice)} by hand "
                    "(a generated method is defined in the spec only)"
                )


def ruff_format(source: str, path: Path, root: Path) -> str:
    """``source`` as ``ruff format`` (with the project's settings) writes it."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(path), "-"],
        input=source,
        capture_output=True,
        text=True,
        cwd=root,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise GenerationError(f"{path}: ruff format failed:\n{done.stderr.strip()}")
    return done.stdout


def generate(families: Sequence[Family], root: Path, *, check: bool) -> list[str]:
    """Render every family into its fronts' files under ``root``; the paths that were stale
    (rewritten, unless ``check``)."""
    stale: list[str] = []
    texts: dict[str, str] = {}
    for family in families:
        for front in family.fronts:
            path = root / front.path
            before = texts.get(front.path)
            if before is None:
                try:
                    before = path.read_text(encoding="utf-8")
                except OSError as exc:
                    raise GenerationError(f"{front.path}: {exc.strerror}") from None
            texts[front.path] = splice(before, family, front)
    for rel, text in texts.items():
        path = root / rel
        after = ruff_format(text, path, root)
        if after != path.read_text(encoding="utf-8"):
            stale.append(rel)
            if not check:
                path.write_text(after, encoding="utf-8")
    return stale
