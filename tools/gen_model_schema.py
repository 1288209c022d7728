#!/usr/bin/env python3
"""Write model.schema.json (zeroadvisor/schemas/ and the published schemas/) from zeroadvisor.model.description.FIELDS.

The model-description schema is generated from the same table the loader checks against,
so the two cannot drift: `python tools/gen_model_schema.py` rewrites both copies
(tools/published_schemas.py), and `python tools/gen_model_schema.py --check` exits 1
(printing what differs) when a committed copy is not what the table generates.
tests/test_model_description.py runs the check too.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

sys.path.insert(0, str(REPO / "tools"))

import published_schemas  # noqa: E402  (needs tools/ on sys.path)
from zeroadvisor.model.description import SCHEMA_FILE, json_schema  # noqa: E402


def render() -> str:
    """The schema file's exact text (stable key order, two-space indent, final newline), with the ``$id``
    it is published at."""
    schema = json_schema()
    schema = {"$schema": schema.pop("$schema"), "$id": published_schemas.schema_id(SCHEMA_FILE), **schema}
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is stale")
    parser.add_argument("--output", type=Path, default=None,
                        help="one file to write or check instead of both copies (zeroadvisor/schemas/, schemas/)")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        stale = ([] if _current(args.output) == text else [args.output]) if args.output else \
            published_schemas.stale(SCHEMA_FILE, text)
        for path in stale:
            diff = difflib.unified_diff(
                _current(path).splitlines(keepends=True),
                text.splitlines(keepends=True),
                fromfile=f"{path} (committed)",
                tofile=f"{path} (generated)",
            )
            sys.stderr.write("".join(diff))
            sys.stderr.write(f"{path} is stale: run python tools/gen_model_schema.py\n")
        return 1 if stale else 0
    if args.output:
        args.output.write_text(text, "utf-8")
    else:
        published_schemas.write(SCHEMA_FILE, text)
    return 0


def _current(path: Path) -> str:
    return path.read_text("utf-8") if path.is_file() else ""


if __name__ == "__main__":
    sys.exit(main())
