"""docs/sse.md's examples run, as written, in a fresh interpreter with a deadline, against
tests/sse/sse_server.py (``url``: its stream; it requires the examples' bearer token)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from .sse_server import SseServer

pytestmark = pytest.mark.timeout(60)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "sse.md"
_BLOCK = re.compile(r"<!--\s*docs-test:\s*setup=sse.*?-->\s*\n```python\n(.*?)^```", re.S | re.M)


def test_the_examples_of_the_sse_page_run() -> None:
    blocks = _BLOCK.findall(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) == 2, "docs/sse.md has lost a tested example"
    server = SseServer(token="my-token")
    try:
        outputs = []
        for block in blocks:
            done = subprocess.run(
                [sys.executable, "-c", f"url = {server.url!r}\n" + block],
                capture_output=True,
                text=True,
                timeout=45,
            )
            assert done.returncode == 0, done.stderr
            outputs.append(done.stdout.split())
    finally:
        server.stop()
    assert outputs == [["legacy", "2025-11-25", "3", "2024-11-05"], ["legacy", "5"]]
    assert server.streams == 3
