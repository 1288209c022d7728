"""Run the calibration matrix (matrix.py) and write one JSON of every row's measurements.

    python benchmarks/gpu/run.py --out gpu_calibration.json            # on one CUDA GPU
    python benchmarks/gpu/run.py --dry-run --out dry.json              # the same harness on the CPU

On the GPU every row runs in a fresh process (worker.py), so each row's peaks are its own; rows are started
while the time budget allows (a row not started is recorded with the reason). The dry run sets
DS_ACCELERATOR=cpu, shrinks the model and the sequence (matrix.for_run) and runs all rows in one process.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import matrix  # noqa: E402

FORMAT = "zeroadvisor-gpu-calibration/1"
# The default time budget (s): every row's planned seconds (matrix.py expected_s) fit in it, and with run.sh's
# wheel install and compare.py it stays inside one 10-minute command on the device
BUDGET_S = 500.0
PACKAGES = ("torch", "deepspeed", "transformers", "peft", "accelerate", "bitsandbytes", "pydantic")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def worker_env(cases: list[dict[str, Any]], dry: bool, base: dict[str, str] | None = None) -> dict[str, str]:
    """The worker process's environment: world size 1, and the rows' PYTORCH_CUDA_ALLOC_CONF. torch's caching
    allocator reads that variable once, when CUDA is first used (c10/cuda/CUDAAllocatorConfig.cpp), so it is
    set here, in the environment the worker starts with, before its interpreter imports torch; rows that
    leave it unset run without it even where this process's environment has one (their "off" is torch's
    default). One worker serves only rows that agree on it (``alloc_groups``)."""
    confs = {case.get("alloc_conf") for case in cases}
    if len(confs) > 1:
        raise ValueError(f"one worker process cannot run rows with different {matrix.ALLOC_CONF_ENV}: {confs}")
    env = dict(os.environ if base is None else base, RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), PYTHONWARNINGS="ignore", PYTHONUNBUFFERED="1")
    if dry:
        env["DS_ACCELERATOR"] = "cpu"
    else:
        env.pop("DS_ACCELERATOR", None)  # DeepSpeed detects CUDA itself
    conf = confs.pop() if confs else None
    if conf is None:
        env.pop(matrix.ALLOC_CONF_ENV, None)
    else:
        env[matrix.ALLOC_CONF_ENV] = conf
    return env


def alloc_groups(cases: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The dry run's rows in order, cut where PYTORCH_CUDA_ALLOC_CONF changes (one worker per group)."""
    groups: list[list[dict[str, Any]]] = []
    for case in cases:
        if groups and groups[-1][0].get("alloc_conf") == case.get("alloc_conf"):
            groups[-1].append(case)
        else:
            groups.append([case])
    return groups


def run_worker(cases: list[dict[str, Any]], dry: bool, timeout: float, log_dir: Path) -> list[dict[str, Any]]:
    """The rows in one fresh worker process (world size 1); a row it did not finish is recorded as failed."""
    env = worker_env(cases, dry)
    log = log_dir / f"{cases[0]['name'].replace(' ', '_').replace(':', '-')}.log"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "rows.json")
        with log.open("w") as handle:
            proc = subprocess.Popen([sys.executable, str(HERE / "worker.py"), json.dumps(cases), str(out)], env=env,
                                    stdout=handle, stderr=subprocess.STDOUT)
            error = None
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                error = f"timeout after {timeout:.0f}s"
        done = json.loads(out.read_text()) if out.is_file() else []
    tail = log.read_text(errors="replace")[-3000:]
    for case in cases[len(done):]:
        done.append({"case": case, "error": error or f"worker exited {proc.returncode} before this row", "log": tail})
        error = error and "not started: an earlier row of the same worker timed out"
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the JSON to write")
    parser.add_argument("--dry-run", action="store_true", help="on the CPU: DS_ACCELERATOR=cpu, a tiny Llama")
    parser.add_argument("--only", default=None, help="run only rows whose name contains this text")
    parser.add_argument("--budget", type=float, default=BUDGET_S,
                        help=f"seconds: no row is started with fewer than its planned seconds left "
                             f"(default {BUDGET_S:.0f})")
    parser.add_argument("--timeout", type=float, default=150.0, help="seconds per row (dry run: for all rows)")
    parser.add_argument("--logs", default=None, help="folder for the workers' logs (default: beside --out)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    log_dir = Path(args.logs) if args.logs else out.with_name(out.stem + "_logs")
    log_dir.mkdir(parents=True, exist_ok=True)
    cases = [matrix.for_run(c, args.dry_run) for c in matrix.MATRIX if args.only is None or args.only in c["name"]]
    t0 = time.perf_counter()
    results: list[dict[str, Any]] = []
    if args.dry_run:
        for group in alloc_groups(cases):
            results += run_worker(group, True, args.timeout, log_dir)
    else:
        for case in cases:
            left = args.budget - (time.perf_counter() - t0)
            if left < case["expected_s"]:
                results.append({"case": case, "skipped": f"time budget: {left:.0f}s of --budget {args.budget:.0f}s "
                                                         f"left, this row takes up to {case['expected_s']}s"})
                continue
            results += run_worker([case], False, min(args.timeout, left), log_dir)
            last = results[-1]
            print(f"{case['name']:<24} {last.get('error') or last.get('skipped') or 'measured'} "
                  f"[{time.perf_counter() - t0:.0f}s]", flush=True)
    document = {"format": FORMAT, "dry_run": args.dry_run, "seconds": time.perf_counter() - t0,
                "machine": {"python": platform.python_version(), "platform": platform.platform(),
                            "cores": os.cpu_count(), "packages": versions()},
                "rows": results}
    out.write_text(json.dumps(document, indent=1))
    measured = sum(1 for r in results if "error" not in r and not r.get("skipped"))
    failed = [r for r in results if "error" in r]
    skipped = [r for r in results if r.get("skipped")]
    print(f"{measured} measured, {len(skipped)} skipped, {len(failed)} failed in {document['seconds']:.0f}s -> {out}")
    for r in failed:
        print(f"FAILED {r['case']['name']}: {r['error']}\n{(r.get('traceback') or r.get('log') or '')[-1500:]}")
    for r in skipped:
        print(f"skipped {r['case']['name']}: {r['skipped']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
