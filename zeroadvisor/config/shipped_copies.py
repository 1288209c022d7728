"""Copies of the DeepSpeed configs a trainer ships with its code, by the release where each content first appears:
``zeroadvisor/schemas/<folder>/<stem>@<release>.json``, copied verbatim from that trainer's tag. A release reads the
newest content at or before it; a range of releases reads the newest content it admits (an assumption where the
range admits several). The trainers' own modules (config/swift_configs.py, config/example_configs.py) say which
name maps to which file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from zeroadvisor.jsontypes import JSONObject


@dataclass(frozen=True, slots=True)
class ShippedConfig:
    """One of a trainer's own configs as a release ships it."""

    project: str  # the trainer, as its docs name it
    path: str  # in the trainer's repository, e.g. examples/deepspeed/ds_z3_config.json
    content_since: str  # the first release shipping this content
    release: str  # the release it is read for, as the pin gives it (or the newest content's, "X or later")
    text: str  # verbatim

    @property
    def data(self) -> JSONObject:
        return parsed(self.text)

    @property
    def display(self) -> str:
        """How findings name it: the trainer, its release and the file."""
        return f"{self.project} {self.release} {self.path}"


# far above any release: a requirement that admits it has no upper bound (the newest content applies)
_UNBOUNDED = Version("9999")


def contents(folder: str, stem: str) -> list[Version]:
    """The releases where ``stem``'s content changed (the shipped copies), ascending."""
    found = []
    for entry in resources.files("zeroadvisor.schemas").joinpath(folder).iterdir():
        base, _, version = entry.name.removesuffix(".json").partition("@")
        if base == stem and version:
            found.append(Version(version))
    return sorted(found)


def release_for(requirement: str | None, releases: list[Version]) -> tuple[Version | None, bool]:
    """The release to read a config as: an exact pin's, else the newest content a requirement admits; and whether
    it is known (False: no pin, or a range over which the content differs: the newest is taken). ``releases``:
    where the content changed, ascending. A range reads the content in force at its lower bound (the oldest copy
    without one) and each content that begins inside it."""
    if requirement is None:
        return None, False
    try:
        return Version(requirement), True
    except InvalidVersion:
        pass
    try:
        spec = SpecifierSet(requirement)
    except InvalidSpecifier:
        return None, False
    if spec.contains(_UNBOUNDED, prereleases=True) or not releases:
        return None, False
    floors = [Version(each.version.removesuffix(".*")) for each in spec
              if each.operator in (">=", ">", "~=", "==", "===") and _is_version(each.version.removesuffix(".*"))]
    floor = content_at(releases, max(floors)) if floors else releases[0]
    read = {v for v in releases if spec.contains(v, prereleases=True)} | ({floor} if floor is not None else set())
    return (max(read), len(read) == 1) if read else (None, False)


def _is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def content_at(releases: list[Version], chosen: Version | None) -> Version | None:
    """The copy ``chosen`` reads (None: not known, the newest); None where it is older than every copy."""
    applies = [v for v in releases if chosen is None or v <= chosen]
    return applies[-1] if applies else None


def read_copy(folder: str, stem: str, since: Version) -> str:
    """The shipped copy of ``stem`` whose content first appears at ``since``: its text, verbatim as the trainer
    ships it (a diff of a fix then applies to the trainer's own file)."""
    return resources.files("zeroadvisor.schemas").joinpath(folder, f"{stem}@{since}.json").read_text("utf-8")


def parsed(text: str) -> JSONObject:
    """A shipped copy's data (each is a JSON object: the tests hold them so)."""
    data: JSONObject = json.loads(text)
    return data
