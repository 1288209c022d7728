"""Measure ZeRO-2's optimizer step on CPU: the gradient partition in the master dtype that step() builds, and what
coexists with it (real DeepSpeed 0.19.8, issue 34; the model: zeroadvisor/memory/step_temporaries.py).

stage_1_and_2.py ``step`` (no offload_optimizer) runs after backward: per parameter group it builds
``flat_grad_partition = flatten(averaged_gradients[i])`` (a torch.cat copy of the views into grads_in_partition),
``single_grad_partition = flat_grad_partition.to(master dtype)`` (a second copy where the dtypes differ; the same
tensor where they do not), ``del flat_grad_partition``, steps the optimizer, then ``.grad = None`` and ``del
single_grad_partition``. So the gradient partition exists only inside the step, after the activations are freed:
the estimate counts it (with the optimizer's temporaries) beyond the activations, not beside them. Before the
loop the gradient norm takes an fp64 copy of each averaged gradient (get_grad_norm_direct). Stage 1
(partition_gradients False) runs the same step(); its backward builds every parameter's full-size gradient, and
independent_gradient_partition_epilogue keeps only averaged_gradients' views of the parameters touching the rank's
partition (get_flat_partition) and drops param.grad (_clear_param_grad_only), so the rest are freed before step().

Method. One rank (DS_ACCELERATOR=cpu, gloo; benchmarks/cpu_ranks.py) trains 8 bias-free Linear(1024, 1024)
(8,388,608 elements, one parameter group), and one bf16 case of one large parameter (Linear(1024, 8192) and
Linear(8192, 8)), at ZeRO-2 with a client torch AdamW, fused (no step temporaries on CPU,
benchmarks/step_temporaries.md) or foreach (one fp32 temporary the size of the stepped tensor), in fp32 and bf16;
the same at ZeRO-1 on one rank, and bf16 ZeRO-1 on two ranks (each rank's partition half the parameters).
The third ``engine.step()`` runs under ``torch.profiler`` (profile_memory); every CPU allocation and free is a
``[memory]`` event whose running sum is what the step holds beyond what was live when it began (the method of
benchmarks/calibrate_zero3_step.py). The step's peak beyond its start is compared with the estimate's step terms
(``step_fp32_grad`` + ``step_temporary``) with no activations to subtract.

    python benchmarks/calibrate_zero2_step.py   # writes benchmarks/zero2_step.json and .md
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
from cpu_ranks import step_calibration_main  # noqa: E402

D, LAYERS = 1024, 8
PARAMS = D * D * LAYERS
CASES = [{"precision": p, "optim": o, "ranks": 1, "model": "layers"} for p in ("fp32", "bf16")
         for o in ("fused", "foreach")]
# One parameter of nearly the whole partition (Linear(1024, 8192) before Linear(8192, 8)): the gradient norm's fp64
# copy of it (8 B/element) is larger than the step's bf16 cat copy + fp32 gradient (6 B/element of the partition).
CASES.append({"precision": "bf16", "optim": "fused", "ranks": 1, "model": "one-large"})
# Stage 1 runs the same step() (partition_gradients False): the same cases at one rank, and bf16 over 2 ranks, where
# each rank's partition is half the parameters and the gradients of the other half are freed before the step.
CASES += [{"precision": p, "optim": o, "ranks": 1, "model": "layers", "stage": 1} for p, o in
          (("fp32", "fused"), ("bf16", "fused"), ("bf16", "foreach"))]
CASES.append({"precision": "bf16", "optim": "fused", "ranks": 2, "model": "layers", "stage": 1})


def build(c: dict[str, Any]) -> Any:
    import torch

    if c.get("model") == "one-large":
        return torch.nn.Sequential(torch.nn.Linear(D, 8 * D, bias=False), torch.nn.Linear(8 * D, 8, bias=False))
    return torch.nn.Sequential(*[torch.nn.Linear(D, D, bias=False) for _ in range(LAYERS)])


def ds_config(c: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
                              "steps_per_print": 10**9, "zero_optimization": {"stage": c.get("stage", 2)}}
    if c["precision"] == "bf16":
        config["bf16"] = {"enabled": True}
    return config


def held_gradients(model: Any, opt: Any) -> int:
    """Bytes of the distinct gradient storages alive when step() begins: param.grad, param.grad_accum and the
    averaged_gradients views (whole storages: a view keeps its parameter's gradient alive)."""
    seen: dict[int, int] = {}
    tensors = [t for p in model.parameters() for t in (p.grad, getattr(p, "grad_accum", None))]
    tensors += [t for group in opt.averaged_gradients.values() if group is not None for t in group]
    for t in tensors:
        if t is not None:
            storage = t.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def worker(c: dict[str, Any], out_path: str) -> None:
    import logging

    import deepspeed
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    deepspeed.utils.logger.setLevel(logging.ERROR)
    torch.manual_seed(0)
    model = build(c)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, **{c["optim"]: True})
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config(c))
    opt = engine.optimizer
    dtype = torch.bfloat16 if c["precision"] == "bf16" else torch.float32
    generator = torch.Generator().manual_seed(1)
    for i in range(3):
        x = torch.randn(2, D, generator=generator).to(dtype)
        loss = engine(x).float().pow(2).mean()
        engine.backward(loss)
        del loss, x
        if i < 2:
            engine.step()
            continue
        held = held_gradients(model, opt)
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            engine.step()
    events = list(prof.profiler.kineto_results.events())
    mem = sorted((e for e in events if e.name() == "[memory]" and e.device_type() == DeviceType.CPU),
                 key=lambda e: e.start_ns())
    running = peak = 0
    for e in mem:
        running += e.nbytes()
        peak = max(peak, running)
    result = {"rank": int(os.environ["RANK"]), "step_peak_extra": peak, "net": running, "held_at_step": held,
              "partition": int(opt.single_partition_of_fp32_groups[0].numel()),
              "largest_param": max(p.numel() for p in model.parameters()),
              "grad_dtype": str(opt.bit16_groups_flat[0].dtype),
              "master_dtype": str(opt.single_partition_of_fp32_groups[0].dtype)}
    Path(out_path).write_text(json.dumps(result))


def estimate_terms(c: dict[str, Any]) -> dict[str, int]:
    """zeroadvisor's step terms (bytes by key) for the same run, no activations counted against them."""
    from zeroadvisor.memory.estimate import Cluster, estimate
    from zeroadvisor.model.spec import ModelSpec, TrainingShape

    params, largest = (8 * D * D + 8 * D * 8, 8 * D * D) if c.get("model") == "one-large" else (PARAMS, D * D)
    spec = ModelSpec(parameters=params, largest_layer_parameters=largest, parameter_numels=(
        (8 * D * D, 8 * D * 8) if c.get("model") == "one-large" else (D * D,) * LAYERS))
    optim = "adamw_torch_fused" if c["optim"] == "fused" else "adamw_torch"
    est = estimate(ds_config(c), spec, TrainingShape(optim=optim), Cluster(gpus=c["ranks"]))
    stage = next(s for s in est.stages if s.configured)
    out: dict[str, int] = {}
    for t in stage.terms:
        if t.device == "gpu" and t.phase == "train" and t.key in ("step_fp32_grad", "step_temporary", "fp32_grads",
                                                                  "lp_grads", "lp_grads_outside_partition"):
            out[t.key] = out.get(t.key, 0) + t.nbytes
    return out


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    doc = (__doc__ or "").split("\n\n")
    out = ["# ZeRO-1/2 optimizer step: the partition's fp32 gradient (DeepSpeed on CPU)", "",
           *(p.replace("\n", " ") + "\n" for p in doc[:3]), f"Machine: {meta}.", "",
           ("`step peak`: the largest running sum of the step's allocations beyond what was live when it began; "
            "`zeroadvisor`: the step terms (`step_fp32_grad` + `step_temporary`) with no activations to subtract; "
            "`before`: what the estimate counted before (4 B × the partition as a gradient held beside the "
            "activations, plus the foreach temporary's 4 B; at stage 1 the partition's was the part of the larger of "
            "the full-size gradients and what the step holds above the 16-bit gradients, the same 4 B here); "
            "`held at step`: the gradient storages alive when step() begins (param.grad, grad_accum, "
            "averaged_gradients); `held + peak`: the gradients' peak over the step; `zeroadvisor gradients`: the "
            "estimate's `lp_grads` (held to the step) + the step terms + at stage 1 the gradients outside the "
            "partition (`lp_grads_outside_partition`), a model state after backward that the step reuses: over 2 "
            "ranks the step's peak beyond its start is larger than its terms by what backward freed before it."), "",
           ("| stage | ranks | model | precision | optim | partition (elements) | grad dtype | step peak (B) | "
            "B/element | zeroadvisor (B) | before (B) | held at step (B) | held + peak (B) | "
            "zeroadvisor gradients (B) |"),
           "|---:|---:|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        m, c = r["measured"], r["case"]
        part = m["partition"]
        za = r["zeroadvisor"]
        step = za.get("step_fp32_grad", 0) + za.get("step_temporary", 0) + za.get("fp32_grads", 0)
        held, peak = m.get("held_at_step"), m["step_peak_extra"]
        out.append(f"| {c.get('stage', 2)} | {c['ranks']} | {c.get('model', 'layers')} | {c['precision']} | "
                   f"{c['optim']} | {part:,} | {m['grad_dtype']} | {m['step_peak_extra']:,} | "
                   f"{m['step_peak_extra'] / part:.4f} | {step:,} | "
                   f"{4 * part * (2 if c['optim'] == 'foreach' else 1):,} | "
                   f"{'' if held is None else f'{held:,}'} | "
                   f"{'' if held is None else f'{held + peak:,}'} | "
                   f"{sum(za.values()) - za.get('fp32_grads', 0):,} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    step_calibration_main(__file__, HERE / "zero2_step", CASES, worker, estimate_terms, markdown, argv)


if __name__ == "__main__":
    main()
