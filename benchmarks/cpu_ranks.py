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


def _release_path(release: str | None) -> dict[str, str]:
    """PYTHONPATH putting DeepSpeed ``release`` first (installed by tools/install_deepspeed_release.py into
    .venv/deepspeed-releases), or nothing for the venv's own release."""
    if not release:
        return {}
    folder = Path(__file__).resolve().parents[1] / ".venv" / "deepspeed-releases" / release
    if not folder.is_dir():
        raise SystemExit(f"DeepSpeed {release} is not installed: python tools/install_deepspeed_release.py {release}")
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)}


def run_ranks(script: str, c: dict, timeout: int) -> dict:
    """``{"case", "ranks": [each rank's JSON]}``, or ``{"case", "error", "log"}`` (rank 0's log tail)."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for rank in range(c["ranks"]):
            env = dict(os.environ, DS_ACCELERATOR="cpu", RANK=str(rank), LOCAL_RANK=str(rank),
                       **_release_path(c.get("release")),
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


def write_report(out: str, meta: dict, payload: dict, text: str) -> None:
    """``out``.json (the machine and the payload) and ``out``.md (``text``), and ``text`` printed."""
    Path(out + ".json").write_text(json.dumps({"machine": meta, **payload}, indent=1) + "\n")
    Path(out + ".md").write_text(text)
    print(text)


def step_calibration_main(script: str, default_out: Path, cases: list[dict], worker, estimate_terms, markdown,
                          argv: list[str] | None = None) -> None:
    """The command line of a step calibration (calibrate_zero2_step.py, calibrate_zero3_step.py): ``--worker``
    runs one rank, ``--report JSON`` rewrites the report (and the estimate) from a measurement, else every case is
    measured on ``cases[i]["ranks"]`` processes and compared with ``estimate_terms(case)``."""
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", nargs=2)
    ap.add_argument("--out", default=str(default_out))
    ap.add_argument("--report", default=None, metavar="JSON", help="rewrite the .md (and the estimate) from a .json")
    args = ap.parse_args(argv)
    if args.worker:
        worker(json.loads(args.worker[0]), args.worker[1])
        sys.stdout.flush()
        os._exit(0)  # gloo destructors sometimes abort at teardown, after the measurement is written
    if args.report:
        data = json.loads(Path(args.report).read_text())
        rows = [dict(r, zeroadvisor=estimate_terms(r["case"])) for r in data["cases"]]
        meta = data["machine"]
    else:
        rows = []
        for c in cases:
            result = run_ranks(script, c, timeout=600)
            if "error" in result:
                raise SystemExit(f"{c}: {result['error']}\n{result['log']}")
            rows.append({"case": c, "measured": result["ranks"][0], "zeroadvisor": estimate_terms(c)})
            print(rows[-1], flush=True)
        meta = machine()
    write_report(args.out, meta, {"cases": rows}, markdown(rows, meta))
