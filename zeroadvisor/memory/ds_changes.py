"""Allocations that changed between DeepSpeed releases: the first release that runs the newer code, read from each
release's source (pip serves every one; `pip download deepspeed==X --no-binary :all:`).

The memory model follows DeepSpeed 0.19.8; a run on an older release (pinned beside the config, installed, or
given with --deepspeed-version) is costed with the allocation its release makes, where the two differ. One row per
change: a table, not a chain of version checks in the terms.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from zeroadvisor.deepspeed.releases import version_key


class Change(StrEnum):
    """One allocation that differs by release."""

    # runtime/zero/stage_1_and_2.py DeepSpeedZeroOptimizer.__init__: up to 0.18.9 every bit16 parameter is moved to
    # the host (param.cpu_data = param.data.cpu()), flattened there and the flat buffer moved back ("create flat
    # buffer in CPU"); from 0.19.0 the flat buffer is built on the accelerator next to the parameters when
    # accelerator.available_memory() >= its bytes (flatten_on_accelerator), else on the host as before
    FLATTEN_ON_ACCELERATOR = "flatten_on_accelerator"


@dataclass(frozen=True, slots=True)
class ReleaseChange:
    since: str  # the first release that runs the newer code
    source: str  # where it is, in the newer release


CHANGES: dict[Change, ReleaseChange] = {
    Change.FLATTEN_ON_ACCELERATOR: ReleaseChange(
        "0.19.0", "runtime/zero/stage_1_and_2.py DeepSpeedZeroOptimizer.__init__ (flatten_on_accelerator)"),
}


def runs(change: Change, release: str) -> bool:
    """Whether DeepSpeed ``release`` (a known release, "0.14.5") runs the newer code of ``change``."""
    return version_key(release) >= version_key(CHANGES[change].since)
