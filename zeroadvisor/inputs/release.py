"""Which DeepSpeed releases a config is read as: the first of the flag (or keyword), the project configuration's
``deepspeed_version``, the pin found beside the config (config/pins.py), the installed DeepSpeed's metadata,
and else the latest release, said as an assumption.

What a request means (a release, a release line, a PEP 440 range) is deepspeed/releases.py ``resolve``; this
module only decides which request applies, and names where it came from in errors and notes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from zeroadvisor.config.pins import clear_cache, find_pin, installed_release
from zeroadvisor.deepspeed import releases
from zeroadvisor.inputs.errors import UsageError

if TYPE_CHECKING:
    from zeroadvisor.deepspeed.settings import Config
    from zeroadvisor.memory.estimate import Estimate

_SHOWN = 60  # characters of a request echoed in a note


@dataclass(frozen=True, slots=True)
class ReleaseChoice:
    releases: tuple[str, ...]  # known releases, oldest first, at least one
    origin: str  # flag, project, pin, installed or assumed
    source: str  # what decided, in words
    notes: tuple[str, ...] = ()

    @property
    def assumed(self) -> bool:
        return self.origin == "assumed"

    def describe(self) -> str:
        return f"read as DeepSpeed {releases.span(self.releases)} ({self.source})"


def parse_request(text: str, given_as: str = "--deepspeed-version") -> releases.Resolved:
    """A release request, or a UsageError naming where it was given."""
    try:
        return releases.resolve(text)
    except releases.RequestError as err:
        raise UsageError(f"{given_as} {err}") from None


class _PerFolder:
    """The pin choice of each folder, once a run (configs side by side share it); ``cache_clear`` also forgets the
    files read, which config/pins.py keeps per file version (a file rewritten within a timestamp tick keeps its)."""

    def __init__(self) -> None:
        self._cached = lru_cache(maxsize=256)(_pin_choice_of)

    def __call__(self, folder: str) -> tuple[ReleaseChoice | None, tuple[str, ...]]:
        return self._cached(folder)

    def cache_clear(self) -> None:
        self._cached.cache_clear()
        clear_cache()


def _pin_choice_of(folder: str) -> tuple[ReleaseChoice | None, tuple[str, ...]]:
    """The choice the pin beside ``folder`` makes, else None; and the search's notes (files it could not read),
    which go with whatever choice is made."""
    search = find_pin(os.path.join(folder, "_"))
    pin = search.pin
    if pin is None or not pin.specifier:
        return None, search.notes  # no pin, or "deepspeed" with no version: it does not say which release
    try:
        found = releases.matching(pin.specifier)
    except releases.RequestError as err:
        raise UsageError(f"{pin.describe()}: {err}; set --deepspeed-version") from None
    return ReleaseChoice(found.releases, "pin", pin.describe(), (*search.notes, *found.notes)), ()


_pin_choice = _PerFolder()


def choose_release(*, flag: str | None, config_path: str | None, flag_name: str = "--deepspeed-version"
                   ) -> ReleaseChoice:
    """The releases one config is read as, and why (the module docstring gives the order). The project
    configuration's value arrives as ``flag`` (the run's inputs hold whichever was given, flag_name its words)."""
    if flag is not None:
        found = parse_request(str(flag), flag_name)
        shown = flag if len(flag) <= _SHOWN else flag[:_SHOWN] + "…"
        return ReleaseChoice(found.releases, "flag", f"{flag_name} {shown}", found.notes)
    search_notes: tuple[str, ...] = ()
    if config_path is not None:
        pinned, search_notes = _pin_choice(os.path.dirname(os.path.abspath(config_path)))  # shared side by side
        if pinned is not None:
            return pinned
    installed = installed_release()
    near = releases.nearest(installed.split("+")[0]) if installed and releases.is_version(installed.split("+")[0]) \
        else None
    if installed is not None and near is not None:
        return ReleaseChoice(near.releases, "installed", f"installed deepspeed {installed}",
                             (*search_notes, *near.notes))
    latest = releases.latest()
    return ReleaseChoice((latest,), "assumed", f"no DeepSpeed version pinned beside the config: assumed the latest, "
                         f"{latest}; set {flag_name} or pin deepspeed in requirements.txt", search_notes)


def say_release(result: Estimate, release: ReleaseChoice, data: Config) -> Estimate:
    """``result`` saying which release's defaults the estimate read of the config ``data``, where the user did
    not name it, and the release as an assumed input where nothing said it and one of its defaults moves the
    numbers (memory/assumed.py). A new Estimate: a built one is never changed."""
    from dataclasses import replace

    from zeroadvisor.memory.assumed import release_assumption
    from zeroadvisor.memory.phases import FLAT_COPY_KEY
    from zeroadvisor.memory.step_temporaries import BOUNDARY_NORM_KEY
    from zeroadvisor.vocab import Device, Phase, Resource

    if release.origin in ("flag", "project") or data is None:
        return result  # asked for by name (said by the asker), or no config (no offload default read)
    newest = release.releases[-1]
    newest_said = f"; of the range, the newest: {newest}" if len(release.releases) > 1 else ""
    configured = result.configured
    # the configured stage 1/2 run peaks at load with the flat copy beside the model on the GPU (0.19.0+ only)
    flatten_binds = configured is not None and configured.binding_phase == Phase.LOAD and any(
        t.key == FLAT_COPY_KEY and t.device == Resource.GPU and t.phase == Phase.LOAD for t in configured.terms)
    # stage 1/2 with the optimizer offloaded: older releases' step and backward boundary allocate more on the GPU
    offload12 = configured is not None and configured.option.stage in (1, 2) and \
        configured.option.offload_optimizer != Device.NONE
    boundary_counts = configured is not None and any(
        t.key == BOUNDARY_NORM_KEY and t.nbytes and t.phase == Phase.TRAIN for t in configured.terms)
    assumed = (release_assumption(data, newest, flatten_binds, offload12, boundary_counts) if release.assumed
               else None)
    return replace(result, assumptions=(*result.assumptions, f"DeepSpeed's defaults {release.describe()}{newest_said}"),
                   assumed=(*result.assumed, *([assumed] if assumed is not None else [])))


def release_notes(release: ReleaseChoice, said: list[str]) -> list[str]:
    """What decided the DeepSpeed release of the configs, said where it was not asked for: the pin found beside
    them (its file and line), or the assumption of the latest; each once per run, however many configs share it."""
    if release.origin in ("flag", "project", "installed"):
        return [note for note in release.notes if note not in said]
    return [text for text in (release.describe(), *release.notes) if text not in said]
