"""The whole offloaded optimizer step of DeepSpeed, measured on CPU ranks, against the bare CPU Adam kernel.

With ``offload_optimizer: cpu`` the host does more in ``engine.step()`` than DeepSpeedCPUAdam's update
(deepspeed 0.19.8):

- stage 1/2 (runtime/zero/stage_1_and_2.py ``step``): ``scaled_global_norm`` ->
  ``complete_grad_norm_calculation_for_cpu_offload`` (sums per-parameter norms taken on the GPU in
  ``copy_grads_in_partition``); ``unscale_and_clip_grads`` on the fp32 host gradient partition (a
  read+write pass, skipped only when gradient_clipping is 0 and the loss scale is 1); ``_optimizer_step``
  (DeepSpeedCPUAdam); ``bit16_partition_buffer.data.copy_(fp32_partition.data)`` (fp32 -> 16-bit on the
  host) then ``bit16_partitions[partition_id].data.copy_(bit16_partition_buffer, non_blocking=True)``
  (host -> GPU); ``reset_cpu_buffers``; the all-gather; ``_update_model_bit16_weights``.
- stage 3 (runtime/zero/stage3.py ``step``): ``_get_norm_groups`` (the same CPU-offload norm sum);
  per sub group ``unscale_and_clip_grads`` (``grad.mul_(1 / combined_scale)`` always, a read+write
  pass over the fp32 host gradient), ``_optimizer_step`` (DeepSpeedCPUAdam),
  ``_reassign_or_swap_out_partitioned_parameters`` (``fp16_partitioned_groups_flat.copy_(fp32 flat)``:
  with a GPU destination and non_blocking False torch converts on the CPU, then copies to the GPU:
  aten/src/ATen/native/cuda/Copy.cu copy_kernel_cuda), ``_post_step`` (``reset_cpu_buffers``).

This script runs real DeepSpeed with DS_ACCELERATOR=cpu on one rank (benchmarks/cpu_ranks.py, gloo) at
OMP_NUM_THREADS 1 (what torchrun sets) and 2, a model of a few large Linear layers in bf16, stage 2 and 3
with offload_optimizer cpu, and times engine.step() and the optimizer's own functions (wrapped on the
instance), then in the same process the bare kernels on the same number of parameters:
DeepSpeedCPUAdam.step, an fp32 ``mul_`` pass, an fp32 -> bf16 ``copy_`` and a bf16 ``copy_``.

On the CPU accelerator the "device" is the host, so the copies that on a GPU are PCIe transfers run here
as host copies. They are separated by attribution: the stage-2 ``bit16_partitions[...].copy_`` (host ->
GPU on a GPU) is the bare bf16 copy, subtracted from the step; the gradient copies into the fp32 host
partition happen in backward (not in step) and on a GPU are converted on the GPU (non_blocking copies:
Copy.cu) and moved by DMA, so they are not host work of the step. What remains of step() beyond the
Adam kernel is the host work a GPU run pays too: (step - Adam - [stage 2: bf16 copy]) x threads / parameters,
split into its passes (``passes_s_per_param_thread``: unscale/clip, fp32 -> 16-bit); ``model_constants``
are what zeroadvisor/throughput/offload.py uses.

    PYTHONPATH=. python benchmarks/offload_step.py            # writes benchmarks/offload_step.json
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

OUT = HERE / "offload_step.json"
WIDTH = 4096
LAYERS = 4  # 4 x 4096^2 = 67,108,864 parameters
WARMUP = 2
STEPS = 5
WRAPPED = {  # the optimizer's functions timed inside engine.step() / backward, by stage
    2: ("scaled_global_norm", "unscale_and_clip_grads", "_optimizer_step", "reset_cpu_buffers",
        "_update_model_bit16_weights", "copy_grads_in_partition", "async_inplace_copy_grad_to_fp32_buffer_from_gpu"),
    3: ("_pre_step", "_partition_all_parameters", "_get_norm_groups", "unscale_and_clip_grads", "_optimizer_step",
        "_reassign_or_swap_out_partitioned_parameters", "_release_sub_group", "_post_step", "partition_grads"),
}


def _wrap(obj, names: tuple[str, ...], spent: dict[str, float]) -> None:
    for name in names:
        fn = getattr(obj, name, None)
        if fn is None:
            continue

        def timed(*args, __fn=fn, __name=name, **kwargs):
            t0 = time.perf_counter()
            try:
                return __fn(*args, **kwargs)
            finally:
                spent[__name] = spent.get(__name, 0.0) + time.perf_counter() - t0

        setattr(obj, name, timed)


def _median(fn, repeats: int = 5, warmup: int = 1) -> float:
    times = []
    for i in range(warmup + repeats):
        t0 = time.perf_counter()
        fn()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bare_kernels(numel: int) -> dict[str, float]:
    """Seconds of each host pass over ``numel`` parameters, on this process's threads."""
    import torch
    from deepspeed.ops.adam import DeepSpeedCPUAdam

    param = torch.nn.Parameter(torch.zeros(numel, dtype=torch.float32))
    param.grad = torch.randn(numel, dtype=torch.float32) * 1e-3
    adam = DeepSpeedCPUAdam([param], lr=1e-4)
    half = torch.empty(numel, dtype=torch.bfloat16)
    half2 = torch.empty(numel, dtype=torch.bfloat16)
    return {"adam_s": _median(adam.step),
            "fp32_mul_s": _median(lambda: param.grad.mul_(0.999)),
            "fp32_to_bf16_copy_s": _median(lambda: half.copy_(param.data)),
            "bf16_copy_s": _median(lambda: half2.copy_(half)),
            "bf16_to_fp32_copy_s": _median(lambda: param.grad.copy_(half))}


def worker(c: dict, out_path: str) -> None:
    import logging

    import deepspeed
    import torch

    torch.set_num_threads(c["threads"])
    logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
    deepspeed.utils.logger.setLevel(logging.ERROR)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(LAYERS)])
    numel = sum(p.numel() for p in model.parameters())
    config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "steps_per_print": 10**9,
              "bf16": {"enabled": True}, "gradient_clipping": c["clip"],
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
              "zero_optimization": {"stage": c["stage"], "offload_optimizer": {"device": "cpu"}}}
    engine, _optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    spent: dict[str, float] = {}
    _wrap(engine.optimizer, WRAPPED[c["stage"]], spent)
    x = torch.randn(1, WIDTH, dtype=torch.bfloat16)
    rows = []
    for i in range(WARMUP + STEPS):
        spent.clear()
        t0 = time.perf_counter()
        loss = engine(x).float().square().mean()
        t1 = time.perf_counter()
        engine.backward(loss)
        t2 = time.perf_counter()
        engine.step()
        t3 = time.perf_counter()
        if i >= WARMUP:
            rows.append({"forward_s": t1 - t0, "backward_s": t2 - t1, "step_s": t3 - t2, **spent})
    med = {k: statistics.median(r.get(k, 0.0) for r in rows) for k in rows[0]}
    result = {"params": numel, "optimizer": type(engine.optimizer.optimizer).__name__, "engine": med,
              "bare": bare_kernels(numel), "threads": torch.get_num_threads()}
    Path(out_path).write_text(json.dumps(result))


def summarise(case: dict, r: dict) -> dict:
    """Per run: the step against the Adam inside it, and each host pass per parameter per thread.

    The Adam kernel's share is the step's own ``_optimizer_step`` (timed in the same iteration, so the
    shared VM's noise cancels); the bare kernel is kept as a check. ``to_16bit`` is stage 3's
    ``_reassign_or_swap_out_partitioned_parameters`` and stage 2's remainder of the step after Adam, the
    unscale/clip and the norm, less the bare bf16 copy that stands in for the host -> GPU copy.
    """
    n, threads, e = r["params"], case["threads"], r["engine"]
    step, bare = e["step_s"], r["bare"]
    adam, unscale = e["_optimizer_step"], e.get("unscale_and_clip_grads", 0.0)
    device_copy = bare["bf16_copy_s"] if case["stage"] == 2 else 0.0  # stage 2's host -> GPU copy (docstring)
    if case["stage"] == 3:
        to_16bit = e["_reassign_or_swap_out_partitioned_parameters"]
    else:
        to_16bit = step - adam - unscale - e.get("scaled_global_norm", 0.0) - device_copy
    extra = step - adam - device_copy

    def per(seconds: float) -> float:
        return seconds * threads / n

    return {**case, **{k: r[k] for k in ("params", "optimizer", "engine", "bare")}, "step_over_adam": step / adam,
            "device_copy_stand_in_s": device_copy, "host_extra_s": extra,
            "passes_s_per_param_thread": {"adam_in_step": per(adam), "bare_adam": per(bare["adam_s"]),
                                          "unscale": per(unscale), "to_16bit": per(to_16bit),
                                          "host_extra": per(extra)}}


def model_constants(results: list[dict]) -> dict:
    """What throughput/offload.py uses: at one thread (torchrun's), the median over stages and clip settings
    of the fp32 -> 16-bit pass, and of the unscale/clip pass where it ran."""
    one = [r for r in results if r["threads"] == 1]
    return {"to_16bit_s_per_param_thread": statistics.median(r["passes_s_per_param_thread"]["to_16bit"] for r in one),
            "unscale_s_per_param_thread": statistics.median(r["passes_s_per_param_thread"]["unscale"] for r in one
                                                            if r["passes_s_per_param_thread"]["unscale"] > 0),
            "adam_in_step_s_per_param_thread": statistics.median(r["passes_s_per_param_thread"]["adam_in_step"]
                                                                 for r in one)}




def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--stages", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--clips", type=float, nargs="+", default=[1.0, 0.0])
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--resummarise", action="store_true", help="recompute the summaries of the JSON's runs")
    parser.add_argument("--worker", nargs=2, metavar=("CASE_JSON", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(json.loads(args.worker[0]), args.worker[1])
        return 0
    if args.resummarise:
        data = json.loads(OUT.read_text())
        data["results"] = [summarise({k: r[k] for k in ("ranks", "threads", "stage", "clip")}, r)
                           for r in data["results"]]
        data["model_constants"] = model_constants(data["results"])
        OUT.write_text(json.dumps(data, indent=2) + "\n")
        print(json.dumps(data["model_constants"], indent=2))
        return 0
    results = []
    for threads in args.threads:
        for stage in args.stages:
            for clip in args.clips:
                c = {"ranks": 1, "threads": threads, "stage": stage, "clip": clip}
                out = run_ranks(__file__, c, args.timeout)
                if "error" in out:
                    raise SystemExit(f"{c}: {out['error']}\n{out['log']}")
                s = summarise(c, out["ranks"][0])
                results.append(s)
                print(f"{threads} thread(s) stage {stage} clip {clip}: step {s['engine']['step_s'] * 1e3:.0f} ms, "
                      f"Adam in it {s['engine']['_optimizer_step'] * 1e3:.0f} ms ({s['step_over_adam']:.2f}x); "
                      f"per param per thread: {s['passes_s_per_param_thread']}", flush=True)
    host = machine(accelerator="cpu (DS_ACCELERATOR)", backend="gloo", ranks=1,
                   note="a 2-vCPU VM shared with other jobs: medians of repeated steps")
    OUT.write_text(json.dumps({"machine": host, "width": WIDTH, "layers": LAYERS, "warmup_steps": WARMUP,
                               "timed_steps": STEPS, "results": results,
                               "model_constants": model_constants(results)}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
