"""Oracle: the copies of TRL's own accelerate configs shipped in zeroadvisor/schemas/trl/ (config/launch.py
TRL_ACCELERATE_CONFIGS, what ``trl CMD --accelerate_config NAME`` launches with) are the installed TRL's files, byte for
byte, and TRL ships no other."""

from __future__ import annotations

from importlib import resources
from importlib.util import find_spec
from pathlib import Path

import pytest

from zeroadvisor.config.launch import TRL_ACCELERATE_CONFIGS, trl_accelerate_config

pytestmark = [pytest.mark.oracle]


def test_the_shipped_copies_are_the_installed_trl_s_files():
    spec = find_spec("trl")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("trl is not installed")
    folder = Path(next(iter(spec.submodule_search_locations))) / "accelerate_configs"  # no import of trl itself
    installed = sorted(path.stem for path in folder.glob("*.yaml"))
    assert installed == sorted(TRL_ACCELERATE_CONFIGS)
    for name in TRL_ACCELERATE_CONFIGS:
        shipped = trl_accelerate_config(name)
        assert shipped is not None
        assert Path(shipped).read_bytes() == (folder / f"{name}.yaml").read_bytes(), name
    assert resources.files("zeroadvisor.schemas").joinpath("trl").is_dir()
