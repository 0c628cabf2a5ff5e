"""The actor runtime: a safe actor base, a timer service, gen_statem and an OTP supervisor.

Pykka supplies only the actor core (stack.md §0); these are the layers it lacks. Every conduit
actor is a :class:`SafeActor` started with a :class:`Link` by a :class:`Supervisor`.
"""

from conduit_mcp.actors.base import ActorCrashed, Link, SafeActor, safe_tell
from conduit_mcp.actors.registry import Registry
from conduit_mcp.actors.statem import (
    Action,
    NextEvent,
    Postpone,
    Statem,
    StateTimeout,
    Step,
    Stop,
    Timeout,
)
from conduit_mcp.actors.supervisor import (
    ChildExited,
    ChildSpec,
    StartChild,
    Supervisor,
    WhichChildren,
    child_spec_for,
)
from conduit_mcp.actors.timers import TimerHandle, schedule

__all__ = [
    "Action",
    "ActorCrashed",
    "ChildExited",
    "ChildSpec",
    "Link",
    "NextEvent",
    "Postpone",
    "Registry",
    "SafeActor",
    "StartChild",
    "StateTimeout",
    "Statem",
    "Step",
    "Stop",
    "Supervisor",
    "Timeout",
    "TimerHandle",
    "WhichChildren",
    "child_spec_for",
    "safe_tell",
    "schedule",
]
