"""Fit the memory model's allocator allowance on public measurements, held out by source, and check two more.

A constant of zeroadvisor/memory that neither DeepSpeed's, torch's or transformers' code nor a datasheet gives is
the named parameter of one mechanism, fitted on measurements users posted, never on the field suite's cases
(benchmarks/field/heldout.py CONSTANTS says so for each):

* ``memory/buffers.py CUDA_CONTEXT_BYTES`` (fitted): the card's memory outside this process's caching allocator
  (the CUDA context and module images, NCCL's buffers, anything cudaMalloc'd past torch). Data: torch's CUDA
  out-of-memory messages (allocator_oom/messages.tsv), each of which states the card's total, what is free and what
  the allocator holds: ``total - free - reserved`` (v1 prints reserved; v2 prints allocated and "reserved but
  unallocated", whose sum is reserved). That is the device's view, other processes on the card included, which is
  what a verdict against the card needs.
* at-limit fragmentation (a check on ``memory/allocator.py FRAGMENTATION``): the same messages' reserved but
  unallocated at the failure, as a fraction of what was allocated: the fragmentation that made the run fail (the
  allocator released every fully free segment and retried before raising). The model charges its allowance per
  re-allocated byte, which a message cannot split out, so this is printed beside it, not fitted.
* the cache without memory pressure (a check, not in the model): what the allocator reserves beyond its allocated
  peak when nothing forces it to give cached blocks back, ``max_reserved / max_allocated - 1``, from training logs
  that print both peaks of one process (allocator_oom/cache_logs.tsv: DeepSpeed's see_memory_usage Max_MA / Max_CA,
  Megatron's max allocated / max reserved), lines printed after a training step only. It is what nvidia-smi reads
  above the need on a card with room; set against the field suite's readings it made them worse
  (docs/benchmarks.md), so the estimate does not add it.

No row comes from a source of the field suite (heldout.source_key: the same GitHub repository or web host as a
case's report or its links): those rows are left out and counted, so that every field case stays held out. Each fit
is the median over sources (a GitHub repository, else a web host) of the per-source medians, so that a thread or
project that posts many lines counts once. Held out: each source in turn is left out, the constant fitted on the
rest and the left-out source's rows predicted; the median absolute error over those predictions is printed beside
that of the constant the model uses.

    python benchmarks/fit_allocator.py        # writes benchmarks/allocator_fit.json and .md
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "field"))
import heldout  # noqa: E402 - benchmarks/field is a script folder, not a package

from zeroadvisor.memory.buffers import CUDA_CONTEXT_BYTES  # noqa: E402

DATA = HERE / "allocator_oom"
GIB = 2**30
# A row whose notes carry this word was flagged when it was collected (a shared or Windows card, an NVML overflow):
# its figures do not describe one training process's card, so it is left out and counted.
ANOMALY = "ANOMALY"


@dataclass(frozen=True, slots=True)
class Sample:
    source: str
    value: float
    multi_gpu: str


@dataclass(frozen=True, slots=True)
class Fit:
    """A constant fitted as the median of per-source medians, with its leave-one-source-out evaluation."""

    name: str
    unit: str
    rows: int
    sources: int
    left_out: int  # rows flagged ANOMALY, from a field source, or without the figures the quantity needs
    value: float
    per_source_p25: float
    per_source_p75: float
    held_out_abs_error: float  # median over rows of |fitted-without-its-source - value|
    previous: float | None  # the constant the model uses (None: the quantity is a check, not a constant)
    previous_abs_error: float | None  # median over rows of |previous - value|
    by_group: dict[str, float]  # the same fit on a subset (multi_gpu yes / no)
    # per subset, the held-out median abs error of its rows: fitted on the subset's other sources, and pooled
    # (fitted on all other sources): a separate constant per subset is worth having only where the first is lower
    by_group_held_out: dict[str, tuple[float, float]]


def _float(text: str) -> float | None:
    text = text.strip()
    return float(text) if text else None


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def non_torch_gib(row: dict[str, str]) -> float | None:
    """The card's memory outside the allocator at the OOM: total - free - reserved (module docstring)."""
    total, free = _float(row["total_gib"]), _float(row["free_gib"])
    allocated = _float(row["allocated_gib"])
    reserved = _float(row["reserved_gib"])
    if reserved is None and allocated is not None:
        unallocated = _float(row["reserved_unallocated_gib"])
        reserved = None if unallocated is None else allocated + unallocated
    if total is None or free is None or reserved is None:
        return None
    value = total - free - reserved
    return value if value >= 0 else None


def at_limit_fragmentation(row: dict[str, str]) -> float | None:
    """Reserved but unallocated at the OOM, as a fraction of what was allocated."""
    allocated = _float(row["allocated_gib"])
    if not allocated:
        return None
    unallocated = _float(row["reserved_unallocated_gib"])
    reserved = _float(row["reserved_gib"])
    if unallocated is None and reserved is not None:
        unallocated = reserved - allocated
    return None if unallocated is None or unallocated < 0 else unallocated / allocated


def cache_excess(row: dict[str, str]) -> float | None:
    """max_reserved / max_allocated - 1 of a line printed after a training step."""
    if row["training_step"].strip() != "yes":
        return None
    peak, reserved = _float(row["max_allocated_gib"]), _float(row["max_reserved_gib"])
    if not peak or reserved is None or reserved < peak:
        return None
    return reserved / peak - 1


def field_sources() -> frozenset[str]:
    """The field suite's sources (heldout.source_key of every case's report and its ``also`` links)."""
    keys = set()
    for path in sorted((HERE / "field" / "cases").glob("*.yaml")):
        case = yaml.safe_load(path.read_text(encoding="utf-8"))
        also = case.get("also") or []
        for url in [case["source"], *([also] if isinstance(also, str) else also)]:
            keys.add(heldout.source_key(url))
    return frozenset(keys)


def row_source(row: dict[str, str]) -> str:
    """A row's source as the field suite keys it: the thread's repository, else its host."""
    return str(heldout.source_key(row["url"]))


def samples(rows: Sequence[dict[str, str]], quantity: Callable[[dict[str, str]], float | None],
            excluded: frozenset[str] = frozenset()) -> tuple[list[Sample], int]:
    kept, left = [], 0
    for row in rows:
        value = None if ANOMALY in row.get("notes", "") or row_source(row) in excluded else quantity(row)
        if value is None:
            left += 1
            continue
        kept.append(Sample(row_source(row), value, row.get("multi_gpu", "").strip() or "unknown"))
    return kept, left


def _by_source(data: Sequence[Sample]) -> dict[str, list[float]]:
    groups: dict[str, list[float]] = {}
    for s in data:
        groups.setdefault(s.source, []).append(s.value)
    return groups


def median_of_source_medians(data: Sequence[Sample]) -> float:
    return statistics.median(statistics.median(v) for v in _by_source(data).values())


def _quartiles(values: Sequence[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def _held_out_error(rows: Sequence[Sample], pool: Sequence[Sample]) -> float:
    """Median over ``rows`` of |the fit on ``pool`` without the row's source - the row's value|."""
    errors = []
    for source, values in _by_source(rows).items():
        held = median_of_source_medians([s for s in pool if s.source != source])
        errors += [abs(held - v) for v in values]
    return statistics.median(errors)


def fit(name: str, unit: str, data: Sequence[Sample], left_out: int, previous: float | None) -> Fit:
    groups = _by_source(data)
    if len(groups) < 3:
        raise SystemExit(f"{name}: {len(groups)} sources; a fit needs at least 3")
    value = median_of_source_medians(data)
    p25, p75 = _quartiles([statistics.median(v) for v in groups.values()])
    by_group, by_group_held_out = {}, {}
    for group in ("yes", "no"):
        subset = [s for s in data if s.multi_gpu == group]
        if len(_by_source(subset)) >= 3:
            by_group[f"multi_gpu={group}"] = median_of_source_medians(subset)
            by_group_held_out[f"multi_gpu={group}"] = (_held_out_error(subset, subset), _held_out_error(subset, data))
    return Fit(name=name, unit=unit, rows=len(data), sources=len(groups), left_out=left_out, value=value,
               per_source_p25=p25, per_source_p75=p75, held_out_abs_error=_held_out_error(data, data),
               previous=previous,
               previous_abs_error=None if previous is None else statistics.median(abs(previous - s.value)
                                                                                  for s in data),
               by_group=by_group, by_group_held_out=by_group_held_out)


def fits(messages: Sequence[dict[str, str]], logs: Sequence[dict[str, str]],
         excluded: frozenset[str] = frozenset()) -> list[Fit]:
    context, context_left = samples(messages, non_torch_gib, excluded)
    fragmentation, fragmentation_left = samples(messages, at_limit_fragmentation, excluded)
    out = [
        fit("CUDA_CONTEXT_BYTES", "GiB", context, context_left, previous=CUDA_CONTEXT_BYTES / GIB),
        fit("at-limit fragmentation (check on FRAGMENTATION)", "fraction of allocated", fragmentation,
            fragmentation_left, previous=None),
    ]
    if logs:
        cache, cache_left = samples(logs, cache_excess, excluded)
        out.append(fit("cache without memory pressure (check, not in the model)", "fraction of the allocated peak",
                       cache, cache_left, previous=None))
    return out


def render_markdown(results: Sequence[Fit]) -> str:
    lines = ["# Allocator allowances fitted on public measurements (benchmarks/fit_allocator.py)", "",
             ("Median over sources of per-source medians; held out: each source left out in turn, the constant "
              "refitted on the rest and that source's rows predicted."), "",
             ("| constant | rows (sources) | left out | fitted | per-source p25-p75 | held-out median abs error |"
              " in the model | its median abs error | by group (its held-out error; pooled fit's) |"),
             "|---|---|---|---|---|---|---|---|---|"]
    for f in results:
        groups = ", ".join(f"{k}: {v:.3f} (held out {f.by_group_held_out[k][0]:.3f}, pooled "
                           f"{f.by_group_held_out[k][1]:.3f})" for k, v in f.by_group.items()) or "-"
        before = "-" if f.previous is None else f"{f.previous:.3f}"
        before_error = "-" if f.previous_abs_error is None else f"{f.previous_abs_error:.3f}"
        lines.append(f"| {f.name} ({f.unit}) | {f.rows} ({f.sources}) | {f.left_out} | {f.value:.3f} | "
                     f"{f.per_source_p25:.3f}-{f.per_source_p75:.3f} | {f.held_out_abs_error:.3f} | {before} | "
                     f"{before_error} | {groups} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    del argv
    messages = read_rows(DATA / "messages.tsv")
    logs_path = DATA / "cache_logs.tsv"
    logs = read_rows(logs_path) if logs_path.is_file() else []
    results = fits(messages, logs, field_sources())
    (HERE / "allocator_fit.json").write_text(json.dumps([asdict(f) for f in results], indent=2) + "\n")
    text = render_markdown(results)
    (HERE / "allocator_fit.md").write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
