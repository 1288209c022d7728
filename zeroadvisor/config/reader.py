"""Read a config file into a Document: one place for the limits on what is read."""

from __future__ import annotations

import os
from pathlib import Path

from zeroadvisor.config.source import MAX_BYTES, Document, ParseError, decode_bytes, parse


class InputError(Exception):
    """The input cannot be read at all (missing, a directory, permission): exit code 2."""


def read_document(path: str | os.PathLike, display: str | None = None) -> Document:
    """Read and parse a config file; ParseError for bad content, InputError if unreadable."""
    name = display or str(path)
    file = Path(path)
    if file.is_dir():
        raise InputError(f"{name}: is a directory, not a config file")
    try:
        with file.open("rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except OSError as err:
        raise InputError(f"{name}: cannot read: {err.strerror or err}") from None
    if len(raw) > MAX_BYTES:
        size = file.stat().st_size
        raise ParseError(
            f"file is {size / 1e6:.1f} MB; a DeepSpeed config is a few KB (limit {MAX_BYTES // 1024} KiB)",
            line=1,
            column=1,
        )
    text = decode_bytes(raw)
    if file.suffix.lower() in (".yaml", ".yml"):
        from zeroadvisor.config.yaml_source import parse_yaml

        return parse_yaml(text, name)
    return parse(text, name)
