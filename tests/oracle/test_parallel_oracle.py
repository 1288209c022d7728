"""Oracle: the parallel layout (memory/parallel.py) against DeepSpeed's own group and batch arithmetic,
on 2 CPU ranks over gloo (tests/oracle/parallel_groups_probe.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("deepspeed")
pytest.importorskip("torch")

from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.model.spec import ModelSpec

PROBE = Path(__file__).with_name("parallel_groups_probe.py")


@pytest.mark.oracle
@pytest.mark.slow  # two DeepSpeed ranks over gloo
def test_batch_world_and_zero_group_match_deepspeed(tmp_path):
    out = tmp_path / "groups.json"
    done = subprocess.run([sys.executable, str(PROBE), str(out)], capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    measured = json.loads(out.read_text())
    sys.path.insert(0, str(PROBE.parent))
    from parallel_groups_probe import CONFIGS, WORLD

    for name, config in CONFIGS.items():
        est = estimate(config, ModelSpec(parameters=10**6), cluster=Cluster(gpus=WORLD))
        assert est.parallel.batch_world() == measured[name]["batch_world"], name
        assert est.settings.micro_batch == measured[name]["micro_batch"], name
    autotp = estimate(CONFIGS["tensor"], ModelSpec(parameters=10**6), cluster=Cluster(gpus=WORLD))
    assert autotp.parallel.data == measured["tensor"]["zero_group"] == 1
