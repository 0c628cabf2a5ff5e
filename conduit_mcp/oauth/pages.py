"""What the loopback listener's page tells the person whose browser brought the redirect back:
pure, no I/O. The page must say what happened (received, refused, an error) and what to do,
never "received" for a refusal; it never repeats anything of the redirect but a registered
OAuth error code (RFC 6749 section 4.1.2.1: ``error`` on an authorization response).
"""

from __future__ import annotations

from collections.abc import Mapping

from .records import safe_code

__all__ = ["redirect_page"]

_AGAIN = "To try again, have the application connect again (for a developer: client.reconnect())."


def redirect_page(params: Mapping[str, str]) -> tuple[int, str]:
    """The HTTP status and plain text for a redirect with these query ``params``.

    >>> redirect_page({"code": "c", "state": "s"})[1]
    'The authorization was received; you can close this window.'
    >>> status, text = redirect_page({"error": "access_denied", "state": "s"})
    >>> status, text.split(".")[0]
    (200, 'The authorization was refused (access_denied): the application was not given access')
    >>> redirect_page({"error": "<script>"})[1].split(":")[0]
    'The authorization server answered with an error (an unregistered error code)'
    >>> redirect_page({})[0]
    400
    """
    error = params.get("error")
    if error == "access_denied":
        return 200, (
            "The authorization was refused (access_denied): the application was not given "
            f"access. You can close this window. {_AGAIN}"
        )
    if error is not None:
        shown = safe_code(error) or "an unregistered error code"
        return 200, (
            f"The authorization server answered with an error ({shown}): the authorization "
            "did not complete, and the application reports why. You can close this window. "
            f"{_AGAIN}"
        )
    if params.get("code"):
        return 200, "The authorization was received; you can close this window."
    return 400, (
        "This is not an authorization answer (it carries neither a code nor an error). The "
        "authorization still waits: finish it in the window the application opened."
    )
