"""Measure ZeRO-1/2's backward reduction on CPU: the flat copy of the bucket it all-reduces, and, with the optimizer
offloaded, the fp64 copy of each gradient piece taken for its norm (real DeepSpeed 0.19.8, issue 34; the model:
zeroadvisor/memory/buffers.py _stage12_reduce_copy and memory/step_temporaries.py boundary_norm_terms).

stage_1_and_2.py reduces gradients in backward, bucket by bucket: average_tensor hands the bucket's slices to
allreduce_and_scatter (use_multi_rank_bucket_allreduce, the default), whose allreduce_bucket copies them into one
flat tensor (``self.flatten``) before the all-reduce; a parameter larger than reduce_bucket_size is reduced alone
(extra_large_param_to_reduce), so the copy is its size. With the optimizer offloaded, copy_grads_in_partition then
reads each gradient piece of the rank's partition through ``.to(get_norm_dtype())`` (fp64 where the accelerator has
it) for its norm, and ``.float()`` for the host's fp32 buffer, one parameter at a time. All of it is allocated and
freed inside backward, after the loss's tensors.

Method. One rank (DS_ACCELERATOR=cpu, gloo; benchmarks/cpu_ranks.py) trains Linear(1024, 8192) and Linear(8192, 8)
without bias (8,388,608 + 65,536 elements) at ZeRO-2 with reduce_bucket_size 1,000,000 (so the large weight is
reduced alone), in bf16 and fp32, with the optimizer on the host (offload_optimizer cpu, a client torch AdamW:
zero_force_ds_cpu_optimizer false) and without it. The third ``engine.backward()`` runs under ``torch.profiler``
(profile_memory); its ``[memory]`` events are every allocation and free. Reported: the allocations of exactly the
sizes the estimate names (the large weight's flat copy in the model dtype, its fp64 piece), how many there were,
and the backward's peak beyond its start. Two cases run DeepSpeed 0.16.9 (installed beside the venv's by
tools/install_deepspeed_release.py; benchmarks/cpu_ranks.py puts it first on PYTHONPATH), whose overflow check
tests the whole gradient elementwise (memory/ds_changes.py OVERFLOW_CHECK).

    python benchmarks/calibrate_zero2_reduce.py   # writes benchmarks/zero2_reduce.json and .md
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

D, WIDE = 1024, 8192
LARGE = D * WIDE  # the large weight's elements
BUCKET = 1_000_000
CASES = [{"precision": p, "offload": o, "ranks": 1} for p in ("bf16", "fp32") for o in (True, False)]
# The control: reduce_scatter false reduces through gradient_reduction_w_predivide (an in-place all-reduce of the
# bucket, no flatten), so the flat copy's allocation disappears and only autograd's gradient is left of that size
CASES += [{"precision": "bf16", "offload": o, "ranks": 1, "reduce_scatter": False} for o in (True, False)]
# Over 2 ranks the large weight spans both partitions: its slices for the two ranks are flattened into one tensor
# (on 1 rank a single slice: torch's flatten_dense_tensors returns a view of it, no copy)
CASES += [{"precision": "bf16", "offload": o, "ranks": 2} for o in (True, False)]
# An older release (CI installs it: tools/install_deepspeed_release.py CI_RELEASES): 0.13.3-0.19.5 test each
# partition parameter's whole gradient for inf/nan elementwise (memory/ds_changes.py OVERFLOW_CHECK), 11 B/element
CASES += [{"precision": p, "offload": True, "ranks": 1, "release": "0.16.9"} for p in ("bf16", "fp32")]
BYTES = {"bf16": 2, "fp32": 4}


def build() -> Any:
    import torch

    return torch.nn.Sequential(torch.nn.Linear(D, WIDE, bias=False), torch.nn.Linear(WIDE, 8, bias=False))


def ds_config(c: dict[str, Any]) -> dict[str, Any]:
    zero: dict[str, Any] = {"stage": 2, "reduce_bucket_size": BUCKET, "reduce_scatter": c.get("reduce_scatter", True)}
    if c["offload"]:
        zero["offload_optimizer"] = {"device": "cpu"}
    config: dict[str, Any] = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
                              "steps_per_print": 10**9, "zero_optimization": zero,
                              "zero_force_ds_cpu_optimizer": False}
    if c["precision"] == "bf16":
        config["bf16"] = {"enabled": True}
    return config


def worker(c: dict[str, Any], out_path: str) -> None:
    import logging

    import deepspeed
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    deepspeed.utils.logger.setLevel(logging.ERROR)
    torch.manual_seed(0)
    model = build()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config(c))
    dtype = torch.bfloat16 if c["precision"] == "bf16" else torch.float32
    generator = torch.Generator().manual_seed(1)
    for i in range(3):
        x = torch.randn(2, D, generator=generator).to(dtype)
        loss = engine(x).float().pow(2).mean()
        if i < 2:
            engine.backward(loss)
            engine.step()
            continue
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            engine.backward(loss)
        engine.step()
    events = list(prof.profiler.kineto_results.events())
    mem = sorted((e for e in events if e.name() == "[memory]" and e.device_type() == DeviceType.CPU),
                 key=lambda e: e.start_ns())
    running = peak = 0
    sizes: dict[int, int] = {}
    for e in mem:
        running += e.nbytes()
        peak = max(peak, running)
        if e.nbytes() > 0:
            sizes[e.nbytes()] = sizes.get(e.nbytes(), 0) + 1
    w = BYTES[c["precision"]]
    result = {"rank": int(os.environ["RANK"]), "backward_peak_extra": peak,
              "flat_copy_allocations": sizes.get(w * LARGE, 0), "fp64_piece_allocations": sizes.get(8 * LARGE, 0),
              "largest_allocations": sorted(sizes, reverse=True)[:6]}
    Path(out_path).write_text(json.dumps(result))


def estimate_terms(c: dict[str, Any]) -> dict[str, int]:
    """zeroadvisor's two backward terms for the same run, each at its bound (the bytes the code allocates)."""
    from zeroadvisor.memory.estimate import Cluster, estimate
    from zeroadvisor.memory.step_temporaries import BOUNDARY_NORM_KEY, OFFLOAD_STEP_COPY_KEY
    from zeroadvisor.model.spec import ModelSpec, TrainingShape

    spec = ModelSpec(parameters=LARGE + WIDE * 8, largest_layer_parameters=LARGE, parameter_numels=(LARGE, WIDE * 8))
    from zeroadvisor.deepspeed.schema import reading_as

    with reading_as(c.get("release")):
        est = estimate(ds_config(c), spec, TrainingShape(), Cluster(gpus=c["ranks"]))
    stage = next(s for s in est.stages if s.configured)
    # 0.14.1-0.16.9's step copy is a moment of its own, the boundary counted beyond it: the two together are
    # backward's (on CPU the copy to the accelerator is no copy: only backward is measured)
    out = {"allreduce_bucket": 0, BOUNDARY_NORM_KEY: 0, OFFLOAD_STEP_COPY_KEY: 0}
    for t in stage.terms:
        if t.device == "gpu" and t.phase == "train" and t.key in out:
            out[t.key] += t.upper
    return out


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    doc = (__doc__ or "").split("\n\n")
    out = ["# ZeRO-1/2 backward reduction: the bucket's flat copy and the offload's fp64 norm copy (DeepSpeed on CPU)",
           "", *(p.replace("\n", " ") + "\n" for p in doc[:3]), f"Machine: {meta}.", "",
           ("`flat copy`: allocations of the large weight's size in the model dtype during backward (its gradient "
            "from autograd is one of them; over 2 ranks, without the offload, the flat copy is the other); `fp64 "
            "piece`: allocations of 8 B x the whole large weight (over 2 ranks each rank's piece is half of it: the "
            "largest allocation, 8 B x the rank's partition); `zeroadvisor "
            "copy`: the reduction copy's bytes (`allreduce_bucket`, at its bound); `zeroadvisor norm`: the "
            "boundary's fp64 norm copy with the weight's 16-bit gradient beside it (`boundary_norm_copy`, no "
            "activations here to subtract), counted with the optimizer offloaded only; from 0.13.3 to 0.19.5 the "
            "overflow check of the whole gradient (11 B/element, 7 on an fp32 gradient) where it is larger; "
            "`zeroadvisor step`: 0.14.1-0.16.9's fp32 partition on the GPU at the step, a moment the boundary is "
            "counted beyond (norm + step is then backward's)."), "",
           ("| DeepSpeed | ranks | precision | offload | reduce_scatter | flat copy (count) | fp64 piece (count) | "
            "largest allocations (B) | backward peak beyond its start (B) | zeroadvisor copy (B) | zeroadvisor norm "
            "(B) | zeroadvisor step (B) |"),
           "|---|---:|---|---|---|---:|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        m, c, za = r["measured"], r["case"], r["zeroadvisor"]
        release = c.get("release", meta.get("deepspeed", ""))
        out.append(f"| {release} | {c['ranks']} | {c['precision']} | {'cpu' if c['offload'] else 'none'} | "
                   f"{str(c.get('reduce_scatter', True)).lower()} | {m['flat_copy_allocations']} | "
                   f"{m['fp64_piece_allocations']} | {', '.join(f'{s:,}' for s in m['largest_allocations'])} | "
                   f"{m['backward_peak_extra']:,} | {za['allreduce_bucket']:,} | {za['boundary_norm_copy']:,} | "
                   f"{za.get('offload_step_fp32_copy', 0):,} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    step_calibration_main(__file__, HERE / "zero2_reduce", CASES, worker, estimate_terms, markdown, argv)


if __name__ == "__main__":
    main()
