"""Host RAM of one training process before it holds a tensor, and of one forked data-loader worker (CPU, here).

What zeroadvisor/memory/host.py counts per GPU process (runtime_baseline_terms) and per data-loader worker
(dataloader_worker_terms), measured in fresh processes on this machine's CPU build:

* ``imports``: one fresh interpreter per step, each importing one more library (torch; + deepspeed;
  + transformers with its Trainer, as a Trainer run does); RSS, and USS/PSS from /proc/self/smaps_rollup
  (USS = Private_Clean + Private_Dirty: what the process alone holds).
* ``worker``: a process that imported torch, deepspeed and transformers iterates a torch DataLoader with
  ``num_workers`` forked workers (Linux's default start method, which the Trainer uses) over a small map-style
  dataset; each worker's USS is read from its /proc/<pid>/smaps_rollup while it runs. A forked worker shares
  the parent's pages copy-on-write: its private memory is what it writes (its own interpreter state, torch's
  per-worker set-up, the batches it builds, and the pages of Python objects whose reference counts it touches:
  pytorch/pytorch#13246). RSS counts the shared pages again in every worker, so tools that sum RSS over
  processes report more than the node holds; USS is what each worker adds.

The CUDA runtime's host side cannot be measured on a CPU build: host.py takes it from public reports.

    python benchmarks/host_baseline.py            # writes benchmarks/host_baseline.json
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).with_name("host_baseline.json")
STEPS = {
    "python": "",
    "torch": "import torch",
    "torch+deepspeed": "import torch, deepspeed",
    "torch+deepspeed+transformers": "import torch, deepspeed, transformers; from transformers import Trainer",
}
WORKERS = 4
BATCHES = 64


def smaps(pid: int | str = "self") -> dict[str, int]:
    """RSS, PSS and USS in bytes from /proc/<pid>/smaps_rollup (empty where the kernel does not give it)."""
    fields: dict[str, int] = {}
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2] == "kB":
            fields[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return {"rss": fields.get("Rss", 0), "pss": fields.get("Pss", 0),
            "uss": fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)}


CHILD_IMPORT = """
import json, sys
sys.path.insert(0, {here!r})
{imports}
from host_baseline import smaps
print(json.dumps(smaps()))
"""

CHILD_WORKER = """
import json, os, sys, time
sys.path.insert(0, {here!r})
import torch, deepspeed, transformers
from transformers import Trainer
from torch.utils.data import DataLoader, Dataset, get_worker_info
from host_baseline import smaps

class Tokens(Dataset):
    # a tokenized dataset of 4,096 samples of 512 token ids held as Python lists (what datasets' rows are
    # before collation): the objects whose reference counts a worker touches
    def __init__(self):
        self.rows = [list(range(i, i + 512)) for i in range(4096)]
    def __len__(self):
        return len(self.rows)
    def __getitem__(self, i):
        info = get_worker_info()
        if info is not None and i % 64 == 0:
            with open(os.path.join({folder!r}, f"w{{info.id}}"), "w") as f:
                json.dump(smaps(), f)
        return torch.tensor(self.rows[i])

parent = smaps()
loader = DataLoader(Tokens(), batch_size=8, num_workers={workers}, shuffle=True)
for n, batch in enumerate(loader):
    if n == {batches}:
        break
print(json.dumps({{"parent": parent, "parent_after": smaps()}}))
"""


def run_child(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "DS_ACCELERATOR": "cpu"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    here = str(Path(__file__).parent)
    imports = {name: run_child(CHILD_IMPORT.format(here=here, imports=line)) for name, line in STEPS.items()}
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"host_baseline_{os.getpid()}"
    folder.mkdir(exist_ok=True)
    started = time.time()
    loader = run_child(CHILD_WORKER.format(here=here, folder=str(folder), workers=WORKERS, batches=BATCHES))
    workers = [json.loads(p.read_text()) for p in sorted(folder.glob("w*"))]
    for p in folder.glob("w*"):
        p.unlink()
    folder.rmdir()
    result = {
        "what": "host RAM per process (bytes) from /proc/<pid>/smaps_rollup; uss = Private_Clean + Private_Dirty",
        "platform": {"python": platform.python_version(), "machine": platform.machine(),
                     "torch": _version("torch"), "deepspeed": _version("deepspeed"),
                     "transformers": _version("transformers")},
        "imports": imports,
        "worker": {"num_workers": WORKERS, "batches": BATCHES, "dataset": "4,096 rows of 512 ints as Python lists",
                   "parent": loader, "workers": workers,
                   "max_worker_uss": max((w["uss"] for w in workers), default=0),
                   "max_worker_rss": max((w["rss"] for w in workers), default=0),
                   "seconds": round(time.time() - started, 1)},
    }
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    main()
