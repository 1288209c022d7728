"""What each DeepSpeed release from 0.9.0 to 0.19.8 reads, from the committed zeroadvisor/schemas/ds_releases.json.

Every release pip serves is known, patch by patch. Releases whose configuration code is the same (one source
fingerprint, tools/ds_release_sources.py) share one entry: the others say ``same_as`` it. The latest
release's schema (ds_config.schema.json) is the one full schema; every other entry is a merge patch over the
schema of the next newer entry (``base``), generated from that release's own code and parser
(tools/gen_releases.py). ``patch`` and ``base`` give an entry's patch and what it patches; the schema module
applies them (``schema.of_release``) and serves the whole schema to every reader (the lint walk, the rules, the
memory model's defaults) while a release is active (``schema.reading_as``). ``behaviour`` holds what a schema
cannot say (the string "auto" switching fp16 on before 0.17, checks added in a patch release).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import NotRequired, TypedDict

from zeroadvisor.jsontypes import JSONObject

RELEASES_FILE = "ds_releases.json"
# How a finding names the release that reads the config so: rules word "DeepSpeed <release> ..." with
# ``label``; a range's lint (rules/linter.py by_release) swaps in the releases that share the finding.
LABEL = "DeepSpeed {releases}"
_SCHEMAS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "schemas")


@dataclass(frozen=True, slots=True)
class Behaviour:
    """What a release's parser does that its schema does not say (tools/gen_releases.py BEHAVIOUR)."""

    precision_auto_enables: bool  # fp16/bf16 read with dict.get: "auto" is truthy and switches the mode on
    fp16_loss_scale_window_checked: bool  # loss_scale_window <= 0 refused with dynamic loss scaling
    fp16_min_loss_scale_checked: bool  # min_loss_scale <= 0 refused with dynamic loss scaling
    allreduce_sum_zero3_refused: bool  # gradient_allreduce_op "sum" refused with ZeRO-3
    partial_offload_stage_checked: bool  # offload_optimizer.ratio < 1 refused below ZeRO-3
    muon_zero3_refused: bool  # the Muon optimizer asserts ZeRO stage <= 2 (engine)
    muon_reduce_scatter_zero3_refused: bool  # Muon with zero_optimization.reduce_scatter at ZeRO-3 (stage3.py)
    muon_reduce_scatter_offload_refused: bool  # Muon with reduce_scatter and optimizer offload at ZeRO-1/2
    unmanaged_accumulation_offload_refused: bool  # managed_gradient_accumulation false with ZeRO offload
    unmanaged_accumulation_amp_refused: bool  # managed_gradient_accumulation false with Apex AMP


class _Entry(TypedDict):
    """One release of ds_releases.json: its own knowledge, or ``same_as`` the release it reads configs as."""

    source: str
    same_as: NotRequired[str]
    pydantic: NotRequired[str]
    behaviour: NotRequired[dict[str, bool]]  # Behaviour's fields
    patch: NotRequired[JSONObject]  # a merge patch over the schema of ``base``
    base: NotRequired[str]  # absent: the latest schema


_Knowledge = TypedDict("_Knowledge", {
    "description": str,
    "x-generator": str,
    "latest": str,
    "releases": dict[str, _Entry],  # oldest first
    "history": dict[str, str],  # key pointer -> the runs of releases that read it ("0.9.0-0.17.0, 0.18.3-0.19.8")
})


@cache
def _data() -> _Knowledge:
    # tools/gen_releases.py writes the file in this shape; tests/test_releases*.py read it whole
    with open(os.path.join(_SCHEMAS, RELEASES_FILE), encoding="utf-8") as stream:
        data: _Knowledge = json.load(stream)
    return data


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def known() -> tuple[str, ...]:
    """Every release zeroadvisor has knowledge of, oldest first."""
    return tuple(_data()["releases"])


def latest() -> str:
    """The release the full schema describes (the oracle's DeepSpeed)."""
    return _data()["latest"]


def behaviour(version: str) -> Behaviour:
    return Behaviour(**_entry(version)["behaviour"])


def patch(version: str) -> JSONObject:
    """One release's merge patch over the schema of its ``base`` (schema.of_release applies it)."""
    return _entry(version)["patch"]


def base(version: str) -> str | None:
    """The release whose whole schema ``patch(version)`` patches; None: the latest schema."""
    return _entry(version).get("base")


def releases_knowing(pointer: str) -> tuple[str, ...] | None:
    """The releases that read the key at ``pointer`` (object keys from the root), when not every release does;
    None where every known release reads it (or none does)."""
    having = _data()["history"].get(pointer)
    return _expand(having) if having is not None else None


@cache
def _expand(spans: str) -> tuple[str, ...]:
    """ "0.10.0-0.13.1, 0.16.6-0.19.8" (the history's runs of consecutive known releases) as the releases."""
    order = known()
    out: list[str] = []
    for run in spans.split(", "):
        first, _, last = run.partition("-")
        out.extend(order[order.index(first):order.index(last or first) + 1])
    return tuple(out)


def span(versions: Iterable[str]) -> str:
    """Releases as runs of consecutive known releases: "0.14.5-0.16.9, 0.19.8"; a whole release line is
    written as the line ("0.14-0.16")."""
    order = known()
    chosen = sorted(set(versions), key=version_key)
    runs: list[list[str]] = []
    for version in chosen:
        if runs and order.index(version) == order.index(runs[-1][-1]) + 1:
            runs[-1].append(version)
        else:
            runs.append([version])
    return ", ".join(_run_text(run, order) for run in runs)


def _run_text(run: Sequence[str], order: Sequence[str]) -> str:
    first, last = run[0], run[-1]
    lines = {_line(v) for v in order}
    whole_first = all(v in run for v in order if _line(v) == _line(first))
    whole_last = all(v in run for v in order if _line(v) == _line(last))
    start = _line(first) if whole_first and len(lines) > 1 else first
    end = _line(last) if whole_last and len(lines) > 1 else last
    return start if start == end else f"{start}-{end}"


def label(versions: str) -> str:
    """The words a finding names releases with: "DeepSpeed 0.15.4", "DeepSpeed 0.14-0.16"."""
    return LABEL.replace("{releases}", versions)


def _line(version: str) -> str:
    return ".".join(version.split(".")[:2])


class RequestError(ValueError):
    """A release request that names no known release (the message says what zeroadvisor knows)."""


_VERSION = re.compile(r"^\d{1,4}\.\d{1,4}(\.\d{1,4})?$")
_SHOWN = 60  # characters of a request echoed in an error


@dataclass(frozen=True, slots=True)
class Resolved:
    """The known releases a request stands for, oldest first, and notes on how it was read."""

    releases: tuple[str, ...]
    notes: tuple[str, ...] = ()


def is_version(text: str) -> bool:
    """X.Y or X.Y.Z, digits only (a local or pre-release suffix is not a release zeroadvisor knows)."""
    return _VERSION.match(text) is not None


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def knowledge() -> str:
    """What zeroadvisor knows, in words, for an error."""
    order = known()
    return f"zeroadvisor knows DeepSpeed {order[0]} to {order[-1]} (release lines {_line(order[0])}-{_line(order[-1])})"


def nearest(version: str) -> Resolved | None:
    """The known release standing for ``version``: itself, else the newest known of its line at or below it, else
    the oldest known of its line (with a note); None where its line is not known at all."""
    order = known()
    if version in order:
        return Resolved((version,))
    line = [v for v in order if _line(v) == _line(version)]
    if not line:
        return None
    below = [v for v in line if version_key(v) <= version_key(version)]
    chosen = below[-1] if below else line[0]
    note = f"DeepSpeed {version}: no knowledge of this release; read as {chosen}, the nearest known release of its line"
    return Resolved((chosen,), (note,))


def resolve(request: str) -> Resolved:
    """A release (0.14.5), a release line (0.14: each known 0.14.x) or a PEP 440 range (>=0.10,<=0.16.9: each
    known release in it); RequestError where it names no known release."""
    text = request.strip()
    if not text:  # an empty specifier set admits every release: as a request it names none
        raise RequestError(f"'': not a DeepSpeed version (0.14.5), release line (0.14) or PEP 440 range; {knowledge()}")
    if _VERSION.match(text):
        if text.count(".") == 1:
            line = tuple(v for v in known() if _line(v) == text)
            if not line:
                raise RequestError(f"{text}: {knowledge()}")
            return Resolved(line)
        found = nearest(text)
        if found is None:
            raise RequestError(f"{text}: {knowledge()}")
        return found
    return matching(text)


def matching(specifier: str) -> Resolved:
    """The known releases a PEP 440 specifier set admits (no pre-releases). An exact ==X.Y.Z zeroadvisor has no
    knowledge of is read as the nearest of its line; a range that admits no known release is an error (reading
    it as some other release would be a guess)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        spec = SpecifierSet(specifier)
    except InvalidSpecifier:
        raise RequestError(f"{_shown(specifier)!r}: not a DeepSpeed version (0.14.5), release line (0.14) or PEP 440 "
                           "range (>=0.10,<0.17)") from None
    exact = [s.version for s in spec if s.operator in ("==", "===") and "*" not in s.version]
    if len(exact) == 1 and _VERSION.match(exact[0]) and exact[0] not in known():
        found = nearest(exact[0])
        if found is not None:
            return found
    admitted = tuple(v for v in known() if spec.contains(v, prereleases=False))
    if not admitted:
        raise RequestError(f"{_shown(specifier)}: admits no release zeroadvisor knows; {knowledge()}")
    return Resolved(admitted)


def _entry(version: str) -> _Entry:
    """The release's entry, or the entry of the release it reads configs as (``same_as``: the same source)."""
    try:
        entry = _data()["releases"][version]
    except KeyError:
        raise KeyError(f"no knowledge of DeepSpeed {version}") from None
    if "same_as" in entry:
        return _data()["releases"][entry["same_as"]]
    return entry


def reads_as(version: str) -> str:
    """The release whose entry ``version`` shares (itself where it has its own)."""
    return _data()["releases"][version].get("same_as", version)


@cache
def _run_starts() -> dict[str, str]:
    starts: dict[str, str] = {}
    start, shared = "", ""
    for version in known():
        if reads_as(version) != shared:
            start, shared = version, reads_as(version)
        starts[version] = start
    return starts


def reads_like(version: str) -> str:
    """The first release of the run of consecutive known releases that share ``version``'s entry. The rules say the
    same of every release of a run, but for its name: their words depend on the entry and on which releases before
    and after know a key, and no release of another entry lies between two of one run."""
    return _run_starts()[version]
