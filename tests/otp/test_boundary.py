"""conduit_mcp.otp is the generic runtime: it must not know about MCP."""

from __future__ import annotations

import ast
from pathlib import Path

import conduit_mcp.otp

ALLOWED = {"conduit_mcp.errors"}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against conduit_mcp.otp
                base = ["conduit_mcp", "otp"][: 2 - (node.level - 1)]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            found.add(name)
    return found


def test_the_runtime_imports_nothing_of_the_client_but_errors() -> None:
    root = Path(conduit_mcp.otp.__file__).parent
    offenders = {
        f"{path.name}: {name}"
        for path in root.glob("*.py")
        for name in _imports(path)
        if name.startswith("conduit_mcp")
        and not name.startswith("conduit_mcp.otp")
        and name not in ALLOWED
    }
    assert not offenders, f"conduit_mcp.otp must stay MCP-unaware: {sorted(offenders)}"
