"""Read a config into a Document: one place for how files are opened and the limits on them.

Two kinds of failure, kept apart because callers treat them differently:

* :class:`InputError` (and its subclasses): nothing could be read at all (no such file, a
  directory, a FIFO or device, no permission). The CLI counts such a file as not checked.
* :class:`~zeroadvisor.config.source.ParseError`: the bytes were read but are not a config
  DeepSpeed could load (too large, not UTF-8, bad syntax). That is a finding, with a position.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

from zeroadvisor.config.limits import MAX_CONFIG_BYTES
from zeroadvisor.config.source import Document, ParseError, decode_bytes, parse

YAML_SUFFIXES = (".yaml", ".yml")
STDIN_NAME = "<stdin>"


class InputError(Exception):
    """The input cannot be read at all: exit code 2. ``str()`` is ``"<name>: <reason>"``."""

    def __init__(self, name: str, reason: str):
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason


class MissingInput(InputError):
    """No such file (or a dangling symlink)."""


class NotAFile(InputError):
    """A directory, FIFO, socket or device: reading it could block or means nothing."""


class UnreadableInput(InputError):
    """The file exists but the system refuses to read it (permission, I/O error)."""


# What a non-regular file is, for the message.
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _require_regular(mode: int, name: str) -> None:
    if stat.S_ISREG(mode):
        return
    kind = next((words for test, words in _KINDS if test(mode)), "not a regular file")
    raise NotAFile(name, f"is {kind}, not a config file")


def read_bytes(path: str | os.PathLike[str], name: str | None = None, limit: int = MAX_CONFIG_BYTES) -> bytes:
    """At most ``limit + 1`` bytes of the regular file at ``path`` (one more than the limit,
    so the caller can tell a file that is too large). Never blocks on a FIFO or device: the
    path is checked before it is opened, opened non-blocking, and checked again once open
    (the path may have been swapped in between)."""
    name = name if name is not None else os.fsdecode(path)
    try:
        _require_regular(os.stat(path).st_mode, name)
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise MissingInput(name, "no such file") from None
    except NotADirectoryError:
        raise MissingInput(name, "no such file (a part of the path is not a directory)") from None
    except IsADirectoryError:
        raise NotAFile(name, "is a directory, not a config file") from None
    except OSError as err:
        raise UnreadableInput(name, f"cannot read: {err.strerror or err}") from None
    try:
        _require_regular(os.fstat(fd).st_mode, name)
        with os.fdopen(fd, "rb", closefd=True) as handle:
            fd = -1
            return handle.read(limit + 1)
    except OSError as err:
        raise UnreadableInput(name, f"cannot read: {err.strerror or err}") from None
    finally:
        if fd >= 0:
            os.close(fd)


def read_document(path: str | os.PathLike[str], display: str | None = None) -> Document:
    """Read and parse a config file; ParseError for bad content, InputError if unreadable."""
    name = display or os.fsdecode(path)
    raw = read_bytes(path, name)
    if len(raw) > MAX_CONFIG_BYTES:
        try:
            size: int | None = os.stat(path).st_size
        except OSError:
            size = None
        raise _too_large(size)
    return document_from_bytes(raw, name, syntax_of(os.fsdecode(path)))


def read_stream_document(stream: BinaryIO, name: str = STDIN_NAME, syntax: str | None = None) -> Document:
    """A config read from an open binary stream (``-`` on the command line: stdin), with the
    same limits as a file. ``syntax`` is "yaml" or "hjson"; by default the name decides."""
    try:
        raw = stream.read(MAX_CONFIG_BYTES + 1)
    except OSError as err:
        raise UnreadableInput(name, f"cannot read: {err.strerror or err}") from None
    return document_from_bytes(raw, name, syntax or syntax_of(name))


def read_text_document(text: str, name: str = STDIN_NAME, syntax: str | None = None) -> Document:
    """A config from text already in memory, with the same limits as a file."""
    size = len(text.encode("utf-8", "surrogatepass"))  # the limit is on bytes, as for a file
    if size > MAX_CONFIG_BYTES:
        raise _too_large(size)
    return _parse_text(text, name, syntax or syntax_of(name))


def document_from_bytes(raw: bytes, name: str, syntax: str = "hjson") -> Document:
    """Bytes (at most one more than the limit, as :func:`read_bytes` gives) to a Document."""
    if len(raw) > MAX_CONFIG_BYTES:
        raise _too_large(None)
    return _parse_text(decode_bytes(raw), name, syntax)


def syntax_of(name: str) -> str:
    """ "yaml" for a .yaml/.yml name, else "hjson" (what DeepSpeed reads every path with)."""
    return "yaml" if name.lower().endswith(YAML_SUFFIXES) else "hjson"


def _parse_text(text: str, name: str, syntax: str) -> Document:
    if syntax == "yaml":
        from zeroadvisor.config.yaml_source import parse_yaml

        return parse_yaml(text, name)
    if syntax != "hjson":
        raise ValueError(f"unknown config syntax {syntax!r}: expected 'hjson' or 'yaml'")
    return parse(text, name)


def _too_large(size: int | None) -> ParseError:
    shown = f"is {size / 1e6:.1f} MB" if size is not None else f"is over {MAX_CONFIG_BYTES // 1024} KiB"
    return ParseError(f"file {shown}; a DeepSpeed config is a few KB (limit {MAX_CONFIG_BYTES // 1024} KiB)",
                      line=1, column=1)
