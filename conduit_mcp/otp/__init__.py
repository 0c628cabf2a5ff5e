"""The generic actor runtime on Pykka: a safe actor base, a timer service, gen_statem and an OTP supervisor.

This package is deliberately not MCP-aware: it imports nothing of conduit_mcp but
``errors`` (a test enforces it). Pykka supplies only the actor core; these are the layers it
lacks, with OTP's vocabulary. The Pykka internals it needs are named in one private module. Every conduit
actor is a :class:`SafeActor` started with a :class:`Link` by a :class:`Supervisor`.
"""

from conduit_mcp.otp.base import ActorCrashed, Link, SafeActor, safe_tell
from conduit_mcp.otp.pooled import PooledActor, stop_here
from conduit_mcp.otp.registry import Registry
from conduit_mcp.otp.statem import (
    Action,
    NextEvent,
    Postpone,
    Statem,
    StateTimeout,
    Step,
    Stop,
    Timeout,
)
from conduit_mcp.otp.supervisor import (
    ChildExited,
    ChildSpec,
    StartChild,
    Supervisor,
    WhichChildren,
    child_spec_for,
)
from conduit_mcp.otp.timers import TimerHandle, schedule

__all__ = [
    "Action",
    "ActorCrashed",
    "ChildExited",
    "ChildSpec",
    "Link",
    "NextEvent",
    "PooledActor",
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
    "stop_here",
]
