"""Measure DeepSpeedCPUAdam's optimizer-step throughput on this CPU, in parameters per second per core.

The step-time model (zeroadvisor/throughput/offload.py) costs the CPU optimizer step of
``offload_optimizer`` as  partition parameters / (rate per core x cores per GPU process). This
script measures that rate with the real ``deepspeed.ops.adam.DeepSpeedCPUAdam`` (the op DeepSpeed
uses with offload_optimizer, JIT-built by CPUAdamBuilder; AVX2/AVX512 SIMD kernels) on fp32
parameters, gradients and states, one thread per core (``torch.set_num_threads``; the op uses
OpenMP). It falls back to ``torch.optim.Adam(foreach=True)`` only when the op does not build, and
says so in its output.

Measured on the development machine (2 vCPU "AMD EPYC" cloud VM, AVX2, 23 GB RAM, torch 2.13 CPU,
deepspeed 0.19.8), 2**24 parameters, median of 5 steps after 2 warm-up steps:
see benchmarks/cpu_adam.json (written by this script) and the table in benchmarks/throughput/README.md.

    PYTHONPATH=. python benchmarks/cpu_adam.py [--params 16777216] [--threads 1 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _simd() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return "unknown"
    return "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "none"


def _optimizer(params, use_deepspeed: bool):
    if use_deepspeed:
        from deepspeed.ops.adam import DeepSpeedCPUAdam

        return DeepSpeedCPUAdam(params, lr=1e-4), "deepspeed.ops.adam.DeepSpeedCPUAdam"
    import torch

    return torch.optim.Adam(params, lr=1e-4, foreach=True), "torch.optim.Adam(foreach=True) (fallback)"


def measure(numel: int, threads: int, steps: int = 5, warmup: int = 2) -> dict:
    import torch

    torch.set_num_threads(threads)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    param = torch.nn.Parameter(torch.zeros(numel, dtype=torch.float32))
    param.grad = torch.randn(numel, dtype=torch.float32) * 1e-3
    try:
        opt, which = _optimizer([param], True)
    except Exception as exc:  # noqa: BLE001 - the op's build fails in many ways (no C++ toolchain, ...); say why the fallback ran
        print(f"DeepSpeedCPUAdam did not build ({type(exc).__name__}: {exc}); using torch.optim.Adam",
              file=sys.stderr)
        opt, which = _optimizer([param], False)
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        opt.step()
        elapsed = time.perf_counter() - start
        if i >= warmup:
            times.append(elapsed)
    median = statistics.median(times)
    return {"optimizer": which, "params": numel, "threads": threads, "median_step_s": median,
            "params_per_s": numel / median, "params_per_s_per_core": numel / median / threads}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", type=int, default=1 << 24)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, os.cpu_count() or 1])
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    machine = {"cpu": _cpu_name(), "simd": _simd(), "cores": os.cpu_count(), "python": platform.python_version()}
    try:
        import deepspeed
        import torch

        machine.update(torch=torch.__version__, deepspeed=deepspeed.__version__)
    except ImportError as exc:
        print(f"needs torch and deepspeed (the oracle extra): {exc}", file=sys.stderr)
        return 2
    results = [measure(args.params, t) for t in dict.fromkeys(args.threads)]
    for r in results:
        print(f"{r['optimizer']}: {r['params']:,} params, {r['threads']} thread(s): {r['median_step_s']:.3f} s/step, "
              f"{r['params_per_s'] / 1e6:.0f} M params/s, {r['params_per_s_per_core'] / 1e6:.0f} M params/s/core")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"machine": machine, "results": results}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
