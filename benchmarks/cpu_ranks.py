"""Run one calibration case as N real processes on this CPU (gloo), the way a launcher would.

Shared by benchmarks/calibrate.py (the training step) and benchmarks/calibrate_load.py (the load
phase): each starts ``script --worker CASE_JSON OUT_JSON`` once per rank with the environment
torch.distributed reads, and collects every rank's JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(script: str, c: dict, timeout: int) -> dict:
    """``{"case", "ranks": [each rank's JSON]}``, or ``{"case", "error", "log"}`` (rank 0's log tail)."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for rank in range(c["ranks"]):
            env = dict(os.environ, DS_ACCELERATOR="cpu", RANK=str(rank), LOCAL_RANK=str(rank),
                       WORLD_SIZE=str(c["ranks"]), LOCAL_WORLD_SIZE=str(c["ranks"]), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port), OMP_NUM_THREADS=str(c.get("threads", 1)), PYTHONWARNINGS="ignore")
            out = os.path.join(tmp, f"rank{rank}.json")
            log = open(os.path.join(tmp, f"rank{rank}.log"), "w")  # noqa: SIM115 - the rank writes it; closed below
            procs.append((subprocess.Popen([sys.executable, script, "--worker", json.dumps(c), out], env=env,
                                           stdout=log, stderr=subprocess.STDOUT), out, log))
        deadline = time.time() + timeout
        failed = None
        for proc, out, log in procs:
            try:
                proc.wait(timeout=max(1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                failed = "timeout"
            log.close()
            if failed is None and not Path(out).is_file():  # a rank that wrote nothing failed, whatever its code
                failed = f"rank exited {proc.returncode}"
        if failed:
            for proc, _, _ in procs:
                if proc.poll() is None:
                    proc.kill()
            tail = Path(tmp, "rank0.log").read_text(errors="replace")[-3000:]
            return {"case": c, "error": failed, "log": tail}
        ranks = [json.loads(Path(out).read_text()) for _, out, _ in procs]
    return {"case": c, "ranks": ranks}


def machine(**extra) -> dict:
    """What a measurement ran on (written beside its numbers): CPU model, cores, Python, torch, DeepSpeed."""
    import deepspeed
    import torch

    cpu = ""
    with contextlib.suppress(OSError, StopIteration):
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    return {"cpu": cpu or platform.processor(), "cores": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "deepspeed": deepspeed.__version__, **extra}
