"""The client actors' tests share the runtime tests' fixtures (``tests/otp/conftest.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "otp_fixtures", Path(__file__).resolve().parents[1] / "otp" / "conftest.py"
)
assert _spec is not None and _spec.loader is not None
_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fixtures)

Events = _fixtures.Events
events = _fixtures.events
exits = _fixtures.exits
link = _fixtures.link
_stop_all_actors = _fixtures._stop_all_actors
