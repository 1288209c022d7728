"""The release eras of memory/ds_changes.py against the DeepSpeed sources CI installs side by side (.ci/run:
tools/install_deepspeed_release.py --ci into .venv/deepspeed-releases) and the venv's own release: each release's
stage_1_and_2.py runs the code its era names."""

from __future__ import annotations

import os
import pathlib

import pytest

from conftest import load_script
from zeroadvisor.deepspeed import releases
from zeroadvisor.memory.ds_changes import OFFLOAD_STEP_COPY, OVERFLOW_CHECK, era

pytestmark = [pytest.mark.oracle]
deepspeed = pytest.importorskip("deepspeed")

installer = load_script("tools/install_deepspeed_release.py", "install_deepspeed_release")
RELEASES_DIR = pathlib.Path(os.environ.get("ZEROADVISOR_RELEASES_DIR", installer.DEFAULT_INTO))
ZERO = pathlib.Path("deepspeed", "runtime", "zero", "stage_1_and_2.py")
# the code each era's bytes come from, as each release spells it
OVERFLOW_CODE = {"0.0": "float(x.float().sum())", "0.13.3": "float_x = x.float()",
                 "0.19.6": "return has_inf_or_nan(x)"}
STEP_CODE = {"0.0": "bit16_partitions[partition_id].data.copy_(fp32_partition.data)",
             "0.14.1": "fp32_partition.to(get_accelerator().current_device_name())",
             "0.17.0": "bit16_partition_buffer.data.copy_(fp32_partition.data)"}


def _source(version: str) -> str:
    if version == deepspeed.__version__:
        return pathlib.Path(deepspeed.__file__).parent.joinpath(*ZERO.parts[1:]).read_text()
    path = RELEASES_DIR / version / ZERO
    if not path.is_file():
        pytest.skip(f"DeepSpeed {version} not installed in {RELEASES_DIR}: "
                    "python tools/install_deepspeed_release.py --ci")
    return path.read_text()


@pytest.mark.parametrize("version", [*installer.CI_RELEASES, deepspeed.__version__])
def test_each_release_runs_the_code_of_its_era(version):
    source = _source(version)
    assert OVERFLOW_CODE[era(OVERFLOW_CHECK, version).since] in source
    step = era(OFFLOAD_STEP_COPY, version)
    assert STEP_CODE[step.since] in source
    if not step.bytes_per_element:  # no fp32 partition moved to the GPU
        assert STEP_CODE["0.14.1"] not in source


def test_the_venvs_release_is_the_one_the_model_follows():
    assert deepspeed.__version__ == releases.latest()
