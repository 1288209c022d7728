"""Reading the user's build files (requirements.txt, setup.py, ...) as untrusted input, each at most once a run.

A pin file comes with the repository under review, so a pull request chooses it: a symlink to ``/dev/zero``, a FIFO
that never answers, a file of several MB. What is read here is a regular file inside the repository, at most
MAX_FILE_BYTES, within READ_SECONDS; anything else is skipped with a one-line note, never an error or a hang.
The text is decoded as pip decodes a requirements file (a byte-order mark names the encoding, else UTF-8), and
what a file says is parsed once per process however many configs share it.
"""

from __future__ import annotations

import codecs
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

# Files bigger than this are not read (a lock file of a monorepo is a few MB at most).
MAX_FILE_BYTES = 5 * 1024 * 1024
# Reading a local file of 5 MB takes milliseconds; a file that takes longer is on something that is not a disk.
READ_SECONDS = 2.0
_CHUNK = 1 << 16

# pip's BOM table (pip/_internal/utils/encoding.py), UTF-32 first: its little-endian mark begins with UTF-16's.
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
         (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))

T = TypeVar("T")


class Skipped(Exception):
    """A file not read: the reason, one line (the caller names the file)."""


@dataclass(frozen=True, slots=True)
class _Identity:
    realpath: str
    mtime_ns: int
    size: int


_parsed: dict[tuple[_Identity, str], object] = {}
_MAX_CACHED = 1024


def clear_cache() -> None:
    """Forget every file read (tests, and a long-running process whose files changed)."""
    _parsed.clear()


def parse_once(path: str, top: str, kind: str, parse: Callable[[str, str], T]) -> T:
    """``parse(path, text)`` of the file at ``path``, read as untrusted input, computed once per (file, kind) and
    file version; Skipped where the file is not read. ``top`` is the folder a symlink must stay inside."""
    identity = _identify(path, top)
    key = (identity, kind)
    if key in _parsed:
        return _parsed[key]  # type: ignore[return-value]  # stored by this function with this kind's parser
    text = decode(_read(identity))
    result = parse(path, text)
    if len(_parsed) >= _MAX_CACHED:
        _parsed.clear()
    _parsed[key] = result
    return result


def read_bytes(path: str, top: str) -> bytes:
    """The bytes of the regular file ``path`` (a link followed only inside ``top``), bounded as every file here
    is; Skipped otherwise. For a file read once a run by its own reader (the project configuration)."""
    return _read(_identify(path, top))


def _identify(path: str, top: str) -> _Identity:
    """The regular file ``path`` stands for, after the symlink rule: followed only to a regular file inside
    ``top``. Devices, FIFOs and sockets are refused here, before anything opens them."""
    try:
        real = os.path.realpath(path)
        info = os.stat(real)
    except (OSError, ValueError) as err:  # a loop of symlinks, a name the file system refuses
        raise Skipped(_os_reason(err)) from None
    if not inside(real, os.path.realpath(top)):  # a link, or a folder on the way that is one
        raise Skipped(f"a link to {real}, outside {os.path.realpath(top)}")
    if not stat.S_ISREG(info.st_mode):
        raise Skipped("not a regular file")
    if info.st_size > MAX_FILE_BYTES:
        raise Skipped(f"larger than {MAX_FILE_BYTES >> 20} MB")
    return _Identity(real, info.st_mtime_ns, info.st_size)


def inside(path: str, folder: str) -> bool:
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:  # another drive (Windows)
        return False


def _read(identity: _Identity) -> bytes:
    """At most MAX_FILE_BYTES of the file, within READ_SECONDS. Opened without following a symlink and without
    blocking (a FIFO put in its place since the stat opens at once), then checked to be that regular file."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(identity.realpath, flags)
    except OSError as err:
        raise Skipped(_os_reason(err)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Skipped("not a regular file")
        chunks: list[bytes] = []
        size, deadline = 0, time.monotonic() + READ_SECONDS
        while size <= MAX_FILE_BYTES:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if time.monotonic() > deadline:
                raise Skipped(f"reading took more than {READ_SECONDS:g} s")
        if size > MAX_FILE_BYTES:  # it grew since the stat
            raise Skipped(f"larger than {MAX_FILE_BYTES >> 20} MB")
        return b"".join(chunks)
    except OSError as err:
        raise Skipped(_os_reason(err)) from None
    finally:
        os.close(fd)


def decode(data: bytes) -> str:
    """As pip decodes a requirements file: the encoding a byte-order mark names (PowerShell's ``pip freeze >``
    writes UTF-16 LE with one), else UTF-8. Skipped where the bytes are not that encoding."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            data, name = data[len(bom):], encoding
            break
    else:
        name = "utf-8"
    try:
        return data.decode(name)
    except UnicodeDecodeError as err:
        raise Skipped(f"not {name.upper()} text (byte {err.start})") from None


def _os_reason(err: BaseException) -> str:
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
