"""The remote hub's routed calls (``cluster.hub(tenant, config)``): the Hub's own methods,
from ``scripts/fronts_hub.py``, with the same parameters and docs, and a body that sends the
call to the host that holds its server as plain data (``self._call(op, args, on_progress)``,
``conduit_mcp.cluster.remote``). Rendered into ``RemoteHub``, ``AsyncRemoteHub`` and
``FutureRemoteHub`` by ``scripts/gen_fronts.py``.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from string import Template

from fronts import ASYNCIO, BLOCKING, FUTURES, Family, Front, Method
from fronts_hub import METHODS as HUB_METHODS
from fronts_hub import ROUTED_RAISES

CLUSTER_RAISES = (
    ROUTED_RAISES.rstrip(".")
    + """; ``unavailable``/``host_lost`` when the host's process died with the call in
    flight (it may have run: never sent again), ``unavailable``/``host_down`` when the host
    will not come back; ``argument`` for an argument that cannot cross to a host (only JSON
    values do)."""
)


def _names(method: Method) -> list[str]:
    params = Template(" ".join(method.params.split())).substitute(progress="object")
    fn = ast.parse(f"def f(self, {params}): pass").body[0]
    assert isinstance(fn, ast.FunctionDef)
    args = fn.args
    return [a.arg for a in [*args.args, *args.kwonlyargs] if a.arg != "self"]


def remote(method: Method) -> Method:
    """The Hub's method with a body that sends it to its host."""
    names = _names(method)
    plain = ", ".join(f'"{n}": {n}' for n in names if n != "on_progress")
    progress = "on_progress" if "on_progress" in names else "None"
    return replace(
        method,
        body=(
            f'cast("${{open}}{method.result}${{close}}", '
            f'self._call("{method.name}", {{{plain}}}, {progress}))'
        ),
        raises=CLUSTER_RAISES,
    )


METHODS = [remote(m) for m in HUB_METHODS]

REMOTE_FUTURES = replace(
    FUTURES,
    raises="at once ``argument`` (a value that cannot cross) or ``closed``; from ``get()``: {}",
)

FAMILY = Family(
    spec="scripts/fronts_cluster.py",
    methods=METHODS,
    fronts=[
        Front(
            "conduit_mcp/cluster/remote.py",
            "RemoteHub",
            BLOCKING,
            names={"open": "", "close": ""},
        ),
        Front(
            "conduit_mcp/cluster/remote.py",
            "AsyncRemoteHub",
            ASYNCIO,
            names={"open": "Awaitable[", "close": "]"},
        ),
        Front(
            "conduit_mcp/cluster/remote.py",
            "FutureRemoteHub",
            REMOTE_FUTURES,
            names={"open": "pykka.Future[", "close": "]"},
        ),
    ],
)
