"""The DeepSpeed requirement in the user's repository: found by walking up from a config, never imported.

In each folder from the config's up to the repository root (the folder holding ``.git``), the files below are
read in this order, lock files first (they say the exact release installed), then declared requirements; the
nearest folder that names deepspeed decides. A file that cannot be read is skipped with a note, never an error:
it is the user's build file, not an input to zeroadvisor.
"""

from __future__ import annotations

import ast
import configparser
import json
import os
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# Files bigger than this are not read (a lock file of a monorepo is a few MB at most).
MAX_FILE_BYTES = 5 * 1024 * 1024
# PEP 508 name and the rest of the requirement (extras, version, markers) of a deepspeed line.
_REQUIREMENT = re.compile(r"^\s*deep[-_.]?speed(?![A-Za-z0-9_.-])\s*(\[[^\]]*\])?\s*(?P<spec>[^;#@]*)", re.IGNORECASE)
_NAME = re.compile(r"^deep[-_.]?speed$", re.IGNORECASE)


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


def find_pin(config_path: str) -> PinSearch:
    """The nearest DeepSpeed requirement above ``config_path`` (a file), up to the repository root."""
    folder = os.path.dirname(os.path.abspath(config_path))
    notes: list[str] = []
    seen: set[str] = set()
    while folder not in seen:
        seen.add(folder)
        for path, reader in _candidates(folder):
            try:
                if os.path.getsize(path) > MAX_FILE_BYTES:
                    notes.append(f"{path}: not read for the DeepSpeed pin: larger than 5 MB")
                    continue
                with open(path, encoding="utf-8") as stream:
                    text = stream.read()
                pin = reader(path, text)
            except (OSError, UnicodeDecodeError, ValueError, SyntaxError,
                    configparser.Error, RecursionError) as err:
                notes.append(f"{path}: not read for the DeepSpeed pin: {_first_line(err)}")
                continue
            if pin is not None:
                return PinSearch(pin, tuple(notes))
        if os.path.exists(os.path.join(folder, ".git")):
            break  # the repository root
        folder = os.path.dirname(folder)
    return PinSearch(None, tuple(notes))


def _first_line(err: BaseException) -> str:
    text = (str(err).strip().splitlines() or [type(err).__name__])[0]
    return text[:200]


def _candidates(folder: str) -> Iterator[tuple[str, Any]]:
    """(path, reader) of the files in ``folder`` that may name deepspeed, in precedence order."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return
    fixed = (("uv.lock", _toml_lock), ("poetry.lock", _toml_lock), ("pdm.lock", _toml_lock),
             ("Pipfile.lock", _pipfile_lock))
    for name, reader in fixed:
        if name in names:
            yield os.path.join(folder, name), reader
    for name in names:
        if name.startswith("requirements") and name.endswith((".txt", ".in")):
            yield os.path.join(folder, name), _requirements
    yield from _requirements_folder(os.path.join(folder, "requirements"))
    for name, reader in (("pyproject.toml", _pyproject), ("setup.cfg", _setup_cfg), ("setup.py", _setup_py),
                         ("environment.yml", _environment), ("environment.yaml", _environment),
                         ("Pipfile", _pipfile)):
        if name in names:
            yield os.path.join(folder, name), reader


def _requirements_folder(sub: str) -> Iterator[tuple[str, Any]]:
    """requirements/*.txt, the layout DeepSpeed itself uses."""
    if os.path.isdir(sub):
        for name in sorted(os.listdir(sub)):
            if name.endswith((".txt", ".in")):
                yield os.path.join(sub, name), _requirements


def _line_of(text: str, needle: str) -> int:
    at = text.find(needle)
    return text.count("\n", 0, at) + 1 if at >= 0 else 1


def _from_requirement(path: str, text: str, requirement: str) -> Pin | None:
    match = _REQUIREMENT.match(requirement)
    if match is None:
        return None
    spec = re.sub(r"\s+", "", match.group("spec")).strip("()")
    written = requirement.strip()
    return Pin(path, _line_of(text, written), written, spec)


def _requirements(path: str, text: str) -> Pin | None:
    """requirements.txt and pip-tools output: one requirement a line, ``\\`` continuations, comments, hashes."""
    for raw in text.replace("\\\n", " ").splitlines():
        line = raw.split(" #", 1)[0].split("--hash", 1)[0].strip()
        if line.startswith(("#", "-")):
            continue  # -r/-c/-e/--index-url lines: other files and options, not this requirement
        pin = _from_requirement(path, text, line)
        if pin is not None:
            return pin
    return None


def _toml_lock(path: str, text: str) -> Pin | None:
    """uv.lock, poetry.lock, pdm.lock: [[package]] name = "deepspeed", version = "0.14.5"."""
    for package in tomllib.loads(text).get("package", []):
        if isinstance(package, dict) and _NAME.match(str(package.get("name", ""))) and "version" in package:
            version = str(package["version"])
            return Pin(path, _line_of(text, f'version = "{version}"'), f"deepspeed {version} (locked)",
                       f"=={version}")
    return None


def _pipfile_lock(path: str, text: str) -> Pin | None:
    data = json.loads(text)
    for group in ("default", "develop"):
        entries = data.get(group, {}) if isinstance(data, dict) else {}
        for name, entry in (entries.items() if isinstance(entries, dict) else ()):
            if _NAME.match(name) and isinstance(entry, dict) and isinstance(entry.get("version"), str):
                return Pin(path, _line_of(text, f'"{name}"'), f"deepspeed{entry['version']} (locked)",
                           entry["version"])
    return None


def _pyproject(path: str, text: str) -> Pin | None:
    data = tomllib.loads(text)
    project = data.get("project", {})
    requirements = list(project.get("dependencies", []) or [])
    for extra in (project.get("optional-dependencies", {}) or {}).values():
        requirements += list(extra or [])
    for requirement in requirements:
        pin = _from_requirement(path, text, str(requirement))
        if pin is not None:
            return pin
    poetry = data.get("tool", {}).get("poetry", {})
    groups = [poetry.get("dependencies", {})] + [g.get("dependencies", {}) for g in
                                                 (poetry.get("group", {}) or {}).values() if isinstance(g, dict)]
    for group in groups:
        for name, value in (group.items() if isinstance(group, dict) else ()):
            if _NAME.match(name):
                version = value.get("version", "*") if isinstance(value, dict) else str(value)
                return Pin(path, _line_of(text, name), f"{name} = {version!r}", poetry_specifier(version))
    return None


def poetry_specifier(text: str) -> str:
    """Poetry's constraint as PEP 440: ^0.14.2 -> >=0.14.2,<0.15.0 (a caret keeps the first non-zero part),
    ~0.14.2 -> >=0.14.2,<0.15.0, * -> no constraint, 0.14.5 -> ==0.14.5; PEP 440 text passes through."""
    parts = []
    for piece in (p.strip() for p in text.split(",")):
        if piece in ("", "*"):
            continue
        if piece[0] in "^~" and not piece.startswith("~="):
            numbers = ([int(n) for n in re.findall(r"\d+", piece)[:3]] + [0, 0, 0])[:3]
            if piece[0] == "~":
                upper = [numbers[0], numbers[1] + 1, 0]
            else:
                first = next((i for i, n in enumerate(numbers) if n), 2)
                upper = [n if i < first else 0 for i, n in enumerate(numbers)]
                upper[first] = numbers[first] + 1
            parts += [">=" + ".".join(map(str, numbers)), "<" + ".".join(map(str, upper))]
        elif piece[0].isdigit():
            parts.append(f"=={piece}")
        else:
            parts.append(piece.replace(" ", ""))
    return ",".join(parts)


def _setup_cfg(path: str, text: str) -> Pin | None:
    parser = configparser.ConfigParser()
    parser.read_string(text)
    if not parser.has_section("options") and not parser.has_section("options.extras_require"):
        return None
    values = [parser.get("options", "install_requires", fallback="")]
    if parser.has_section("options.extras_require"):
        values += [value for _, value in parser.items("options.extras_require")]
    for value in values:
        for line in value.splitlines():
            pin = _from_requirement(path, text, line)
            if pin is not None:
                return pin
    return None


def _setup_py(path: str, text: str) -> Pin | None:
    """String literals of setup.py (parsed, never run): the first one that is a deepspeed requirement."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            pin = _from_requirement(path, text, node.value)
            if pin is not None and (pin.specifier or node.value.strip().lower() in ("deepspeed", "deep_speed")):
                return Pin(path, node.lineno, pin.requirement, pin.specifier)
    return None


def _environment(path: str, text: str) -> Pin | None:
    """conda environment.yml: ``deepspeed=0.14.5`` (conda) or ``deepspeed==0.14.5``, also under ``pip:``."""
    import yaml  # here, not at the top: plain lint starts without PyYAML (tests/test_packaging.py)

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ValueError(_first_line(err)) from None
    entries = data.get("dependencies", []) if isinstance(data, dict) else []
    flat: list[Any] = []
    for entry in entries or []:
        flat += entry.get("pip", []) if isinstance(entry, dict) else [entry]
    for entry in flat:
        if not isinstance(entry, str):
            continue
        written = re.sub(r"^(deep[-_.]?speed)\s*=(?!=)\s*", r"\1==", entry.strip(), flags=re.IGNORECASE)
        pin = _from_requirement(path, text, written)
        if pin is not None:
            return Pin(path, _line_of(text, entry.strip()), entry.strip(), pin.specifier.rstrip("*").rstrip("."))
    return None


def _pipfile(path: str, text: str) -> Pin | None:
    data = tomllib.loads(text)
    for group in ("packages", "dev-packages"):
        for name, value in (data.get(group, {}) or {}).items():
            if _NAME.match(name):
                version = value.get("version", "*") if isinstance(value, dict) else str(value)
                return Pin(path, _line_of(text, name), f"{name} = {version!r}", "" if version == "*" else version)
    return None


def installed_release() -> str | None:
    """The installed DeepSpeed's version from its metadata (DeepSpeed is never imported)."""
    from importlib import metadata

    try:
        return metadata.version("deepspeed")
    except metadata.PackageNotFoundError:
        return None
