"""What TRL's ``prepare_deepspeed`` leaves in memory for a reference model, measured on this CPU (issue 35).

``prepare_deepspeed`` (``trl/models/utils.py``) builds an inference DeepSpeed engine for a frozen model (DPO/KTO's
reference, GRPO's reference and reward models) from a copy of the user's ds_config: stage 3 kept, any other stage
set to 0. Up to TRL 1.9.0 the copy keeps the ``optimizer`` block, so DeepSpeed builds an optimizer for the frozen
model; TRL 1.9.1 (commit 65f2ad8, 2026-06-02) pops ``optimizer``, ``scheduler`` and ``offload_optimizer`` first.

Each run is one process, one rank on DeepSpeed's CPU accelerator, through accelerate's real ``Accelerator`` with a
``DeepSpeedPlugin`` and a ds_config with an AdamW ``optimizer`` block and bf16: a small bf16 Llama is handed to
``prepare_deepspeed`` and every live tensor storage is summed afterwards (``gc``). Two model sizes per setting give
the bytes per parameter (the slope) apart from what does not grow with the model (the intercept: at stage 3 the
default 5e8-element bucket, since the dotted ``zero_optimization.*`` keys TRL sets never reach DeepSpeed).

TRL 1.9.0 is the installed release; 1.9.1's function is its own source, taken from the wheel
(``pip download trl==1.9.1 --no-deps``, unzipped) and run with the installed module's imports.

Usage: ``python benchmarks/trl_reference_engine.py --trl-191-utils /tmp/trl-1.9.1/trl/models/utils.py``
(writes ``benchmarks/trl_reference_engine.json``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LAYERS = (4, 12)  # two sizes: bytes per parameter = slope, fixed buffers = intercept


def worker(stage: int, variant: str, layers: int, port: int, utils_191: str) -> dict:
    os.environ.update(DS_ACCELERATOR="cpu", RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1",
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), ACCELERATE_USE_DEEPSPEED="true")
    import logging

    logging.disable(logging.WARNING)
    import torch
    import trl
    import trl.models.utils as trl_utils
    from accelerate import Accelerator
    from accelerate.utils import DeepSpeedPlugin
    from transformers import LlamaConfig, LlamaForCausalLM

    config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-5}}, "zero_optimization": {"stage": stage}}
    accelerator = Accelerator(deepspeed_plugin=DeepSpeedPlugin(hf_ds_config=config))
    if variant == "1.9.0":
        if trl.__version__ != "1.9.0":
            raise SystemExit(f"TRL 1.9.0 expected installed, found {trl.__version__}")
        prepare = trl_utils.prepare_deepspeed
    else:  # TRL 1.9.1's prepare_deepspeed, verbatim, with the installed module's globals (deepcopy, typing)
        source = Path(utils_191).read_text(encoding="utf-8")
        start = source.index("def prepare_deepspeed(")
        namespace = dict(vars(trl_utils))
        exec(source[start:source.index("\ndef ", start + 1)], namespace)  # the release's own code, verbatim
        prepare = namespace["prepare_deepspeed"]
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(hidden_size=256, intermediate_size=688, num_hidden_layers=layers,
                                         num_attention_heads=4, num_key_value_heads=4, vocab_size=2048,
                                         tie_word_embeddings=False)).to(torch.bfloat16)
    parameters = sum(p.numel() for p in model.parameters())
    engine = prepare(model, accelerator)
    gc.collect()
    storages: dict[int, int] = {}
    for obj in gc.get_objects():
        if isinstance(obj, torch.Tensor):
            storage = obj.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
    return {"trl": variant, "stage_in_config": stage, "engine_stage": engine.zero_optimization_stage(),
            "optimizer": type(engine.optimizer).__name__ if engine.optimizer is not None else None,
            "layers": layers, "parameters": parameters, "bytes": sum(storages.values())}


def measure(utils_191: str) -> list[dict]:
    runs = []
    for variant in ("1.9.0", "1.9.1"):
        for stage in (2, 3):
            points = []
            for layers in LAYERS:
                port = 29500 + 10 * stage + layers + (100 if variant == "1.9.1" else 0)
                out = subprocess.run([sys.executable, __file__, "--worker", json.dumps([stage, variant, layers, port,
                                                                                        utils_191])],
                                     capture_output=True, text=True, timeout=600, check=True).stdout
                points.append(json.loads(out.strip().splitlines()[-1]))
            (a, b) = points
            slope = (b["bytes"] - a["bytes"]) / (b["parameters"] - a["parameters"])
            runs.append({"trl": variant, "stage_in_config": stage, "engine_stage": a["engine_stage"],
                         "optimizer": a["optimizer"], "bytes_per_parameter": round(slope, 2),
                         "fixed_bytes": round(a["bytes"] - slope * a["parameters"]), "points": points})
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trl-191-utils", help="trl/models/utils.py of the TRL 1.9.1 wheel")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*json.loads(args.worker))))
        return 0
    if not args.trl_191_utils:
        parser.error("--trl-191-utils is required")
    import deepspeed
    import torch
    import trl

    machine = {"torch": torch.__version__, "deepspeed": deepspeed.__version__, "trl_installed": trl.__version__,
               "ranks": 1, "accelerator": "cpu"}
    result = {"machine": machine,
              "runs": measure(args.trl_191_utils)}
    (HERE / "trl_reference_engine.json").write_text(json.dumps(result, indent=2) + "\n")
    for run in result["runs"]:
        print(f"TRL {run['trl']} stage {run['stage_in_config']} -> engine stage {run['engine_stage']} "
              f"({run['optimizer']}): {run['bytes_per_parameter']} bytes/parameter + {run['fixed_bytes'] / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
