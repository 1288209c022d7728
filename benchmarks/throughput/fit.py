"""Fit the step-time model's one free constant, ZeRO-3's wait per module fetch, on public same-hardware pairs.

zeroadvisor/throughput/host.py ``ZERO3_FETCH_WAIT_S``: seconds per ZeRO-3 module fetch that the compute
stream waits for the module's all-gather (partitioned_param_coordinator.py fetch_sub_module: one
all_gather_coalesced launch per module, then ``current_stream().wait_stream(allgather_stream)``). Neither
DeepSpeed's code nor a datasheet gives it, so it is fitted, once, for every case:

- the fit: least squares of ln(estimated ratio / measured ratio) over the pairs of the training half of the
  source groups (comparisons.yaml ``source_group``, sorted by name, every other one from the first), on a
  grid of 100 values per decade from 1 us to 10 ms; the value kept to 3 significant digits;
- held out: the other half of the groups, judged with the value fitted on the training half; and
  leave-one-source-out: for each group, the value refitted on all the other groups, judged on that group.

A step time is linear in the constant (every fetch wait adds to its pass, host.py), so each side is estimated
twice (constant 0 and ``PROBE``) and the ratio at any value follows exactly.

    PYTHONPATH=. python benchmarks/throughput/fit.py [--write]   # --write: fit.md
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # compare.py beside this script
import compare

from zeroadvisor.throughput import host

OUT = Path(__file__).with_name("fit.md")
PROBE = 1e-3
GRID = tuple(1e-6 * 10 ** (i / 100) for i in range(401))  # 1 us .. 10 ms


@contextmanager
def fetch_wait(seconds: float) -> Iterator[None]:
    """The model with ``ZERO3_FETCH_WAIT_S`` = ``seconds`` inside the block (the committed value after it)."""
    kept = host.ZERO3_FETCH_WAIT_S
    host.ZERO3_FETCH_WAIT_S = seconds
    try:
        yield
    finally:
        host.ZERO3_FETCH_WAIT_S = kept


@dataclass(frozen=True)
class Pair:
    """One comparison: each side's seconds per sample at wait 0 and its slope per second of wait."""

    row: compare.Row
    a0: float
    a_slope: float
    b0: float
    b_slope: float

    def at(self, wait: float) -> compare.Row:
        ratio = (self.b0 + wait * self.b_slope) / (self.a0 + wait * self.a_slope)
        return replace(self.row, estimated_ratio=ratio)


def pairs() -> list[Pair]:
    out = []
    entries = compare.load()
    with fetch_wait(0.0):
        rows = compare.evaluate()
        base = [(compare.seconds_per_sample(e, e["a"]), compare.seconds_per_sample(e, e["b"])) for e in entries]
    with fetch_wait(PROBE):
        probe = [(compare.seconds_per_sample(e, e["a"]), compare.seconds_per_sample(e, e["b"])) for e in entries]
    for row, (a0, b0), (a1, b1) in zip(rows, base, probe, strict=True):
        out.append(Pair(row, a0, (a1 - a0) / PROBE, b0, (b1 - b0) / PROBE))
    return out


def loss(selected: list[Pair], wait: float) -> float:
    return sum(math.log(r.estimated_ratio / r.measured_ratio) ** 2 for r in (p.at(wait) for p in selected))


def fit_on(selected: list[Pair]) -> float:
    """The grid value with the least squared log error on ``selected``, to 3 significant digits."""
    best = min(GRID, key=lambda w: loss(selected, w))
    return float(f"{best:.3g}")


def halves(all_pairs: list[Pair]) -> tuple[list[str], list[str]]:
    groups = sorted({p.row.group for p in all_pairs})
    return groups[0::2], groups[1::2]


@dataclass(frozen=True)
class Fit:
    value: float
    training_groups: list[str]
    test_groups: list[str]
    before: dict[str, tuple[float, float]]  # set -> (ordered %, within 2x %) at wait 0
    after: dict[str, tuple[float, float]]  # at the fitted value
    loso: dict[str, float]  # group -> value refitted without it
    loso_held_out: tuple[float, float]
    loso_before: tuple[float, float]


def fit() -> Fit:
    all_pairs = pairs()
    train_g, test_g = halves(all_pairs)
    train = [p for p in all_pairs if p.row.group in train_g]
    test = [p for p in all_pairs if p.row.group in test_g]
    value = fit_on(train)
    sets = {"training half": train, "test half": test, "all pairs": all_pairs}
    before = {k: compare.summary([p.at(0.0) for p in v]) for k, v in sets.items()}
    after = {k: compare.summary([p.at(value) for p in v]) for k, v in sets.items()}
    loso: dict[str, float] = {}
    held: list[compare.Row] = []
    for g in sorted({p.row.group for p in all_pairs}):
        loso[g] = fit_on([p for p in all_pairs if p.row.group != g])
        held += [p.at(loso[g]) for p in all_pairs if p.row.group == g]
    return Fit(value, train_g, test_g, before, after, loso, compare.summary(held),
               compare.summary([p.at(0.0) for p in all_pairs]))


def markdown(f: Fit) -> str:
    lines = ["# ZeRO-3 fetch wait: the fitted constant", "",
             ("Generated by `PYTHONPATH=. python benchmarks/throughput/fit.py --write`; do not edit "
              "(tests/test_throughput_fit.py checks it and the committed value)."), "",
             (f"`ZERO3_FETCH_WAIT_S` (zeroadvisor/throughput/host.py) = **{f.value * 1e6:g} us** per ZeRO-3 module "
              "fetch, fitted by least squares of ln(estimated / measured ratio) on the training half of the source "
              "groups."), "",
             f"Training groups: {', '.join(f.training_groups)}.", "",
             f"Test groups: {', '.join(f.test_groups)}.", "",
             "| pairs | ordered as measured, without the wait | with it | within 2x, without | with |",
             "|---|---:|---:|---:|---:|"]
    for k in f.before:
        (o0, w0), (o1, w1) = f.before[k], f.after[k]
        lines.append(f"| {k} | {o0:.0f}% | {o1:.0f}% | {w0:.0f}% | {w1:.0f}% |")
    ho, hw = f.loso_held_out
    bo, bw = f.loso_before
    lines += ["", ("Leave-one-source-out: each group judged with the value refitted on all the other groups: "
                   f"ordered as measured {ho:.0f}% (without the wait {bo:.0f}%), within 2x {hw:.0f}% "
                   f"(without {bw:.0f}%)."),
              "", "| left out | refitted value (us) |", "|---|---:|"]
    lines += [f"| {g} | {v * 1e6:g} |" for g, v in f.loso.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write fit.md")
    args = parser.parse_args(argv)
    text = markdown(fit())
    if args.write:
        OUT.write_text(text, "utf-8")
        print(f"wrote {OUT}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
