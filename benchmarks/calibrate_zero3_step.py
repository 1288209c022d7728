"""Measure ZeRO-3's optimizer step on CPU: the fp32 gradient of one sub-group and what coexists with it
(real DeepSpeed 0.19.8, issue 34 item 2; the model: zeroadvisor/memory/step_temporaries.py).

stage3.py ``step`` (no offload_optimizer) walks the sub-groups one at a time: ``_prepare_fp32_grad_for_sub_group``
builds ``flatten(averaged_gradients[i]).to(fp32)`` (the averaged gradients are views of
``grad_partitions_flat_buffer``, so flatten is a torch.cat copy in the gradient dtype, and ``.to`` a second copy
where that dtype is not fp32), ``unscale_and_clip_grads`` scales it in place, ``_optimizer_step`` steps it and
``_release_sub_group`` sets ``.grad = None``. Before the loop ``get_grad_norm_direct`` takes each gradient
partition's norm through an fp64 copy (zero/utils.py get_norm_dtype).

Method. One rank (DS_ACCELERATOR=cpu, gloo; benchmarks/cpu_ranks.py) trains 8 bias-free Linear(1024, 1024)
(8 parameters of 1,048,576 elements) at ZeRO-3 with a client torch AdamW, fused (no step temporaries on CPU,
benchmarks/step_temporaries.md) or foreach (one fp32 temporary the size of the stepped tensor). The third
``engine.step()`` runs under ``torch.profiler`` (profile_memory); every CPU allocation and free is a
``[memory]`` event whose running sum is what the step holds beyond what was live when it began (the method of
benchmarks/calibrate_step_temporaries.py). Each sub-group's prepare..release is a ``record_function`` range, so
the peak inside one sub-group (beyond its start) is read apart from the norm's before the loop.

Cases: fp32 and bf16 (the gradient partition in bf16, the master in fp32); sub_group_size 1e9 (one sub-group,
the whole 8,388,608-element partition) and 2,097,152 (four sub-groups of two parameters).

    python benchmarks/calibrate_zero3_step.py   # writes benchmarks/zero3_step.json and .md
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
CASES = [
    {"precision": p, "sub_group_size": sg, "optim": o, "ranks": 1}
    for p in ("fp32", "bf16") for sg in (1_000_000_000, 2_097_152) for o in ("fused", "foreach")
]


def ds_config(c: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
                              "steps_per_print": 10**9,
                              "zero_optimization": {"stage": 3, "sub_group_size": c["sub_group_size"],
                                                    "stage3_param_persistence_threshold": 0}}
    if c["precision"] == "bf16":
        config["bf16"] = {"enabled": True}
    return config


def worker(c: dict[str, Any], out_path: str) -> None:
    import logging

    import deepspeed
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    deepspeed.utils.logger.setLevel(logging.ERROR)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(D, D, bias=False) for _ in range(LAYERS)])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, **{c["optim"]: True})
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config(c))
    opt = engine.optimizer
    ranges: list[Any] = []
    prepare, release = opt._prepare_sub_group, opt._release_sub_group

    def prepare_marked(i: int, timers: Any) -> Any:
        ctx = record_function(f"sub_group_{i}")
        ctx.__enter__()
        ranges.append(ctx)
        return prepare(i, timers)

    def release_marked(i: int, timers: Any) -> Any:
        out = release(i, timers)
        ranges.pop().__exit__(None, None, None)
        return out

    opt._prepare_sub_group, opt._release_sub_group = prepare_marked, release_marked
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
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            engine.step()
    events = list(prof.profiler.kineto_results.events())
    mem = sorted((e for e in events if e.name() == "[memory]" and e.device_type() == DeviceType.CPU),
                 key=lambda e: e.start_ns())
    spans = sorted((e.start_ns(), e.start_ns() + e.duration_ns()) for e in events
                    if e.name().startswith("sub_group_"))
    running = peak = 0
    trace = []
    for e in mem:
        running += e.nbytes()
        peak = max(peak, running)
        trace.append((e.start_ns(), running))
    sub_peaks = []
    for start, end in spans:
        before = [r for t, r in trace if t < start]
        base = before[-1] if before else 0
        inside = [r for t, r in trace if start <= t <= end]
        sub_peaks.append(max(inside, default=base) - base)
    first = spans[0][0] if spans else None
    pre_loop = max((r for t, r in trace if first is None or t < first), default=0)
    result = {"rank": int(os.environ["RANK"]), "step_peak_extra": peak, "net": running, "pre_loop_peak": pre_loop,
              "sub_group_peaks": sub_peaks,
              "sub_groups": [int(n) for n in opt.fp16_partitioned_groups_flat_numel],
              "grad_dtype": str(opt.grad_partitions_flat_buffer.dtype),
              "master_dtype": str(opt.fp32_partitioned_groups_flat[0].dtype),
              "largest_param_partition": max(p.ds_tensor.numel() for p in model.parameters())}
    Path(out_path).write_text(json.dumps(result))


def estimate_terms(c: dict[str, Any]) -> dict[str, int]:
    """zeroadvisor's step terms (bytes by key) for the same run, no activations counted against them."""
    from zeroadvisor.memory.estimate import Cluster, estimate
    from zeroadvisor.model.spec import ModelSpec, TrainingShape

    spec = ModelSpec(parameters=PARAMS, largest_layer_parameters=D * D)
    optim = "adamw_torch_fused" if c["optim"] == "fused" else "adamw_torch"
    est = estimate(ds_config(c), spec, TrainingShape(optim=optim), Cluster(gpus=1))
    stage = next(s for s in est.stages if s.configured)
    out: dict[str, int] = {}
    for t in stage.terms:
        if t.device == "gpu" and t.key in ("step_fp32_grad", "step_temporary", "fp32_grads"):
            out[t.key] = out.get(t.key, 0) + t.nbytes
    return out


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    doc = (__doc__ or "").split("\n\n")
    out = ["# ZeRO-3 optimizer step: the sub-group's fp32 gradient (DeepSpeed on CPU)", "",
           *(p.replace("\n", " ") + "\n" for p in doc[:4]), f"Machine: {meta}.", "",
           ("`sub-group peak`: the largest peak inside one sub-group's prepare..release beyond its start; "
            "`pre-loop`: the peak before the first sub-group (the norms); `zeroadvisor`: the step terms "
            "(`step_fp32_grad` + `step_temporary`) with no activations to subtract."), "",
           ("`before`: what the estimate counted for the step before issue 34 (4 B × the sub-group as a gradient "
            "held beside the activations, plus the foreach temporary's 4 B): it missed the bf16 cat copy here, and "
            "with activations it kept the whole gradient on top of them."), "",
           ("| precision | optim | sub_group_size | sub-groups (elements) | grad dtype | sub-group peak (B) | "
            "in B/element of the largest sub-group | pre-loop (B) | whole step (B) | zeroadvisor (B) | before (B) |"),
           "|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        m, c = r["measured"], r["case"]
        largest = max(m["sub_groups"])
        out.append(f"| {c['precision']} | {c['optim']} | {c['sub_group_size']:,} | "
                   f"{len(m['sub_groups'])} × {largest:,} | {m['grad_dtype']} | {max(m['sub_group_peaks']):,} | "
                   f"{max(m['sub_group_peaks']) / largest:.4f} | {m['pre_loop_peak']:,} | "
                   f"{m['step_peak_extra']:,} | {sum(r['zeroadvisor'].values()):,} | "
                   f"{4 * largest * (2 if c['optim'] == 'foreach' else 1):,} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    step_calibration_main(__file__, HERE / "zero3_step", CASES, worker, estimate_terms, markdown, argv)


if __name__ == "__main__":
    main()
