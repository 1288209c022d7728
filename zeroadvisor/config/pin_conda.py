"""conda's environment.yml: the deepspeed entry of ``dependencies:`` (a conda match spec) or of its ``- pip:`` list
(a pip requirement), read line by line.

Not through a YAML parser: PyYAML's pure-Python loader (``yaml.safe_load``, what the project uses elsewhere) takes
about 3 s per MB on an idle machine (13-15 s on a loaded CI runner) and its C loader recurses per nesting level. An
environment file is a flat list under one key, so a scan of its lines says the same in milliseconds whatever the
file holds: top-level keys, ``- item`` lines under ``dependencies:``, a ``- pip:`` item and the deeper items
under it, and one-line flow lists (``[a, b]``).
"""

from __future__ import annotations

import re
from functools import lru_cache

from zeroadvisor.config.pin_requirements import (
    MENTION,
    Candidate,
    Reading,
    add_requirement,
    shown,
    specifier_or_note,
    split_options,
)

# The lines the scan looks at: a top-level key, and a list item that mentions pip or deepspeed.
_LINES = re.compile(r"^(?:[^\s#-][^\n]*|[ \t]*-[^\n]*?(?:pip|deep[-_.]?speed)[^\n]*)$", re.MULTILINE | re.IGNORECASE)
_YAML_COMMENT = re.compile(r"(^|\s)#.*$")
_TOP_KEY = re.compile(r"""^["']?([^\s"':][^"':]*)["']?\s*:(?:\s+|$)(.*)$""")
# A conda match spec of deepspeed: an optional channel (conda-forge::), the name, then the version part.
_CONDA = re.compile(r"^(?:[\w./-]+::)?deep[-_.]?speed(?![A-Za-z0-9_.-])(?P<rest>.*)$", re.IGNORECASE)
_OPERATOR = re.compile(r"^(==|>=|<=|!=|~=|>|<)")


def environment(reading: Reading, text: str) -> None:
    section: str | None = None
    pip_indent: int | None = None  # the indentation of the "- pip:" item whose list is being read
    pip_end, line, counted = 0, 1, 0
    for match in _LINES.finditer(text):  # top-level keys and the items that may matter; the rest is skipped in C
        if reading.full:
            return
        line += text.count("\n", counted, match.start())
        counted = match.start()
        content = _YAML_COMMENT.sub("", match.group(0)).rstrip()
        item = content.strip()
        indent = len(content) - len(content.lstrip(" \t"))
        if indent == 0 and not item.startswith("-"):
            section, pip_indent = _top_level(reading, line, item), None
            continue
        if section != "dependencies" or not item:
            continue
        if pip_indent is not None:
            if indent <= pip_indent or _item_at_most(pip_indent).search(text, pip_end, match.start()):
                pip_indent = None  # this item, or one between, is as shallow as "- pip:": conda's own list again
            pip_end = match.end()  # searched up to here: each stretch once
        item = item[1:].strip()
        if re.match(r"""^["']?pip["']?\s*:""", item):
            pip_indent, pip_end = indent, match.end()
            _flow(reading, line, item.split(":", 1)[1], pip=True)
        elif MENTION.search(item):
            _entry(reading, line, _unquote(item), pip=pip_indent is not None)


def _top_level(reading: Reading, line: int, item: str) -> str | None:
    """The key a top-level line opens (None for a document marker or what is not a key); the entries of a
    one-line ``dependencies: [...]``."""
    key = _TOP_KEY.match(item) if item not in ("", "---", "...") else None
    if key is None:
        return None
    if key.group(1).strip() == "dependencies":
        _flow(reading, line, key.group(2), pip=False)
    return key.group(1).strip()


@lru_cache(maxsize=32)
def _item_at_most(indent: int) -> re.Pattern[str]:
    return re.compile(rf"^[ \t]{{0,{indent}}}-", re.MULTILINE)


def _flow(reading: Reading, number: int, rest: str, *, pip: bool) -> None:
    """A one-line flow list (``dependencies: [python=3.11, deepspeed=0.14.5]``)."""
    rest = rest.strip()
    if rest.startswith("[") and rest.endswith("]"):
        for item in rest[1:-1].split(","):
            if MENTION.search(item):
                _entry(reading, number, _unquote(item.strip()), pip=pip)


def _unquote(item: str) -> str:
    if len(item) >= 2 and item[0] == item[-1] and item[0] in "'\"":
        return item[1:-1]
    return item


def _entry(reading: Reading, number: int, item: str, *, pip: bool) -> None:
    if pip:  # a line of a requirements file, options and all
        requirement, _ = split_options(item)
        if requirement:
            add_requirement(reading, number, requirement)
        return
    match = _CONDA.match(item)
    if match is None:
        return
    specifier = conda_specifier(match.group("rest"))
    if specifier is None:
        reading.note(number, f"{shown(item)!r} is not a conda match spec zeroadvisor reads")
        return
    checked = specifier_or_note(reading, number, specifier) if specifier else ""
    if checked is not None:
        reading.candidates.append(Candidate(number, item, checked))


def conda_specifier(rest: str) -> str | None:
    """The version part of a conda match spec as PEP 440: ``=0.14.5`` (conda's fuzzy 0.14.5.*: DeepSpeed has no
    fourth number, so 0.14.5) and ``=0.14`` (0.14.*), with an optional ``=build``; ``==0.14.5``, ``>=0.14,<0.16``;
    ``deepspeed 0.14.5`` (space separated: that version, a build string after it). None where it is none of these
    (``|`` alternatives, ``[version=...]``)."""
    text = rest.strip()
    if not text:
        return ""
    if "|" in text or text.startswith("["):
        return None
    if rest.startswith((" ", "\t")) and not _OPERATOR.match(text):
        version = text.split()[0]
        return _fuzzy(version) if version.endswith("*") else f"=={version}"
    if text.startswith("=") and not text.startswith("=="):
        return _fuzzy(text[1:].split("=", 1)[0])
    if _OPERATOR.match(text):
        pieces = [re.sub(r"(\d)=[^,]*$", r"\1", piece.strip()) for piece in text.replace(" ", "").split(",")]
        return ",".join(pieces)  # the =build after an exact version dropped
    return None


def _fuzzy(version: str) -> str:
    version = version.rstrip("*").rstrip(".")
    return f"=={version}" if version.count(".") >= 2 else f"=={version}.*"
