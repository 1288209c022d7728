"""Expand the PATH arguments of ``lint``: files, directories and glob patterns."""

from __future__ import annotations

import glob
import os
from pathlib import Path

# Extensions collected when a directory is given (explicit files may have any extension).
CONFIG_SUFFIXES = (".json", ".hjson")
_GLOB_CHARS = set("*?[")


class PathError(Exception):
    """A PATH that names nothing: exit code 2."""


def expand(arguments: list[str]) -> list[str]:
    """Every file to lint, in argument order, each once."""
    out: list[str] = []
    for argument in arguments:
        if os.path.isdir(argument):
            found = sorted(str(p) for p in Path(argument).rglob("*")
                           if p.suffix.lower() in CONFIG_SUFFIXES and p.is_file())
            if not found:
                raise PathError(f"{argument}: directory has no {'/'.join(CONFIG_SUFFIXES)} files")
            out.extend(found)
        elif _GLOB_CHARS & set(argument) and not os.path.exists(argument):
            found = sorted(p for p in glob.glob(argument, recursive=True) if os.path.isfile(p))
            if not found:
                raise PathError(f"{argument}: pattern matches no files")
            out.extend(found)
        else:
            out.append(argument)  # missing files are reported per file by the linter
    return list(dict.fromkeys(out))
