"""The developer install is one type checkers see: mypy on a user's script outside the
repository, against this venv (``make venv`` installs conduit-mcp editable).

A flat-layout editable install gets setuptools' import hook, which mypy never runs: it then
reports ``conduit_mcp`` missing and types every result ``Any``, so a user's type errors go
unreported. pyproject.toml's ``package-dir`` makes it a plain path (a ``.pth`` line) instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import conduit_mcp

SCRIPT = textwrap.dedent(
    """\
    import conduit_mcp


    def use(client: conduit_mcp.Client) -> int:
        result = client.call_tool("echo", {"text": "hi"})
        reveal_type(result)
        return result.content  # the deliberate error: a tuple is not an int
    """
)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_mypy_on_a_users_script_sees_conduit_mcp_types(tmp_path: Path) -> None:
    repo = Path(conduit_mcp.__file__).resolve().parent.parent
    assert not tmp_path.resolve().is_relative_to(repo)  # outside: no project config applies
    script = tmp_path / "user_script.py"
    script.write_text(SCRIPT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--no-error-summary", script.name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=200,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "import-not-found" not in out and "Cannot find implementation" not in out, out
    assert 'Revealed type is "conduit_mcp.types.CallToolResult"' in out, out
    error = 'user_script.py:7: error: Incompatible return value type (got "tuple['
    assert error in out and 'expected "int")  [return-value]' in out, out
