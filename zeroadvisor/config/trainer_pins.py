"""The trainer's release (TRL, LLaMA-Factory, axolotl, ms-swift, OpenRLHF) from the user's pins, as DeepSpeed's is
found (config/pins.py): the same files, in the same order, nearest folder first up to the repository root, each read
as untrusted input once a run (config/pin_files.py: bounded, regular files inside the repository), and else the
installed distribution's metadata. Whatever a file holds is at worst no answer, never an error.

A pin is read where the file writes the distribution's requirement as text: a requirements line or a quoted
PEP 508 string (``trl==0.21.0``, ``"trl>=0.19,<0.22"``, pyproject's dependencies, setup.py's install_requires), a
lock file's ``name = "trl"`` block with its ``version`` (uv.lock, poetry.lock, pdm.lock), Pipfile.lock's
``"trl": {"version": "==0.21.0"``, conda's ``- trl=0.21.0``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import partial

from zeroadvisor.config import pin_files, pins
from zeroadvisor.vocab import TrainerFamily

# The PyPI distribution each trainer is installed as (PEP 503 names).
DISTRIBUTIONS: dict[TrainerFamily, str] = {
    TrainerFamily.TRL: "trl", TrainerFamily.LLAMA_FACTORY: "llamafactory", TrainerFamily.AXOLOTL: "axolotl",
    TrainerFamily.MS_SWIFT: "ms-swift", TrainerFamily.OPENRLHF: "openrlhf"}
_VERSION = r"[A-Za-z0-9.*+!_-]+"
_OPERATOR = r"(?:~=|===|==|!=|<=|>=|<|>)"
_SPECIFIERS = rf"{_OPERATOR}\s*{_VERSION}(?:\s*,\s*{_OPERATOR}\s*{_VERSION})*"
_SHOWN = 80


@dataclass(frozen=True, slots=True)
class TrainerPin:
    """The trainer's requirement where it was found: ``version`` a release ("0.21.0") where the pin is exact,
    else the PEP 440 specifier set (">=0.19,<0.22")."""

    version: str
    origin: str  # "trl==0.21.0 at requirements.txt:3", "the installed trl 0.21.0"


def _name_pattern(name: str) -> str:
    """A PEP 503 name matched with any of its separators (ms-swift, ms_swift, ms.swift)."""
    return r"[-_.]".join(re.escape(part) for part in name.split("-"))


def _patterns(name: str) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    named = _name_pattern(name)
    requirement = re.compile(rf"(?<![A-Za-z0-9_.-])({named})\s*(?:\[[^\]\n]*\])?\s*({_SPECIFIERS})", re.IGNORECASE)
    # a lock's block: name = "trl" then, within the block, version = "0.21.0"
    locked = re.compile(rf"^name\s*=\s*\"{named}\"\s*$[^\[]*?^version\s*=\s*\"({_VERSION})\"",
                        re.IGNORECASE | re.MULTILINE)
    # conda: - trl=0.21.0 / - trl 0.21.0 (one = is conda's "this release line")
    conda = re.compile(rf"^\s*-\s*(?:[A-Za-z0-9_-]+::)?{named}\s*(?:=|\s)\s*({_VERSION})\s*$",
                       re.IGNORECASE | re.MULTILINE)
    return requirement, locked, conda


def _parse(name: str, path: str, text: str) -> tuple[str, int, str] | None:
    """(the requirement as written, its line, the version or specifier) of ``name`` in ``text``; None where the
    file does not pin it."""
    requirement, locked, conda = _patterns(name)
    base = os.path.basename(path)
    if base.endswith(".lock"):
        match = locked.search(text)
        if match:
            line = text.count("\n", 0, match.start(1)) + 1
            return f"{name} {match.group(1)} (locked)", line, match.group(1)
    if base.startswith("environment."):
        match = conda.search(text)
        if match:
            return match.group(0).strip(), text.count("\n", 0, match.start()) + 1, f"=={match.group(1)}"
    for match in requirement.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if text[line_start:match.start()].lstrip().startswith("#"):
            continue  # a comment
        specifier = re.sub(r"\s+", "", match.group(2))
        return f"{match.group(1)}{specifier}"[:_SHOWN], text.count("\n", 0, match.start()) + 1, specifier
    return None


def find_trainer_pin(start: str, family: TrainerFamily) -> TrainerPin | None:
    """The trainer's pin nearest ``start`` (a file or folder), up to the repository root; else the installed
    distribution's version; None where neither says."""
    return find_distribution_pin(start, DISTRIBUTIONS[family])


def find_distribution_pin(start: str, name: str, *, installed: bool = True) -> TrainerPin | None:
    """The pin of the distribution ``name`` (a PEP 503 name: "trl", "transformers") nearest ``start``, read as the
    trainers' are; else, with ``installed``, the installed distribution's version; None where nothing says."""
    folder = start if os.path.isdir(start) else os.path.dirname(os.path.abspath(start))
    root = pins._repository_root(folder)
    for each in pins._folders(folder, root):
        top = root or each
        for path, _ in pins._candidates(each, top, []):
            try:
                found = pin_files.parse_once(path, top, f"trainer-pin:{name}", partial(_parse, name))
            except pin_files.Skipped:
                continue
            if found is not None:
                written, line, specifier = found
                return TrainerPin(_release(specifier), f"{written} at {pins._shown_path(path)}:{line}")
    return _installed(name) if installed else None


def _release(specifier: str) -> str:
    """``==0.21.0`` as the release 0.21.0; any other specifier set as written."""
    if specifier.startswith("===") and "," not in specifier:
        return specifier[3:]
    if specifier.startswith("==") and "," not in specifier and "*" not in specifier:
        return specifier[2:]
    return specifier


def _installed(name: str) -> TrainerPin | None:
    from importlib import metadata

    try:
        version = metadata.version(name)
    except (metadata.PackageNotFoundError, ValueError):
        return None
    return TrainerPin(version, f"the installed {name} {version}")
