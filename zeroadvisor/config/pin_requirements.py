"""A DeepSpeed requirement as the packaging tools read one: PEP 508 text through ``packaging``, a requirements file
line through pip's own preprocessing, and environment markers evaluated for the running interpreter.

What one file says is a ``Reading``: every deepspeed requirement in it (a ``Candidate`` each, with whether its
marker applies here) and the notes on what could not be read. Nothing here raises on what a file contains.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from packaging.version import InvalidVersion, Version

if TYPE_CHECKING:
    from packaging.markers import Marker

# A text that names deepspeed somewhere: files without one are not parsed at all.
MENTION = re.compile(r"deep[-_.]?speed", re.IGNORECASE)
# The start of a requirement of the deepspeed distribution (PEP 503 normalised names: deepspeed, deep-speed, ...).
_NAMED = re.compile(r"^\s*deep[-_.]?speed(?![A-Za-z0-9_.-])\s*(\[[^\]]*\])?", re.IGNORECASE)
_SHOWN = 80  # characters of a requirement quoted in a note
MAX_CANDIDATES = 64
# Bounds on what one requirements file makes the reader do; real files have a handful of each.
MAX_LINES_READ = 1000  # lines that name deepspeed or include a file
MAX_JOINED_CHARS = 64 * 1024  # one requirement's physical lines joined by backslashes
MAX_INCLUDES = 16  # -r files followed from one file
# A backslash-newline of a requirements file, marked where it was: the physical lines it joins still count.
_JOINED = "\0"
# A marked line that may matter: it names deepspeed, or one of its physical lines includes a file.
_INTERESTING = re.compile(r"^[^\n]*?(?:deep[-_.]?speed|(?:^|\0)[ \t]*(?:-r|--requirement))[^\n]*",
                          re.MULTILINE | re.IGNORECASE)
# pip/_internal/req/req_file.py: a comment is a '#' at the start or after whitespace.
_COMMENT = re.compile(r"(^|\s+)#.*$")


# PEP 503 name normalisation, as packaging.utils.canonicalize_name does it (that module imports packaging.tags, and
# with it logging, platform and subprocess: a tenth of a lint's start-up, for one re.sub)
_SEPARATORS = re.compile(r"[-_.]+")
# A requirement that is the name and a plain specifier set (PEP 440 operators and versions, no extras, URL or
# marker): what nearly every file writes, read without packaging.requirements (whose parser, markers and tags
# modules cost more at start-up than the whole lint of a file). Anything else goes through packaging.requirements.
_PLAIN_VERSION = r"(?:~=|===|==|!=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+"
_PLAIN = re.compile(rf"deepspeed\s*((?:{_PLAIN_VERSION})(?:\s*,\s*{_PLAIN_VERSION})*)?", re.IGNORECASE)


def is_deepspeed(name: str) -> bool:
    return _SEPARATORS.sub("-", name).lower() == "deepspeed"


def plain_specifier(text: str) -> str | None:
    """``written_specifier`` of a requirement that is ``deepspeed`` and a plain specifier set ("" for the bare name),
    exactly as packaging.requirements reads it; None for anything else (the caller parses it in full)."""
    match = _PLAIN.fullmatch(text.strip())
    if match is None:
        return None
    try:
        SpecifierSet(match.group(1) or "")
        return written_specifier(_spec_text(text))
    except (InvalidSpecifier, ValueError):
        return None  # packaging.requirements words the refusal


@dataclass(frozen=True, slots=True)
class Candidate:
    """One deepspeed requirement of a file."""

    line: int
    written: str  # as written, less pip options
    specifier: str  # PEP 440 in the written order, local versions dropped; "" for no constraint
    applies: bool = True  # its marker (or Poetry python constraint) holds for this interpreter
    condition: str = ""  # that marker, for a note


@dataclass(slots=True)
class Reading:
    """What one file says about deepspeed."""

    shown: str  # the file as notes name it
    candidates: list[Candidate] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    includes: list[tuple[int, str]] = field(default_factory=list)  # (line, file) of a requirements file's -r
    _said_full: bool = field(default=False, repr=False)

    def note(self, line: int | None, text: str) -> None:
        self.notes.append(f"{self.shown}{f':{line}' if line else ''}: {text}")

    @property
    def full(self) -> bool:
        """MAX_CANDIDATES deepspeed requirements read (a real file has one to three): the readers stop, said once.
        Asked before each further one, so a hostile file of 400,000 is not 400,000 requirement parses."""
        if len(self.candidates) < MAX_CANDIDATES:
            return False
        if not self._said_full:
            self._said_full = True
            self.note(None, f"{MAX_CANDIDATES} deepspeed requirements read: the rest of the file is not")
        return True


def shown(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:200]


def add_requirement(reading: Reading, line: int, text: str, *, condition: str = "", applies: bool = True) -> None:
    """A PEP 508 string: a Candidate where it requires deepspeed, a note where it starts with the name but is not a
    requirement ``packaging`` reads, else nothing. ``condition``/``applies``: a constraint given beside it (Poetry's
    ``python``, a Pipfile's ``markers``) that holds or not."""
    if not _NAMED.match(text) or reading.full:
        return
    plain = plain_specifier(text)
    if plain is not None:
        reading.candidates.append(Candidate(line, text.strip(), plain, applies, condition))
        return
    add_parsed_requirement(reading, line, text, condition=condition, applies=applies)


def add_parsed_requirement(reading: Reading, line: int, text: str, *, condition: str = "",
                           applies: bool = True) -> None:
    """``add_requirement`` through packaging.requirements, for every shape of PEP 508 (extras, URL, marker)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        requirement = Requirement(text.strip())
    except InvalidRequirement as err:
        reading.note(line, f"{shown(text)!r} is not a requirement pip reads: {first_line(err)}")
        return
    if not is_deepspeed(requirement.name):
        return
    specifier = "" if requirement.url else written_specifier(_spec_text(text))
    if requirement.marker is not None:
        marker = str(requirement.marker)
        condition = f"{condition} and {marker}" if condition else marker
        applies = applies and evaluate(requirement.marker, reading, line)
    reading.candidates.append(Candidate(line, text.strip(), specifier, applies, condition))


def _spec_text(text: str) -> str:
    """The version part of a requirement ``packaging`` accepted: after the name and extras, before the marker."""
    rest = _NAMED.sub("", text, count=1).split(";", 1)[0]
    return rest.strip().removeprefix("(").removesuffix(")")


def written_specifier(text: str) -> str:
    """A specifier set in its written order (packaging's own text sorts it), each piece normalised; a local version
    (``==0.14.5+cu121``, a CUDA build) is its release (0.14.5), as the release is what DeepSpeed's code is."""
    pieces = []
    for piece in (p.strip() for p in text.split(",")):
        if not piece:
            continue
        spec = Specifier(piece)  # InvalidSpecifier: the caller's text was not validated
        version, operator = spec.version, spec.operator
        if operator in ("==", "!=", "===") and "+" in version:
            version = version.split("+", 1)[0]
        if operator == "===":
            try:
                Version(version)
                operator = "=="
            except InvalidVersion:
                pass
        pieces.append(f"{operator}{version}")
    return ",".join(pieces)


def specifier_or_note(reading: Reading, line: int, text: str) -> str | None:
    """``written_specifier`` of a PEP 440 text written outside a requirement (a Pipfile value, a lock's version);
    None with a note where it is not one."""
    try:
        SpecifierSet(text)
        return written_specifier(text)
    except (InvalidSpecifier, ValueError):
        reading.note(line, f"{shown(text)!r} is not a PEP 440 version specifier")
        return None


def evaluate(marker: Marker | str, reading: Reading, line: int) -> bool:
    """Whether an environment marker holds for the running interpreter (False, with a note, where it cannot be
    evaluated)."""
    from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName

    try:
        parsed = marker if isinstance(marker, Marker) else Marker(marker)
        return bool(parsed.evaluate())
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName, InvalidVersion, ValueError) as err:
        reading.note(line, f"marker {shown(str(marker))!r} not evaluated: {first_line(err)}")
        return False


def python_applies(constraint: str, reading: Reading, line: int) -> bool:
    """Whether the running Python satisfies a PEP 440 constraint on it (Poetry's ``python = ">=3.10"``)."""
    try:
        import platform

        return SpecifierSet(constraint).contains(platform.python_version(), prereleases=True)
    except (InvalidSpecifier, ValueError):
        reading.note(line, f"python constraint {shown(constraint)!r} is not PEP 440")
        return False


def logical_lines(text: str) -> Iterator[tuple[int, str | None]]:
    """pip's preprocessing of a requirements file (req_file.py): a line ending in a backslash joins the next
    (a comment does not continue), comments are removed; (first line number, logical line), of the lines that
    name deepspeed or include a file (-r) only. Those are found by one regular expression over the text with
    its continuations marked: a 5 MB file of short lines is millions of lines, 4.7 s looked at one by one.
    A stretch of lines joined by backslashes longer than MAX_JOINED_CHARS is (number, None): not read."""
    marked = text.replace(_JOINED, " ").replace("\\\r\n", _JOINED).replace("\\\n", _JOINED)
    number, counted = 1, 0
    for match in _INTERESTING.finditer(marked):
        number += marked.count("\n", counted, match.start()) + marked.count(_JOINED, counted, match.start())
        counted = match.start()
        if match.end() - match.start() > MAX_JOINED_CHARS:
            yield number, None
            continue
        pieces = match.group(0).split(_JOINED)
        yield from _joined_lines(number, [piece + "\\" for piece in pieces[:-1]] + pieces[-1:])


def _joined_lines(first: int, lines: list[str]) -> Iterator[tuple[int, str]]:
    """pip's join_lines and ignore_comments over physical lines numbered from ``first``."""
    start = first
    joined: list[str] = []
    for number, raw in enumerate(lines, first):
        line = raw.rstrip("\r")
        comment = line.lstrip().startswith("#")
        if line.endswith("\\") and not comment:
            if not joined:
                start = number
            joined.append(line.strip("\\"))  # pip strips every backslash at either end
            continue
        if joined:
            joined.append(line if not comment else " " + line)
            yield start, _COMMENT.sub("", "".join(joined)).strip()
            joined = []
        else:
            yield number, _COMMENT.sub("", line).strip()
    if joined:
        yield start, _COMMENT.sub("", "".join(joined)).strip()


def split_options(line: str) -> tuple[str, str]:
    """pip's break_args_options: the requirement is every token before the first that starts with '-'
    (``deepspeed==0.14.5 --global-option=... --hash=...``), the rest are its options."""
    tokens = line.split(" ")
    for at, token in enumerate(tokens):
        if token.startswith("-"):
            return " ".join(tokens[:at]).strip(), " ".join(tokens[at:])
    return line.strip(), ""


def read_requirements_text(reading: Reading, text: str) -> None:
    """A pip requirements file: each requirement line that names deepspeed, and the files it includes (-r)."""
    for seen, (number, line) in enumerate(logical_lines(text)):
        if seen >= MAX_LINES_READ:
            reading.note(number, f"more than {MAX_LINES_READ} lines name deepspeed or include a file: the rest "
                                 "not read")
            return
        if line is None:
            reading.note(number, f"lines joined by backslashes into more than {MAX_JOINED_CHARS >> 10} KB: not read")
            continue
        if not line:
            continue
        requirement, options = split_options(line)
        if requirement:
            add_requirement(reading, number, requirement)
            continue
        parts = options.replace("=", " ", 1).split()
        if len(parts) >= 2 and parts[0] in ("-r", "--requirement") and len(reading.includes) < MAX_INCLUDES:
            reading.includes.append((number, parts[1]))
