"""What SuperOffload's queue to its CPU-Adam worker does to a CPU tensor (memory/features2025.py).

runtime/superoffload/superoffload_utils.py SuperOffloadCPUOptimizer.async_step puts the fp32 partition and its
gradient on a ``torch.multiprocessing`` spawn-context SimpleQueue. torch's pickler (multiprocessing/reductions.py
reduce_storage -> storage._share_fd_cpu_) moves a CPU storage that is not shared yet into a new shared-memory
block: the data is copied and the storage swapped, so the caller's tensor points at shared memory afterwards.

Run: ``python benchmarks/superoffload_shared_memory.py``. Recorded (torch 2.13 CPU, Python 3.11, a 200 MB fp32
tensor): ``shared before False; shared after True, data_ptr moved True, RSS delta 0.97 MiB`` — the pageable
original is freed (RSS unchanged). A pinned original (the fp32 gradient buffer, stage3.py
initialize_optimizer_states) is freed into torch's CachingHostAllocator cache instead, which keeps it: not
measurable without a GPU, so the estimate's ``superoffload_shared_grads`` term is marked a bound.
"""

from __future__ import annotations

import os

import torch
import torch.multiprocessing as mp


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _worker(q, r) -> None:  # type: ignore[no-untyped-def]
    r.put(q.get().numel())


def main() -> None:
    ctx = mp.get_context("spawn")  # as SuperOffloadCPUOptimizer
    q, r = ctx.SimpleQueue(), ctx.SimpleQueue()
    p = ctx.Process(target=_worker, args=(q, r), daemon=True)
    p.start()
    t = torch.ones(50_000_000)  # 200 MB of fp32
    ptr, before = t.data_ptr(), _rss()
    print(f"shared before {t.is_shared()}")
    q.put(t)
    r.get()
    print(f"shared after {t.is_shared()}, data_ptr moved {t.data_ptr() != ptr}, "
          f"RSS delta {(_rss() - before) / 2**20:.2f} MiB")
    p.join(timeout=5)


if __name__ == "__main__":
    main()
