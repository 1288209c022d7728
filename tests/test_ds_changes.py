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
