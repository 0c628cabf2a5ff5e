"""docs/tls.md's example runs, as written: against the scripted server over TLS on a
private CA (``url``) and one that requires a client certificate (``mtls_url``), with
``ca.pem``, ``client.pem`` and ``client.key`` in the working folder, in a fresh
interpreter with a deadline."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(90)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tls.md"
_BLOCK = re.compile(r"<!--\s*docs-test:\s*setup=tls.*?-->\s*\n```python\n(.*?)^```", re.S | re.M)


def test_the_example_of_the_tls_page_runs(certs, make_server, tmp_path):
    blocks = _BLOCK.findall(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) == 1, "docs/tls.md has lost its tested example"
    for source, name in ((certs.ca, "ca.pem"), (certs.client.cert, "client.pem")):
        shutil.copy(source, tmp_path / name)
    shutil.copy(certs.client.key, tmp_path / "client.key")
    with (
        make_server().http_server(**certs.good.server_options()) as srv,
        make_server().http_server(**certs.good.server_options(certs.ca)) as mtls,
    ):
        prelude = f"url = {srv.url!r}\nmtls_url = {mtls.url!r}\n"
        done = subprocess.run(
            [sys.executable, "-c", prelude + blocks[0]],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "5"]
