"""Allocations that changed between DeepSpeed releases (zeroadvisor/memory/ds_changes.py): each row names a release
pip serves, and the newer code runs from it on."""

from __future__ import annotations

import pytest

from zeroadvisor.deepspeed import releases
from zeroadvisor.memory.ds_changes import CHANGES, Change, runs


@pytest.mark.parametrize("change", list(Change))
def test_every_change_starts_at_a_known_release(change):
    assert CHANGES[change].since in releases.known()
    assert CHANGES[change].source


def test_flatten_on_the_accelerator_from_0_19_0():
    # read in the sdists: 0.18.9's stage_1_and_2.py has no flatten_on_accelerator, 0.19.0's has it
    assert not runs(Change.FLATTEN_ON_ACCELERATOR, "0.18.9")
    assert not runs(Change.FLATTEN_ON_ACCELERATOR, "0.14.5")
    assert runs(Change.FLATTEN_ON_ACCELERATOR, "0.19.0")
    assert runs(Change.FLATTEN_ON_ACCELERATOR, releases.latest())


def test_the_eras_read_in_the_sdists():
    """Read in every release's stage_1_and_2.py (pip download --no-binary): the overflow check's bytes per element
    and the offload step's fp32 copy on the GPU (tests/oracle/test_ds_changes_sources.py checks the installed ones)."""
    from zeroadvisor.memory.ds_changes import OFFLOAD_STEP_COPY, OVERFLOW_CHECK, era, releases_of

    check = {r: era(OVERFLOW_CHECK, r).bytes_per_element for r in ("0.8.3", "0.13.2", "0.13.3", "0.16.9", "0.19.5",
                                                                   "0.19.6", releases.latest())}
    assert check == {"0.8.3": 4, "0.13.2": 4, "0.13.3": 11, "0.16.9": 11, "0.19.5": 11, "0.19.6": 0,
                     releases.latest(): 0}
    step = {r: era(OFFLOAD_STEP_COPY, r).bytes_per_element for r in ("0.14.0", "0.14.1", "0.16.9", "0.17.0")}
    assert step == {"0.14.0": 0, "0.14.1": 4, "0.16.9": 4, "0.17.0": 0}
    assert releases_of(OFFLOAD_STEP_COPY, era(OFFLOAD_STEP_COPY, "0.15.0")) == "0.14.1 to 0.16.9"
    assert releases_of(OVERFLOW_CHECK, era(OVERFLOW_CHECK, "0.16.9")) == "0.13.3 to 0.19.5"
    assert releases_of(OVERFLOW_CHECK, era(OVERFLOW_CHECK, releases.latest())) == "0.19.6 on"
    for eras in (OVERFLOW_CHECK, OFFLOAD_STEP_COPY):
        assert all(e.since == "0.0" or e.since in releases.known() for e in eras)
        assert [releases.version_key(e.since) for e in eras] == sorted(releases.version_key(e.since) for e in eras)
