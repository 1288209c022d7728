"""The deepspeed requirements of each kind of build file, as its own tool reads it: lock files (uv, Poetry, PDM,
Pipenv), pyproject.toml (PEP 621, PEP 735 groups, Poetry), setup.cfg, conda's environment.yml and Pipfile.

Each reader fills a ``Reading`` from the file's text; a shape the tool would refuse (a list where a table belongs,
a number where a requirement belongs) is a note. The caller turns a parser's own error into a note (config/pins.py).
"""

from __future__ import annotations

import bisect
import json
import re
import tomllib

from zeroadvisor.config.pin_requirements import (
    MAX_CANDIDATES,
    MENTION,
    Candidate,
    Reading,
    add_requirement,
    evaluate,
    is_deepspeed,
    python_applies,
    read_requirements_text,
    shown,
    specifier_or_note,
)

# pyproject.toml, Pipfile and setup.cfg are a few KB; a lock file, MB, is read by its deepspeed blocks only.
MAX_MANIFEST_CHARS = 256 * 1024
_LOCK_NAME = re.compile(r"""^name\s*=\s*["']deep[-_.]?speed["']\s*$""", re.MULTILINE | re.IGNORECASE)
_LOCK_PACKAGE = re.compile(r"^\[\[package\]\]\s*$", re.MULTILINE)


def line_of(text: str, pattern: str, start: int = 0) -> int:
    """The line of the first match of a regular expression at or after ``start`` (else of ``start``)."""
    found = re.compile(pattern, re.MULTILINE | re.IGNORECASE).search(text, start)
    at = found.start() if found else start
    return text.count("\n", 0, at) + 1


def _key_line(text: str, name: str) -> int:
    return line_of(text, rf"""^\s*["']?{re.escape(name)}["']?\s*=""")


def _string_line(text: str, value: str) -> int:
    at = text.find(value)
    return text.count("\n", 0, at) + 1 if at >= 0 else 1


def _too_large(reading: Reading, text: str) -> bool:
    """A manifest over MAX_MANIFEST_CHARS is not parsed: tomllib is pure Python, about 5 MB a second (a
    million calls per MB)."""
    if len(text) <= MAX_MANIFEST_CHARS:
        return False
    reading.note(None, f"not parsed: larger than {MAX_MANIFEST_CHARS >> 10} KB")
    return True


def _table(reading: Reading, parent: object, key: str, where: str) -> dict[str, object]:
    """``parent[key]`` where it is a table; {} with a note where it is something else."""
    value = parent.get(key, {}) if isinstance(parent, dict) else {}
    if isinstance(value, dict):
        return value
    reading.note(None, f"{where} is a {type(value).__name__}, not a table: not read")
    return {}


def _array(reading: Reading, parent: dict[str, object], key: str, where: str) -> list[object]:
    value = parent.get(key, [])
    if isinstance(value, list):
        return value
    reading.note(None, f"{where} is a {type(value).__name__}, not a list: not read")
    return []


def _requirement_strings(reading: Reading, text: str, values: list[object], where: str) -> None:
    for value in values:
        if reading.full:
            return
        if isinstance(value, str):
            if MENTION.search(value):  # its line is looked up only then: a search of the text each
                add_requirement(reading, _string_line(text, value), value)
        elif not (isinstance(value, dict) and "include-group" in value):  # PEP 735's include is not a requirement
            reading.note(None, f"{where}: {shown(repr(value))} is not a requirement string: not read")


def toml_lock(reading: Reading, text: str) -> None:
    """uv.lock, poetry.lock, pdm.lock: the ``[[package]]`` named deepspeed. Only those blocks are parsed (a lock of
    a monorepo is MB of TOML, a pure-Python parse of seconds); a lock may hold one per resolution fork, each with
    its markers."""
    headers = [m.start() for m in _LOCK_PACKAGE.finditer(text)]
    blocks: dict[int, int] = {}  # start -> end of each [[package]] block holding a deepspeed name line
    for name in _LOCK_NAME.finditer(text):
        at = bisect.bisect_right(headers, name.start()) - 1
        if at >= 0:
            blocks.setdefault(headers[at], headers[at + 1] if at + 1 < len(headers) else len(text))
        if len(blocks) > MAX_CANDIDATES:
            break
    for start, end in blocks.items():
        if reading.full:
            return
        block = text[start:end]
        packages = tomllib.loads(block).get("package")
        package = packages[0] if isinstance(packages, list) and packages else None
        if not isinstance(package, dict) or not is_deepspeed(str(package.get("name", ""))):
            continue
        line = text.count("\n", 0, start) + 1
        version = package.get("version")
        if not isinstance(version, str):
            reading.note(line, f"the locked deepspeed has no version string ({shown(repr(version))})")
            continue
        specifier = specifier_or_note(reading, line, f"=={version}")
        if specifier is None:
            continue
        version_line = line_of(text, r"^version\s*=", start)
        markers = package.get("resolution-markers", package.get("markers"))
        markers = [markers] if isinstance(markers, str) else markers if isinstance(markers, list) else []
        conditions = [m for m in markers if isinstance(m, str)]
        applies = not conditions or any(evaluate(m, reading, version_line) for m in conditions)
        reading.candidates.append(Candidate(version_line, f"deepspeed {version} (locked)", specifier, applies,
                                            " or ".join(conditions)))


def pipfile_lock(reading: Reading, text: str) -> None:
    data = json.loads(text)
    for group in ("default", "develop"):
        entries = _table(reading, data, group, f'"{group}"') if isinstance(data, dict) else {}
        for name, entry in entries.items():
            if reading.full:
                return
            if not is_deepspeed(name):
                continue
            line = _string_line(text, f'"{name}"')
            version = entry.get("version") if isinstance(entry, dict) else None
            if not isinstance(entry, dict) or not isinstance(version, str):
                reading.note(line, f'"{name}" has no version string')
                continue
            specifier = specifier_or_note(reading, line, version)
            markers = entry.get("markers")
            applies = not isinstance(markers, str) or evaluate(markers, reading, line)
            if specifier is not None:
                reading.candidates.append(Candidate(line, f"deepspeed{version} (locked)", specifier, applies,
                                                    markers if isinstance(markers, str) else ""))


def pyproject(reading: Reading, text: str) -> None:
    """[project] dependencies and optional dependencies, [dependency-groups] (PEP 735), Poetry's dependency tables."""
    if _too_large(reading, text):
        return
    data = tomllib.loads(text)
    project = _table(reading, data, "project", "[project]")
    _requirement_strings(reading, text, _array(reading, project, "dependencies", "[project] dependencies"),
                         "[project] dependencies")
    optional = _table(reading, project, "optional-dependencies", "[project.optional-dependencies]")
    for extra in optional:
        where = f"[project.optional-dependencies] {extra}"
        _requirement_strings(reading, text, _array(reading, optional, extra, where), where)
    groups = _table(reading, data, "dependency-groups", "[dependency-groups]")
    for group in groups:
        _requirement_strings(reading, text, _array(reading, groups, group, f"[dependency-groups] {group}"),
                             f"[dependency-groups] {group}")
    poetry = _table(reading, _table(reading, data, "tool", "[tool]"), "poetry", "[tool.poetry]")
    tables: list[tuple[str, object, str]] = [("[tool.poetry.dependencies]", poetry, "dependencies"),
              ("[tool.poetry.dev-dependencies]", poetry, "dev-dependencies")]
    for name, declared in _table(reading, poetry, "group", "[tool.poetry.group]").items():
        tables.append((f"[tool.poetry.group.{name}.dependencies]", declared, "dependencies"))
    for where, parent, key in tables:
        for name, value in _table(reading, parent, key, where).items():
            if is_deepspeed(name):
                _poetry_dependency(reading, _key_line(text, name), name, value)


def _poetry_dependency(reading: Reading, line: int, name: str, value: object) -> None:
    """A Poetry dependency: a constraint string, a table (version, python, markers), or a list of tables (a
    multiple-constraint dependency: each applies where its python/markers hold)."""
    for given in value if isinstance(value, list) else [value]:
        if reading.full:
            return
        entry = {"version": given} if isinstance(given, str) else given
        if not isinstance(entry, dict):
            reading.note(line, f"{name} = {shown(repr(entry))}: not a version, a table or a list of tables")
            continue
        version = entry.get("version", "*")
        if not isinstance(version, str):
            reading.note(line, f"{name}: version {shown(repr(version))} is not a string")
            continue
        applies, conditions = True, []
        python, markers = entry.get("python"), entry.get("markers")
        if isinstance(python, str):
            applies = python_applies(poetry_specifier(python), reading, line)
            conditions.append(f"python {python}")
        if isinstance(markers, str):
            applies = evaluate(markers, reading, line) and applies
            conditions.append(markers)
        specifier = specifier_or_note(reading, line, poetry_specifier(version))
        if specifier is not None:
            reading.candidates.append(Candidate(line, f"{name} = {version!r}", specifier, applies,
                                                " and ".join(conditions)))


def poetry_specifier(text: str) -> str:
    """Poetry's constraint as PEP 440: ^0.14.2 -> >=0.14.2,<0.15.0 (a caret keeps the first non-zero part),
    ~0.14.2 -> >=0.14.2,<0.15.0 (~1 -> >=1.0.0,<2.0.0), * -> no constraint, 0.14.5 -> ==0.14.5; PEP 440 text
    passes through. What is neither (``^0.14 || ^0.15``, alternatives) passes through too, for the caller's
    check to refuse."""
    parts = []
    for piece in (p.strip() for p in text.split(",")):
        if piece in ("", "*"):
            continue
        caret = re.fullmatch(r"([\^~])\s*(\d+(?:\.\d+){0,2})", piece)
        if caret:
            given = [int(n) for n in caret.group(2).split(".")]
            numbers = [*given, 0, 0][:3]
            if caret.group(1) == "~":
                upper = [numbers[0] + 1, 0, 0] if len(given) == 1 else [numbers[0], numbers[1] + 1, 0]
            else:
                first = next((i for i, n in enumerate(numbers) if n), len(given) - 1)
                upper = [n if i < first else 0 for i, n in enumerate(numbers)]
                upper[first] = numbers[first] + 1
            parts += [">=" + ".".join(map(str, numbers)), "<" + ".".join(map(str, upper))]
        elif piece[0].isdigit():
            parts.append(f"=={piece}")
        else:
            parts.append(piece.replace(" ", ""))
    return ",".join(parts)


def setup_cfg(reading: Reading, text: str) -> None:
    """setuptools' [options] install_requires and [options.extras_require]: one requirement a line, or a single
    line separated by ';' (setuptools' list-semi)."""
    if _too_large(reading, text):
        return
    import configparser  # here, not at the top: only a setup.cfg that names deepspeed needs it (start-up time)

    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read_string(text)
    except configparser.Error as err:  # the caller's one-line note, as for every other format's refusal
        raise ValueError(str(err)) from None
    values = [parser.get("options", "install_requires", fallback="")]
    if parser.has_section("options.extras_require"):
        values += [value for _, value in parser.items("options.extras_require")]
    for value in values:
        for written in value.splitlines() if "\n" in value else value.split(";"):
            requirement = re.sub(r"(^|\s+)#.*$", "", written).strip()
            if MENTION.search(requirement):
                add_requirement(reading, _string_line(text, requirement), requirement)


def pipfile(reading: Reading, text: str) -> None:
    if _too_large(reading, text):
        return
    data = tomllib.loads(text)
    for group in ("packages", "dev-packages"):
        for name, value in _table(reading, data, group, f"[{group}]").items():
            if reading.full:
                return
            if not is_deepspeed(name):
                continue
            line = _key_line(text, name)
            entry = {"version": value} if isinstance(value, str) else value
            if not isinstance(entry, dict) or not isinstance(entry.get("version", "*"), str):
                reading.note(line, f"{name} = {shown(repr(value))}: not a version string or a table with one")
                continue
            version = entry.get("version", "*")
            markers = entry.get("markers")
            applies = not isinstance(markers, str) or evaluate(markers, reading, line)
            specifier = "" if version.strip() == "*" else specifier_or_note(reading, line, version)
            if specifier is not None:
                reading.candidates.append(Candidate(line, f"{name} = {version!r}", specifier, applies,
                                                    markers if isinstance(markers, str) else ""))


def requirements(reading: Reading, text: str) -> None:
    read_requirements_text(reading, text)
