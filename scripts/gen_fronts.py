"""Write the front ends' generated request methods, or, with ``--check``, fail when one is stale.

    .venv/bin/python scripts/gen_fronts.py           # rewrite the generated regions
    .venv/bin/python scripts/gen_fronts.py --check   # make lint: exit 1 naming stale files

Each family (a spec module beside this script) declares its methods once and the front ends
that carry them; ``scripts/fronts.py`` says how, and how to add a method or a family.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:  # the spec modules import fronts, beside this file
    sys.path.insert(0, str(HERE))

from fronts import Family, GenerationError, generate  # noqa: E402

#: The spec modules, each with a ``FAMILY``.
FAMILIES = ["fronts_client", "fronts_hub", "fronts_cluster"]


def families() -> list[Family]:
    return [importlib.import_module(name).FAMILY for name in FAMILIES]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if a file is stale"
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (this one)")
    args = parser.parse_args(argv)
    try:
        stale = generate(families(), args.root, check=args.check)
    except GenerationError as exc:
        print(f"gen_fronts: {exc}", file=sys.stderr)
        return 2
    if args.check and stale:
        print(
            "gen_fronts: generated request methods are stale in "
            + ", ".join(stale)
            + " (edit the spec, not the region; run .venv/bin/python scripts/gen_fronts.py)",
            file=sys.stderr,
        )
        return 1
    for path in stale:
        print(f"gen_fronts: rewrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
