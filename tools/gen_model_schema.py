#!/usr/bin/env python3
"""Write zeroadvisor/schemas/model.schema.json from zeroadvisor.model.description.FIELDS.

The model-description schema is generated from the same table the loader checks against,
so the two cannot drift: `python tools/gen_model_schema.py` rewrites the file, and
`python tools/gen_model_schema.py --check` exits 1 (printing what differs) when the
committed file is not what the table generates. tests/test_model_description.py runs the
check too.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from zeroadvisor.model.description import SCHEMA_FILE, json_schema  # noqa: E402

TARGET = REPO / "zeroadvisor" / "schemas" / SCHEMA_FILE


def render() -> str:
    """The schema file's exact text (stable key order, two-space indent, final newline)."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is stale")
    parser.add_argument("--output", type=Path, default=TARGET, help=f"default: {TARGET.relative_to(REPO)}")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text("utf-8") if args.output.is_file() else ""
        if current == text:
            return 0
        diff = difflib.unified_diff(
            current.splitlines(keepends=True),
            text.splitlines(keepends=True),
            fromfile=f"{args.output} (committed)",
            tofile=f"{args.output} (generated)",
        )
        sys.stderr.write("".join(diff))
        sys.stderr.write(f"{args.output} is stale: run python tools/gen_model_schema.py\n")
        return 1
    args.output.write_text(text, "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
