"""The step-time model beside public same-hardware measurements (comparisons.yaml).

For each comparison the tool estimates the time per sample of options A and B and prints: whether it
orders them as measured, the estimated and the measured ratio B/A, and whether they agree within 2x;
then the share of pairs ordered as measured and within 2x, and a markdown table (``--markdown``).
``--leave-one-source-out`` lists the publications (``source_group``) with their pairs and the totals
without each one, so that no single source carries the result.

Measured units: ``samples_per_s`` (the whole run), ``seconds_same_samples`` (time for the same samples),
and the per-GPU rates ``tokens_per_s_per_gpu`` and ``model_tflops_per_gpu`` (model FLOPs of the same
model and sequence, so proportional to samples per second per GPU). A side may give its own ``gpus`` and
``gpus_per_node`` (the same run on fewer GPUs); everything else is the entry's.

``--write-validation`` records the model's measured error in zeroadvisor/throughput/validation.py: the
tie band the advice uses (a step time overrules the published order of options only when it is shorter by
more than the median error of the estimated ratios), and its held-out check (each source group's pairs
judged with the band fitted on the other groups).

    PYTHONPATH=. python benchmarks/throughput/compare.py [--markdown | --leave-one-source-out | --write-validation]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from zeroadvisor.hardware.gpus import resolve_gpu
from zeroadvisor.hardware.table import GpuSpec
from zeroadvisor.memory.estimate import Cluster
from zeroadvisor.memory.options import Option
from zeroadvisor.memory.parallel import Parallel, read_parallel
from zeroadvisor.memory.settings import read_settings
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.throughput import Hardware, step_time

DATA = Path(__file__).with_name("comparisons.yaml")
VALIDATION = Path(__file__).resolve().parents[2] / "zeroadvisor" / "throughput" / "validation.py"
MODEL_KEYS = ("parameters", "num_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
              "intermediate_size", "vocab_size", "encoder_layers", "decoder_layers", "embedding_parameters",
              "gated_mlp", "tied_embeddings", "modules_with_parameters")
SIDE_CLUSTER_KEYS = ("gpus", "gpus_per_node")  # what a side may change of the entry's run
PER_GPU_UNITS = ("tokens_per_s_per_gpu", "model_tflops_per_gpu")


@dataclass(frozen=True)
class Row:
    id: str
    group: str  # the publication or thread (leave-one-source-out)
    source: str
    hardware: str
    a: str
    b: str
    measured_ratio: float  # time per sample B / A
    estimated_ratio: float

    @property
    def ordered(self) -> bool:
        return (self.measured_ratio > 1) == (self.estimated_ratio > 1) and self.estimated_ratio != 1

    @property
    def within_2x(self) -> bool:
        return 0.5 <= self.estimated_ratio / self.measured_ratio <= 2


def _gpu(entry: dict) -> GpuSpec:
    if "gpu" in entry:
        return resolve_gpu(entry["gpu"])
    f = entry["gpu_facts"]
    return GpuSpec(f["name"], 0, f["dense_tflops"], f["intra_node_gb_s"], f["host_link_gb_s"], f["source"],
                   memory_gb_s=f.get("memory_gb_s"))


def seconds_per_sample(entry: dict, side: dict) -> float:
    """Estimated seconds per sample of one side (its stage, offload, micro batch, checkpointing, GPUs)."""
    entry = {**entry, **{k: side[k] for k in SIDE_CLUSTER_KEYS if k in side}}
    model = ModelSpec(**{k: v for k, v in entry["model"].items() if k in MODEL_KEYS})
    micro = side.get("micro_batch", entry.get("micro_batch"))
    layout = Parallel(data=entry["gpus"] // (entry.get("tensor_parallel", 1) * entry.get("pipeline_parallel", 1)),
                      tensor=entry.get("tensor_parallel", 1), pipeline=entry.get("pipeline_parallel", 1))
    samples = entry.get("global_batch") or micro * entry.get("accumulation", 1) * layout.batch_world()
    accumulation = samples // (micro * layout.batch_world())
    shape = TrainingShape(sequence_length=entry["sequence_length"], target_length=entry.get("target_length"),
                          activation_checkpointing=side.get("checkpointing", entry.get("checkpointing", "none")))
    zero: dict = {"stage": side["stage"]}
    for which in ("offload_optimizer", "offload_param"):
        if side.get(which):
            zero[which] = {"device": side[which]}
            if "offload_pin_memory" in entry:  # the run's DeepSpeed default (True only since PR 8207)
                zero[which]["pin_memory"] = entry["offload_pin_memory"]
    zero.update(side.get("zero", {}))
    config = {"train_micro_batch_size_per_gpu": micro, "gradient_accumulation_steps": accumulation,
              entry["precision"]: {"enabled": True}, "optimizer": {"type": "AdamW"}, "zero_optimization": zero}
    cluster = Cluster(gpus=entry["gpus"], gpus_per_node=entry["gpus_per_node"])
    settings = read_settings(config, model, entry["gpus"])
    hw_args = {k: entry[k] for k in ("inter_node_gb_s", "cpu_cores", "nvme_gb_s", "efficiency", "launcher")
               if k in entry}
    option = Option(side["stage"], side.get("offload_optimizer", "none"), side.get("offload_param", "none"))
    # hpZ as DeepSpeed reads it (the other ZeRO++ switches are in the settings)
    given = TrainingShape(tensor_parallel=layout.tensor, pipeline_parallel=layout.pipeline)
    layout = replace(layout, hpz=read_parallel(config, entry["gpus"], given).hpz)
    t = step_time(model, shape, cluster, option, settings, Hardware(_gpu(entry), **hw_args), layout=layout,
                  global_batch=samples)
    return t.step_time_s / samples


def load(path: Path = DATA) -> list[dict]:
    return yaml.safe_load(path.read_text("utf-8"))["comparisons"]


def measured_ratio(entry: dict) -> float:
    """Measured time per sample of B over A, from the unit the source reports."""
    m = entry["measured"]
    if m["unit"] == "samples_per_s":
        return m["a"] / m["b"]
    if m["unit"] == "seconds_same_samples":
        return m["b"] / m["a"]
    if m["unit"] in PER_GPU_UNITS:
        gpus_a, gpus_b = (entry[side].get("gpus", entry["gpus"]) for side in ("a", "b"))
        return (m["a"] * gpus_a) / (m["b"] * gpus_b)
    raise ValueError(f"{entry['id']}: unknown measured unit {m['unit']!r}")


def evaluate(path: Path = DATA) -> list[Row]:
    rows = []
    for entry in load(path):
        estimated = seconds_per_sample(entry, entry["b"]) / seconds_per_sample(entry, entry["a"])
        rows.append(Row(entry["id"], entry["source_group"], entry["source"], entry["hardware"], entry["a"]["label"],
                        entry["b"]["label"], measured_ratio(entry), estimated))
    return rows


def summary(rows: list[Row]) -> tuple[float, float]:
    """(share ordered as measured, share within 2x), in percent."""
    return (100 * sum(r.ordered for r in rows) / len(rows), 100 * sum(r.within_2x for r in rows) / len(rows))


def leave_one_source_out(rows: list[Row]) -> str:
    """Each source group with its pairs, and the totals of the other groups' pairs without it."""
    groups = sorted({r.group for r in rows})
    lines = [f"{len(rows)} pairs from {len(groups)} source groups; totals without each group (ordered / within 2x):"]
    for g in groups:
        own = [r for r in rows if r.group == g]
        rest = [r for r in rows if r.group != g]
        order, within = summary(rest)
        lines.append(f"  {g}: {len(own)} pairs; without it {order:.0f}% / {within:.0f}%")
    return "\n".join(lines) + "\n"


def error_band(rows: list[Row]) -> float:
    """The tie band: exp of the median |ln(estimated / measured)| over ``rows`` (1.17: the typical estimated
    ratio is 17% off the measured one, so step times closer than that are a tie)."""
    return math.exp(statistics.median(abs(math.log(r.estimated_ratio / r.measured_ratio)) for r in rows))


def claims(rows: list[Row], band: float) -> list[Row]:
    """The pairs where the model claims one option faster by more than ``band``."""
    return [r for r in rows if abs(math.log(r.estimated_ratio)) > math.log(band)]


def held_out_claims(rows: list[Row]) -> tuple[int, int]:
    """(claims right, claims made) when each source group's pairs are judged with the band fitted on the
    other groups: how often an overruling claim of the model holds on a publication it was not fitted on."""
    right = made = 0
    for group in sorted({r.group for r in rows}):
        band = error_band([r for r in rows if r.group != group])
        held = claims([r for r in rows if r.group == group], band)
        made += len(held)
        right += sum(r.ordered for r in held)
    return right, made


def validation_module(rows: list[Row]) -> str:
    """The text of zeroadvisor/throughput/validation.py for ``rows``."""
    order, within = summary(rows)
    band = error_band(rows)
    in_sample = claims(rows, band)
    right, made = held_out_claims(rows)
    return f'''"""The step-time model's measured error on public same-hardware pairs (benchmarks/throughput/).

Generated by ``PYTHONPATH=. python benchmarks/throughput/compare.py --write-validation``; do not edit
(tests/test_throughput_validation.py checks it matches the pairs). The advice reads ``TIE_BAND``: a step
time overrules the published order of options (advisor/ranking.py) only when it is shorter by more than
this factor, the median error of the model's estimated ratios.
"""

PAIRS = {len(rows)}
SOURCE_GROUPS = {len({r.group for r in rows})}
ORDERED_PERCENT = {order:.2f}  # pairs the model orders as measured
WITHIN_2X_PERCENT = {within:.2f}  # pairs whose estimated ratio is within 2x of the measured one
TIE_BAND = {band:.4f}  # exp(median |ln(estimated ratio / measured ratio)|)
CLAIMS = {len(in_sample)}  # pairs the model calls apart by more than TIE_BAND
CLAIMS_RIGHT = {sum(r.ordered for r in in_sample)}  # of those, ordered as measured
# held out: each source group's pairs judged with the band fitted on the other groups
HELD_OUT_CLAIMS = {made}
HELD_OUT_CLAIMS_RIGHT = {right}
'''


def markdown(rows: list[Row]) -> str:
    lines = ["| comparison | hardware | A | B | measured B/A | estimated B/A | order | within 2x |",
             "|---|---|---|---|---:|---:|:---:|:---:|"]
    lines += [f"| [{r.id}]({r.source}) | {r.hardware} | {r.a} | {r.b} | {r.measured_ratio:.2f} | "
              f"{r.estimated_ratio:.2f} | {'✓' if r.ordered else '✗'} | {'✓' if r.within_2x else '✗'} |" for r in rows]
    order, within = summary(rows)
    lines.append(f"\n{len(rows)} pairs: ordered as measured {order:.0f}%, ratio within 2x {within:.0f}%.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--markdown", action="store_true")
    mode.add_argument("--leave-one-source-out", action="store_true")
    mode.add_argument("--write-validation", action="store_true")
    args = parser.parse_args(argv)
    rows = evaluate()
    if args.write_validation:
        VALIDATION.write_text(validation_module(rows), "utf-8")
        print(f"wrote {VALIDATION}")
        return 0
    if args.markdown:
        sys.stdout.write(markdown(rows))
        return 0
    if args.leave_one_source_out:
        sys.stdout.write(leave_one_source_out(rows))
        return 0
    for r in rows:
        print(f"{r.id}: {r.a} -> {r.b}: measured {r.measured_ratio:.2f}x, estimated {r.estimated_ratio:.2f}x "
              f"({'ordered' if r.ordered else 'MISORDERED'}, {'within' if r.within_2x else 'OUTSIDE'} 2x)")
    order, within = summary(rows)
    print(f"{len(rows)} pairs from {len({r.group for r in rows})} source groups: ordered as measured {order:.0f}%, "
          f"ratio within 2x {within:.0f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
