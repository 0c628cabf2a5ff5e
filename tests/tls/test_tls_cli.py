"""``conduit-mcp --url https://... --cacert FILE`` (docs/tls.md)."""

from __future__ import annotations

import io

import pytest

from conduit_mcp.cli import main

pytestmark = pytest.mark.timeout(60)


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_cacert_trusts_a_private_ca_and_its_absence_names_the_failure(certs, make_server):
    with make_server().http_server(**certs.good.server_options()) as srv:
        code, out, err = cli("tools", "--url", srv.url, "--cacert", certs.ca)
        assert code == 0, err
        assert any(line.startswith("add ") for line in out.splitlines())
        code, out, err = cli("tools", "--url", srv.url)
    assert code != 0
    assert "tls_failed" in err and "untrusted" in err and "--cacert" not in out
    assert "Traceback" not in err


def test_cacert_is_checked_and_is_for_http_only(certs, tmp_path):
    code, _, err = cli("tools", "--url", "https://127.0.0.1:9/mcp", "--cacert", str(tmp_path / "x"))
    assert code == 2 and "--cacert" in err and "cannot read the CA certificates" in err
    code, _, err = cli("tools", "--cacert", certs.ca, "--", "python", "-c", "pass")
    assert code == 2 and "--cacert" in err
