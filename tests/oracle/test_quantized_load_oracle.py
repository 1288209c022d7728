"""The load path zeroadvisor assumes for a quantized (QLoRA) model, against transformers itself.

memory/phases.py resolve_load: at stage 3 a bitsandbytes-quantized model is never created under
``deepspeed.zero.Init``, whatever zero3_init_flag or --zero-init say. transformers decides this in
``PreTrainedModel.get_init_context``; here it is asked, with a stage-3 DeepSpeed config active
(``HfDeepSpeedConfig``, the object the Trainer and accelerate create before from_pretrained), for both a
quantized and an unquantized model.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.oracle, pytest.mark.slow]  # one DeepSpeed process on CPU: a minute

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("deepspeed")

from zeroadvisor.memory.options import configured_option  # noqa: E402
from zeroadvisor.memory.phases import LoadInputs, resolve_load  # noqa: E402
from zeroadvisor.memory.settings import read_settings  # noqa: E402
from zeroadvisor.model.spec import ModelSpec  # noqa: E402

CONFIG = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}

# One CPU rank over gloo (zero.Init needs a process group), in its own process: DS_ACCELERATOR is read when
# deepspeed is first imported. Prints whether get_init_context enters zero.Init, unquantized then quantized.
PROBE = """
import json, os, socket, sys
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
os.environ.update(DS_ACCELERATOR="cpu", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0",
                  WORLD_SIZE="1", LOCAL_RANK="0")
import deepspeed, torch, transformers
from transformers.integrations.deepspeed import HfDeepSpeedConfig
deepspeed.init_distributed(dist_backend="gloo")
keep = HfDeepSpeedConfig(json.loads(sys.argv[1]))  # what the Trainer creates before from_pretrained
out = []
for quantized in (False, True):
    contexts = transformers.PreTrainedModel.get_init_context(
        torch.bfloat16, is_quantized=quantized, _is_ds_init_called=False, allow_all_kernels=False)
    out.append(any(isinstance(c, deepspeed.zero.Init) for c in contexts))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def transformers_enters_zero_init() -> dict[bool, bool]:
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(CONFIG)], check=False, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    unquantized, quantized = json.loads(proc.stdout.strip().splitlines()[-1])
    return {False: unquantized, True: quantized}


@pytest.mark.parametrize("quantized", [False, True])
def test_zero_init_in_effect_as_transformers_decides(quantized, transformers_enters_zero_init):
    spec = ModelSpec(parameters=1_000_000, largest_layer_parameters=10_000)
    s = read_settings(CONFIG, spec, 2)
    option, _ = configured_option(s)
    for given in (None, True):
        _, ours, _ = resolve_load(LoadInputs(load_dtype="bf16", zero_init=given), s, option, quantized=quantized)
        assert ours == transformers_enters_zero_init[quantized]
