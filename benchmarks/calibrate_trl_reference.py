"""Measure the reference model as TRL's own ``prepare_deepspeed`` builds it, DeepSpeed 0.19.8 on CPU (issue 35 item 4).

Method. One rank, or ``--ranks N`` (DS_ACCELERATOR=cpu, gloo; benchmarks/cpu_ranks.py) builds a randomly
initialised transformers Llama (2 layers, hidden 256, ffn 688, vocab 8192, untied head) in bf16 and hands it to
``trl.models.utils.prepare_deepspeed`` with a real ``accelerate.Accelerator`` whose DeepSpeed plugin carries the
user's config, four cases in one process:

* the policy at ZeRO-2 (TRL sets the reference to stage 0) and at ZeRO-3 (kept), each
* with and without an ``optimizer`` block (AdamW). TRL up to 1.9.0 copies the block to the reference engine;
  1.9.1 and later drop it (the installed release decides, and the prediction is made for that release).

The config sets ``reduce_bucket_size`` to 1,000,000: TRL's dotted ``"zero_optimization.reduce_bucket_size"``
override (hidden², 65,536) is set on a plain dict and never read, so the engine's IPG bucket shows which applies.

Measured: the bytes of every distinct tensor storage reachable from the returned engine (its module's parameters
and buffers, each ZeRO-3 parameter's ``ds_tensor`` partition, the optimizer wrapper's and the basic optimizer's
tensors and state), counted once each. Compared with memory/method.py's "reference model" row for the same model,
config and TRL release (memory/estimate.py with a DPO MethodSetup, 1 GPU).

    python benchmarks/calibrate_trl_reference.py    # writes benchmarks/trl_reference.json and .md
    python benchmarks/calibrate_trl_reference.py --ranks 2 --out benchmarks/trl_reference_2ranks
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
from cpu_ranks import machine, run_ranks, write_report  # noqa: E402

LLAMA = {"num_hidden_layers": 2, "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 8,
         "num_key_value_heads": 4, "vocab_size": 8192}
RBS = 1_000_000
CASES = [{"stage": stage, "optimizer": optimizer} for stage in (2, 3) for optimizer in (False, True)]


def ds_config(stage: int, optimizer: bool) -> dict:
    config: dict = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
                    "zero_optimization": {"stage": stage, "reduce_bucket_size": RBS}}
    if optimizer:
        config["optimizer"] = {"type": "AdamW", "params": {"lr": 1e-5}}
    return config


def held_bytes(engine) -> int:
    """Every distinct storage reachable from the engine, once: the bytes it keeps alive."""
    import torch

    storages: dict[int, int] = {}
    seen: set[int] = set()
    stack = [engine]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            for t in (obj, getattr(obj, "ds_tensor", None)):
                if t is not None:
                    s = t.untyped_storage()
                    storages[s.data_ptr()] = max(storages.get(s.data_ptr(), 0), s.nbytes())
            continue
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set)):
            stack.extend(obj)
        elif isinstance(obj, (str, bytes, int, float, type)) or obj is None:
            continue
        else:
            if isinstance(obj, torch.nn.Module):
                stack.extend(obj._parameters.values())
                stack.extend(obj._buffers.values())
                stack.extend(obj._modules.values())
            if isinstance(obj, torch.optim.Optimizer):
                stack.extend(obj.state.values())
                stack.extend(obj.param_groups)
            # DeepSpeed's and torch's own objects only (not the interpreter's modules a reference may lead to)
            if type(obj).__module__.split(".")[0] in ("deepspeed", "torch", "transformers", "trl"):
                stack.extend(vars(obj).values() if hasattr(obj, "__dict__") else ())
    return sum(storages.values())


def worker(c: dict, out_path: str) -> None:
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import logging

    import deepspeed
    import torch
    import trl
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from accelerate.utils import DeepSpeedPlugin
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl.models.utils import prepare_deepspeed

    logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
    deepspeed.utils.logger.setLevel(logging.ERROR)
    rows = []
    for case in c["cases"]:
        AcceleratorState._reset_state(reset_partial_state=False)  # a new plugin config for each case
        accelerator = Accelerator(deepspeed_plugin=DeepSpeedPlugin(hf_ds_config=ds_config(**case)))
        torch.manual_seed(0)
        model = LlamaForCausalLM(LlamaConfig(**LLAMA, max_position_embeddings=256, tie_word_embeddings=False))
        model = model.to(torch.bfloat16)  # as the trainer loads the reference (torch_dtype bf16)
        parameters = sum(p.numel() for p in model.parameters())
        engine = prepare_deepspeed(model, accelerator)
        ipg = getattr(engine.optimizer, "ipg_buckets", {})
        rows.append({**case, "parameters": parameters, "held_bytes": held_bytes(engine),
                     "engine_optimizer": type(engine.optimizer).__name__,
                     "ipg_elements": max((int(b.buffer.numel()) for b in ipg.values() if b.buffer is not None),
                                         default=0)})
        del engine, model
    Path(out_path).write_text(json.dumps({"rank": int(os.environ["RANK"]), "trl": trl.__version__,
                                          "deepspeed": deepspeed.__version__, "cases": rows}))


def predict(case: dict, trl_version: str, parameters: int, ranks: int = 1) -> int:
    """memory/'s reference-model row (GPU and host) for the policy option the case configures."""
    from zeroadvisor.config.method import MethodSetup
    from zeroadvisor.memory.estimate import Cluster, estimate
    from zeroadvisor.model.hf import spec_from_hf_config
    from zeroadvisor.model.spec import TrainingShape
    from zeroadvisor.vocab import Method

    spec = spec_from_hf_config({"model_type": "llama", **LLAMA, "tie_word_embeddings": False})
    assert spec.parameters == parameters, (spec.parameters, parameters)
    setup = MethodSetup(method=Method.DPO, trainer_version=trl_version)
    est = estimate(ds_config(**case), spec, TrainingShape(64, method=setup), Cluster(gpus=ranks))
    st = est.stage(case["stage"])
    return sum(t.nbytes for t in st.terms if t.row == "reference_model" and t.phase == "train")


def compare(result: dict) -> dict:
    r0 = result["ranks"][0]
    rows = []
    for case in r0["cases"]:
        estimate = predict({"stage": case["stage"], "optimizer": case["optimizer"]}, r0["trl"], case["parameters"],
                           len(result["ranks"]))
        rows.append({**case, "estimate_bytes": estimate,
                     "measured_per_param": case["held_bytes"] / case["parameters"],
                     "estimate_per_param": estimate / case["parameters"]})
    return {"trl": r0["trl"], "deepspeed": r0["deepspeed"], "ranks": len(result["ranks"]), "cases": rows}


def markdown(result: dict, meta: dict) -> str:
    out = ["# The reference engine TRL's prepare_deepspeed builds (DeepSpeed on CPU)", "",
           (f"`python benchmarks/calibrate_trl_reference.py` (method: its docstring). TRL {result['trl']}, DeepSpeed "
            f"{result['deepspeed']}, {result['ranks']} rank(s) (rank 0 measured), bf16 Llama, "
            f"reduce_bucket_size {RBS:,}."), "",
           f"Machine: {meta}", "",
           "| policy stage | optimizer block | engine optimizer | measured B/param | estimate B/param | IPG elements |",
           "|---:|---|---|---:|---:|---:|"]
    out += [f"| {r['stage']} | {'yes' if r['optimizer'] else 'no'} | {r['engine_optimizer']} | "
            f"{r['measured_per_param']:.3f} | {r['estimate_per_param']:.3f} | {r['ipg_elements']:,} |"
            for r in result["cases"]]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", nargs=2)
    ap.add_argument("--out", default=str(HERE / "trl_reference"))
    ap.add_argument("--ranks", type=int, default=1, help="processes (rank 0 is measured; stage 3 partitions over them)")
    args = ap.parse_args(argv)
    if args.worker:
        worker(json.loads(args.worker[0]), args.worker[1])
        return
    result = run_ranks(__file__, {"ranks": args.ranks, "cases": CASES}, timeout=300)
    if "error" in result:
        raise SystemExit(f"{result['error']}\n{result['log']}")
    compared = compare(result)
    meta = machine()
    write_report(args.out, meta, compared, markdown(compared, meta))


if __name__ == "__main__":
    main()
