"""The layering rules, stated once: what each folder of ``conduit_mcp/`` may import.

Every ``import`` and ``from ... import`` in the folder is read with ``ast`` (module level and
inside functions alike; relative imports resolved), so a new upward arrow fails here with the
file, the import and the rule. docs/architecture.md ("Layers") mirrors this table.
"""

from __future__ import annotations

import ast
from pathlib import Path

import conduit_mcp

ROOT = Path(conduit_mcp.__file__).parent
FRONT_ENDS = frozenset({"client", "aio", "futures"})
TOP = frozenset({"cli", "testing"})  # the two users of the whole library

# folder -> ("only", what it may import besides itself) or ("never", what it may not import).
# Names are the first part after ``conduit_mcp.``: a folder or a top-level module.
RULES: dict[str, tuple[str, frozenset[str]]] = {
    # pure rules: the error type, the version, the value types and the Handler's shape
    "protocol": ("only", frozenset({"errors", "_version", "types", "handler", "handler_types"})),
    # the generic runtime knows nothing of MCP
    "otp": ("only", frozenset({"errors"})),
    # OAuth's pure helpers and its HTTP: protocol's rules, never a transport or an actor
    "oauth": ("only", frozenset({"errors", "protocol"})),
    # spans and metrics name protocol values only
    "telemetry": ("only", frozenset({"errors", "protocol"})),
    # I/O below the actors: never an actor or a front end
    "transports": ("never", frozenset({"actors", *FRONT_ENDS, *TOP})),
    # the client's actors serve every front end and know none of them
    "actors": ("never", frozenset({*FRONT_ENDS, *TOP})),
    # the scripted servers may use anything public (no private module)
    "testing": ("never", frozenset({"cli"})),
    # the command line is a user of the whole library
    "cli": ("never", frozenset()),
    # the Hub is a user of the client's public API and runtime, never of the CLI
    "hub": ("never", frozenset({"cli", "testing"})),
    # hub members on remote hosts: a user of the Hub, never of the CLI or the test servers
    "cluster": ("never", frozenset({"cli", "testing"})),
}


def _imports(root: Path, path: Path) -> list[tuple[int, str]]:
    """Each conduit_mcp module a file imports (absolute name) with its line."""
    package = ["conduit_mcp", *path.relative_to(root).parts[:-1]]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                if node.module:
                    found.append((node.lineno, ".".join([*base, node.module])))
                else:  # from . import x: x is a module or a name of the package
                    found.extend((node.lineno, ".".join([*base, a.name])) for a in node.names)
            elif node.module:
                found.append((node.lineno, node.module))
    return [(line, name) for line, name in found if name.split(".")[0] == "conduit_mcp"]


# testing/'s subpackages, bottom up: what each may import of testing/ besides itself (the rest
# of the library as the "testing" rule above says). One direction only, so no circle can form;
# the package's own modules (``__init__``: ScriptedServer, ``__main__``: the choice of front,
# ``waiting``) sit above them all and no subpackage imports them.
TESTING_RULES: dict[str, frozenset[str]] = {
    # what both test servers share: the subprocess handle, TLS, split bodies, the event log
    "common": frozenset(),
    # the scripted MCP server: its protocol core and its stdio front
    "scripted": frozenset({"common"}),
    # its Streamable HTTP front (and the handle on that subprocess)
    "http": frozenset({"common", "scripted"}),
    # the test authorization server: nothing of the MCP server
    "auth": frozenset({"common"}),
    # the raw drivers, below the client (the HTTP one encodes headers as the front checks them)
    "raw": frozenset({"http"}),
}


def _testing_offences(root: Path = ROOT) -> list[str]:
    offences = []
    for sub, allowed in TESTING_RULES.items():
        for path in sorted((root / "testing" / sub).rglob("*.py")):
            for line, name in _imports(root, path):
                parts = name.split(".")
                if parts[:2] != ["conduit_mcp", "testing"]:
                    continue
                target = parts[2] if len(parts) > 2 else ""
                if target != sub and target not in allowed:
                    rule = f"testing/{sub}/ imports only {sorted(allowed)} of testing/"
                    offences.append(f"{path.relative_to(root.parent)}:{line}: {name} ({rule})")
    return offences


def _offences(folder: str, root: Path = ROOT) -> list[str]:
    kind, names = RULES[folder]
    offences = []
    for path in sorted((root / folder).rglob("*.py")):
        for line, name in _imports(root, path):
            parts = name.split(".")
            target = parts[1] if len(parts) > 1 else ""
            if target == folder:
                continue
            private = any(p.startswith("_") and p != "_version" for p in parts[1:])
            if kind == "only":
                bad = target not in names
                rule = f"{folder}/ imports only {sorted(names)}"
            else:
                bad = target in names or (folder == "testing" and private)
                rule = f"{folder}/ never imports {sorted(names)}" + (
                    " nor a private module" if folder == "testing" else ""
                )
            if bad:
                offences.append(f"{path.relative_to(root.parent)}:{line}: {name} ({rule})")
    return offences


def test_every_folder_has_a_rule():
    folders = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    assert folders == set(RULES)


def test_no_folder_imports_upward():
    offences = [o for folder in RULES for o in _offences(folder)]
    assert offences == [], "an upward import:\n" + "\n".join(offences)


def test_testing_subpackages_import_one_way():
    subs = {p.name for p in (ROOT / "testing").iterdir() if (p / "__init__.py").exists()}
    assert subs == set(TESTING_RULES)
    offences = _testing_offences()
    assert offences == [], "testing/ imports against its order:\n" + "\n".join(offences)


def test_testing_modules_import_no_private_name():
    """A name another module needs is public in its module (no ``from .catalog import _x``)."""
    offences = []
    for path in sorted((ROOT / "testing").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level:
                offences += [
                    f"{path.relative_to(ROOT.parent)}:{node.lineno}: {a.name}"
                    for a in node.names
                    if a.name.startswith("_")
                ]
    assert offences == [], "a private name imported across modules:\n" + "\n".join(offences)


def test_a_testing_circle_is_caught(tmp_path: Path) -> None:
    """The check itself can fail: the stdio front reaching up to the HTTP front, and a
    subpackage importing the package above it."""
    fake = tmp_path / "conduit_mcp"
    for sub in TESTING_RULES:
        (fake / "testing" / sub).mkdir(parents=True)
    (fake / "testing" / "scripted" / "stdio.py").write_text(
        "def main():\n    from ..http.front import serve_http\n"
    )
    (fake / "testing" / "auth" / "process.py").write_text("from .. import ScriptedServer\n")
    assert _testing_offences(fake) == [
        "conduit_mcp/testing/scripted/stdio.py:2: conduit_mcp.testing.http.front "
        "(testing/scripted/ imports only ['common'] of testing/)",
        "conduit_mcp/testing/auth/process.py:1: conduit_mcp.testing.ScriptedServer "
        "(testing/auth/ imports only ['common'] of testing/)",
    ]


def test_an_upward_import_is_caught(tmp_path: Path) -> None:
    """The check itself can fail: a protocol module importing a transport in a function."""
    fake = tmp_path / "conduit_mcp"
    (fake / "protocol").mkdir(parents=True)
    (fake / "protocol" / "bad.py").write_text(
        "def f():\n    from ..transports.http_spec import Http\n"
    )
    assert _offences("protocol", fake) == [
        "conduit_mcp/protocol/bad.py:2: conduit_mcp.transports.http_spec "
        f"(protocol/ imports only {sorted(RULES['protocol'][1])})"
    ]


def test_docs_architecture_mirrors_the_table():
    import re

    text = (ROOT.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(\w+)/` +\| (.*) \|$", text, re.MULTILINE))
    assert set(rows) == set(RULES), "docs/architecture.md's layer table names other folders"
    for folder, (kind, names) in RULES.items():
        row = rows[folder]
        assert set(re.findall(r"`(\w+)`", row)) == set(names), (folder, row)
        assert row.startswith("only" if kind == "only" else ("never", "anything")), (folder, row)


def test_docs_architecture_mirrors_the_testing_table():
    import re

    text = (ROOT.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `testing/(\w+)/` +\|[^|]*\| (.*?) *\|$", text, re.MULTILINE))
    assert set(rows) == set(TESTING_RULES), "docs/architecture.md's testing table differs"
    for sub, allowed in TESTING_RULES.items():
        assert set(re.findall(r"`(\w+)`", rows[sub])) == set(allowed), (sub, rows[sub])
