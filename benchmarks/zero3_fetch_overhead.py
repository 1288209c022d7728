"""DeepSpeed's host-side cost per ZeRO-3 module fetch, measured with real DeepSpeed on CPU ranks.

ZeRO-3 wraps every module in pre/post forward and backward hooks (runtime/zero/parameter_offload.py
setup_zero_stage3_hooks) that fetch the module's parameters before it runs and release them after
(partitioned_param_coordinator.py fetch_sub_module / release_sub_module: trace bookkeeping, prefetch
decisions, one all-gather launch, the wait, the release). That work runs on the Python thread that also
launches the GPU kernels, so it is time in which a GPU can only run what was already queued.

The benchmark runs a model of M tiny Linear modules (width 8: the compute is negligible) on N CPU ranks
(gloo, benchmarks/cpu_ranks.py) at ZeRO-2 and at ZeRO-3 with the same config otherwise, times one
step (forward + backward + optimizer step) and takes the slope of (ZeRO-3 - ZeRO-2) over M, divided by
the two fetches per module per step (forward and backward): seconds per module fetch. The slope
removes what does not grow with M. On 1 rank DeepSpeed gathers nothing (partition_parameters.py
_no_gather_coalesced): the hooks alone, what a GPU run's host pays besides launching the collectives. On
2 ranks each fetch adds a gloo all-gather and each backward a reduce-scatter, synchronous on CPU (on a GPU
they run on their own streams); one all-gather is also timed alone (``gloo_allgather_s``).

    PYTHONPATH=. python benchmarks/zero3_fetch_overhead.py --ranks 1   # merges into zero3_fetch_overhead.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # benchmarks/: the shared launcher (cpu_ranks.py)
from cpu_ranks import machine, run_ranks  # noqa: E402

OUT = HERE / "zero3_fetch_overhead.json"
MODULES = (16, 64, 256)
WIDTH = 8
WARMUP = 3
STEPS = 15
FETCHES_PER_MODULE = 2  # forward and backward (no activation checkpointing here)


def worker(c: dict, out_path: str) -> None:
    import logging

    import deepspeed
    import torch

    logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
    deepspeed.utils.logger.setLevel(logging.ERROR)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(c["modules"])])
    config = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "steps_per_print": 10**9,
              "zero_optimization": {"stage": c["stage"]}}
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=torch.optim.AdamW(model.parameters(), lr=1e-3),
                                           config=config)
    x = torch.randn(2, WIDTH)
    times = []
    for i in range(WARMUP + STEPS):
        torch.distributed.barrier()
        t0 = time.perf_counter()
        loss = engine(x).square().mean()
        engine.backward(loss)
        engine.step()
        if i >= WARMUP:
            times.append(time.perf_counter() - t0)
    # one tiny all-gather alone: what gloo itself takes per fetch on this machine
    part = torch.zeros(WIDTH * WIDTH // 2 + WIDTH // 2)
    whole = torch.zeros(torch.distributed.get_world_size() * part.numel())
    gathers = []
    for _ in range(50):
        t0 = time.perf_counter()
        torch.distributed.all_gather_into_tensor(whole, part)
        gathers.append(time.perf_counter() - t0)
    Path(out_path).write_text(json.dumps({"step_s": statistics.median(times), "steps": times,
                                          "allgather_s": statistics.median(gathers)}))


def measure(ranks: int, repeats: int, timeout: int) -> dict:
    rows = []
    for modules in MODULES:
        for stage in (2, 3):
            for rep in range(repeats):
                c = {"ranks": ranks, "stage": stage, "modules": modules, "repeat": rep}
                result = run_ranks(__file__, c, timeout)
                if "error" in result:
                    raise SystemExit(f"{c}: {result['error']}\n{result['log']}")
                step = max(r["step_s"] for r in result["ranks"])  # the step ends when the slower rank ends
                rows.append({"modules": modules, "stage": stage, "repeat": rep, "step_s": step,
                             "allgather_s": statistics.median(r["allgather_s"] for r in result["ranks"])})
                print(f"{ranks} rank(s) M={modules} stage {stage} rep {rep}: {step * 1e3:.2f} ms/step", flush=True)
    return summarise(rows)


def summarise(rows: list[dict]) -> dict:
    """Per M: the median step of each stage and their difference; the least-squares slope over M."""
    diffs = {}
    for modules in MODULES:
        med = {s: statistics.median(r["step_s"] for r in rows if r["modules"] == modules and r["stage"] == s)
               for s in (2, 3)}
        diffs[modules] = {"zero2_step_s": med[2], "zero3_step_s": med[3], "difference_s": med[3] - med[2],
                          "per_fetch_s": (med[3] - med[2]) / (modules * FETCHES_PER_MODULE)}
    xs = list(diffs)
    ys = [diffs[m]["difference_s"] for m in xs]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=False)) / sum((x - mx) ** 2 for x in xs)
    allgather = statistics.median(r["allgather_s"] for r in rows)
    per_fetch = slope / FETCHES_PER_MODULE
    return {"per_module_fetch_s": per_fetch, "gloo_allgather_s": allgather,
            "hooks_only_per_fetch_s": per_fetch - allgather, "by_modules": diffs, "runs": rows}




def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--worker", nargs=2, metavar=("CASE_JSON", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(json.loads(args.worker[0]), args.worker[1])
        return 0
    result = measure(args.ranks, args.repeats, args.timeout)
    old = json.loads(OUT.read_text()) if OUT.is_file() else {}
    by_ranks = {**old.get("by_ranks", {}), str(args.ranks): result}
    host = machine(backend="gloo", threads_per_rank=1,
                   note="a 2-vCPU VM shared with other jobs: timings are medians of repeated runs")
    OUT.write_text(json.dumps({"machine": host, "width": WIDTH, "warmup_steps": WARMUP, "timed_steps": STEPS,
                               "fetches_per_module_per_step": FETCHES_PER_MODULE, "by_ranks": by_ranks},
                              indent=2) + "\n")
    print(f"{args.ranks} rank(s): per module fetch {result['per_module_fetch_s'] * 1e6:.0f} us (gloo all-gather "
          f"alone {result['gloo_allgather_s'] * 1e6:.0f} us)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
