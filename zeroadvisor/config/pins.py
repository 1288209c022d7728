"""The DeepSpeed requirement in the user's repository: found by walking up from a config, never imported.

In each folder from the config's up to the repository root (the folder holding ``.git``), the files below are
read in this order, lock files first (they say the exact release installed), then declared requirements (pip-tools'
compiled ``requirements.txt`` before its ``requirements.in``); the nearest folder that names deepspeed decides, and in
it the first file. docs/deepspeed-releases.md lists the order and the spellings each file may use.

The files are the user's and come with the repository under review: each is read as untrusted input, at most once a
run (config/pin_files.py), and whatever it holds is at worst a note, never an error: it is the user's build file,
not an input to zeroadvisor.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

from zeroadvisor.config import pin_conda, pin_files, pin_formats, pin_setup_py
from zeroadvisor.config.pin_files import MAX_FILE_BYTES
from zeroadvisor.config.pin_formats import poetry_specifier
from zeroadvisor.config.pin_requirements import MENTION, Reading, first_line

__all__ = ["MAX_FILE_BYTES", "Pin", "PinSearch", "clear_cache", "find_pin", "installed_release", "poetry_specifier"]

_Reader = Callable[[Reading, str], None]
# (file name, reader) in precedence order; requirements files come between the locks and the manifests.
_LOCKS: tuple[tuple[str, _Reader], ...] = (
    ("uv.lock", pin_formats.toml_lock), ("poetry.lock", pin_formats.toml_lock), ("pdm.lock", pin_formats.toml_lock),
    ("Pipfile.lock", pin_formats.pipfile_lock))
_MANIFESTS: tuple[tuple[str, _Reader], ...] = (
    ("pyproject.toml", pin_formats.pyproject), ("setup.cfg", pin_formats.setup_cfg),
    ("setup.py", pin_setup_py.setup_py), ("environment.yml", pin_conda.environment),
    ("environment.yaml", pin_conda.environment), ("Pipfile", pin_formats.pipfile))
_MAX_INCLUDE_DEPTH = 3  # requirements.txt -> -r base.txt -> -r ...: followed this deep
# requirements files read in one folder (requirements*.txt/.in, then requirements/*): a pull request may add any
# number, each costing an open and a scan; the first ones in the reading order are read, a note counts the rest.
MAX_REQUIREMENTS_FILES = 32
# What a parser raises on text it refuses, and on a shape its reader did not expect: a note, never an exit.
_PARSE_ERRORS = (ValueError, SyntaxError, RecursionError, MemoryError, UnicodeError, TypeError,
                 AttributeError, KeyError, IndexError)


@dataclass(frozen=True, slots=True)
class Pin:
    """One DeepSpeed requirement as written in a file."""

    file: str
    line: int
    requirement: str  # as written, e.g. "deepspeed>=0.10.0,<=0.16.9"
    specifier: str  # PEP 440, e.g. ">=0.10.0,<=0.16.9"; "==0.14.5" for a lock; "" for no constraint

    def describe(self) -> str:
        return f"{self.requirement} at {_shown_path(self.file)}:{self.line}"


def _shown_path(path: str) -> str:
    """A file under the working directory as a relative path (as the configs are shown), else as found."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if relative.startswith(os.pardir) else relative


@dataclass(frozen=True, slots=True)
class PinSearch:
    pin: Pin | None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _FileAnswer:
    """What one file says: its pin (the first requirement that applies to this interpreter), notes, -r includes."""

    pin: Pin | None
    notes: tuple[str, ...]
    includes: tuple[str, ...] = ()


def clear_cache() -> None:
    """Forget the files read (each is parsed once per process otherwise)."""
    pin_files.clear_cache()


def find_pin(config_path: str) -> PinSearch:
    """The nearest DeepSpeed requirement above ``config_path`` (a file), up to the repository root."""
    start = os.path.dirname(os.path.abspath(config_path))
    root = _repository_root(start)
    notes: list[str] = []
    for folder in _folders(start, root):
        top = root or folder  # where a symlink may point: the repository, else the folder itself
        for path, reader in _candidates(folder, top, notes):
            answer = _follow(path, top, reader, notes, 0, set())
            if answer is not None:
                return PinSearch(answer, tuple(dict.fromkeys(notes)))
    return PinSearch(None, tuple(dict.fromkeys(notes)))


def _repository_root(folder: str) -> str | None:
    while True:
        if os.path.lexists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _folders(start: str, root: str | None) -> Iterator[str]:
    folder = start
    while True:
        yield folder
        parent = os.path.dirname(folder)
        if folder in (root, parent):
            return
        folder = parent


def _follow(path: str, top: str, reader: _Reader, notes: list[str], depth: int, seen: set[str]) -> Pin | None:
    """The pin of one file, else of the requirements files it includes (-r), within the repository."""
    seen.add(os.path.realpath(path))
    answer = _answer(path, top, reader)
    notes.extend(" ".join(note.split()) for note in answer.notes)  # one line each, whatever the file holds
    if answer.pin is not None or depth >= _MAX_INCLUDE_DEPTH:
        return answer.pin
    for name in answer.includes:
        included = os.path.join(os.path.dirname(path), name)
        if "://" in name or "\0" in name or os.path.realpath(included) in seen:
            continue  # a URL, a name no file has (pip would fail on it too), or a file already read
        pin = _follow(included, top, pin_formats.requirements, notes, depth + 1, seen)
        if pin is not None:
            return pin
    return None


def _answer(path: str, top: str, reader: _Reader) -> _FileAnswer:
    try:
        return pin_files.parse_once(path, top, reader.__qualname__, partial(_parse, reader))
    except pin_files.Skipped as why:
        return _FileAnswer(None, (f"{_shown_path(path)}: not read for the DeepSpeed pin: {why}",))


def _parse(reader: _Reader, path: str, text: str) -> _FileAnswer:
    reading = Reading(_shown_path(path))
    if reader is pin_formats.requirements or MENTION.search(text):  # a file that never names deepspeed: no parse
        try:
            reader(reading, text)
        except _PARSE_ERRORS as err:
            reading.candidates.clear()
            why = "nested too deeply to parse" if isinstance(err, (MemoryError, RecursionError)) else first_line(err)
            reading.note(None, f"not read for the DeepSpeed pin: {why}")
    pin = _choose(path, reading)
    return _FileAnswer(pin, tuple(reading.notes), tuple(name for _, name in reading.includes))


def _choose(path: str, reading: Reading) -> Pin | None:
    """The first deepspeed requirement whose marker holds for this interpreter (pip installs only those); a note
    where none does, or where a later one that also holds says something else."""
    if not reading.candidates:
        return None
    applying = [c for c in reading.candidates if c.applies]
    if not applying:
        where = "; ".join(f"line {c.line}: {c.condition}" for c in reading.candidates)
        here = f"Python {'.'.join(map(str, sys.version_info[:3]))} on {sys.platform}"  # platform.python_version()
        reading.note(None, f"deepspeed is required only where markers hold that {here} does not meet "
                           f"({where[:200]}): not used")
        return None
    first = applying[0]
    for other in applying[1:]:
        if other.specifier != first.specifier:
            reading.note(other.line, f"{other.written!r} also applies; the first, line {first.line}, is used")
    return Pin(path, first.line, " ".join(first.written.split()), first.specifier)


def _requirements_order(name: str) -> tuple[bool, str, bool]:
    """requirements.txt first, then the others by name; of one name, pip-tools' compiled .txt before its .in."""
    stem, extension = os.path.splitext(name)
    return stem != "requirements", stem, extension == ".in"


def _candidates(folder: str, top: str, notes: list[str]) -> Iterator[tuple[str, _Reader]]:
    """(path, reader) of the files in ``folder`` that may name deepspeed, in precedence order; of the requirements
    files the first MAX_REQUIREMENTS_FILES, and a note in ``notes`` (only where the search gets past them) counting
    those left unread."""
    try:
        names = set(os.listdir(folder))
    except OSError:
        return
    for name, reader in _LOCKS:
        if name in names:
            yield os.path.join(folder, name), reader
    requirements = [os.path.join(folder, name) for name in sorted(
        (n for n in names if n.startswith("requirements") and n.endswith((".txt", ".in"))), key=_requirements_order)]
    if "requirements" in names:
        requirements += _requirements_folder(os.path.join(folder, "requirements"), top)
    for path in requirements[:MAX_REQUIREMENTS_FILES]:
        yield path, pin_formats.requirements
    unread = len(requirements) - MAX_REQUIREMENTS_FILES
    if unread > 0:
        last = os.path.basename(requirements[MAX_REQUIREMENTS_FILES - 1])
        note = (f"{_shown_path(folder)}: {unread} more requirements file{'s' if unread > 1 else ''} not read for "
                f"the DeepSpeed pin (at most {MAX_REQUIREMENTS_FILES} a folder, in reading order; "
                f"the last read: {last})")
        notes.append(" ".join(note.split()))  # one line, whatever the file names hold
    for name, reader in _MANIFESTS:
        if name in names:
            yield os.path.join(folder, name), reader


def _requirements_folder(sub: str, top: str) -> list[str]:
    """requirements/*.txt, the layout DeepSpeed itself uses (a folder inside the repository only), in reading
    order."""
    real = os.path.realpath(sub)
    if not os.path.isdir(real) or not pin_files.inside(real, os.path.realpath(top)):
        return []
    try:
        names = os.listdir(real)
    except OSError:
        return []
    return [os.path.join(sub, name) for name in sorted((n for n in names if n.endswith((".txt", ".in"))),
                                                       key=_requirements_order)]


def installed_release() -> str | None:
    """The installed DeepSpeed's version from its metadata (DeepSpeed is never imported)."""
    from importlib import metadata

    try:
        return metadata.version("deepspeed")
    except metadata.PackageNotFoundError:
        return None
