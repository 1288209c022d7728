"""Compare a calibration JSON (run.py) term by term with zeroadvisor's estimate and step-time model.

    python benchmarks/gpu/compare.py gpu_calibration.json --out gpu_compare     # writes .json and .md

For every measured row the estimate is asked for exactly what ran (the public API: ``zeroadvisor.api.
run_estimate`` with ``step_times=True`` on the inputs ``zeroadvisor.inputs.run.build`` makes, as the command
line does): the row's DeepSpeed config with its optimizer named, the model's config.json, one GPU, the
sequence length, activation checkpointing, LoRA/QLoRA, the bf16 load and no zero.Init. Each term is then
``estimate``, ``measured`` and ``ratio`` = estimate / measured (above 1: the estimate is higher), or a null
measurement with the reason (the dry run has no CUDA readings).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for path in (str(ROOT), str(HERE)):
    if path not in sys.path:
        sys.path.insert(0, path)
import matrix  # noqa: E402
from rows import ROWS  # noqa: E402

GPU = "H200-SXM-141GB"  # the card the kit was sized for; --gpu names another from zeroadvisor's table
DRY_NOTE = ("dry run: every number is from DeepSpeed's CPU accelerator on a tiny Llama, where GPU and host are "
            "one RAM (GPU and host terms are summed); CUDA readings are null and step times are CPU times against "
            "the model's GPU times, so no ratio here says anything about the estimate")


# What the estimate has no input for (its number is then that of the run without it, and the row says so)
FROZEN_NOTE = ("no estimate input freezes parameters without PEFT: the estimate is that of full training (every "
               "parameter makes a gradient), so the gradient-side terms show what a frozen embedding and head "
               "take away")


@contextlib.contextmanager
def allocator_env(conf: str | None) -> Iterator[None]:
    """PYTORCH_CUDA_ALLOC_CONF as the row ran with it, for the estimate to read (inputs/run.py alloc_conf reads
    the environment), and this process's own value back afterwards."""
    before = os.environ.get(matrix.ALLOC_CONF_ENV)
    if conf is None:
        os.environ.pop(matrix.ALLOC_CONF_ENV, None)
    else:
        os.environ[matrix.ALLOC_CONF_ENV] = conf
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(matrix.ALLOC_CONF_ENV, None)
        else:
            os.environ[matrix.ALLOC_CONF_ENV] = before


def estimate_row(case: dict[str, Any], gpu: str) -> tuple[Any, Any, int]:
    """(the configured StageEstimate, its step time, the stage-3 step's fp32 gradient) for what the row ran."""
    from zeroadvisor import api
    from zeroadvisor.inputs.command import Command
    from zeroadvisor.inputs.request import Request
    from zeroadvisor.inputs.run import build

    load_dtype = "fp32" if case.get("precision") == "autocast" else "bf16"  # autocast trains an fp32 model
    training: dict[str, Any] = {"seq_len": case["seq_len"], "flash_attention": True, "load_dtype": load_dtype,
                                "activation_checkpointing": "full" if case["checkpointing"] else "none"}
    if case["stage"] == 3:
        training["zero_init"] = False  # the model is built whole on the host, then initialize partitions it
    if case["peft"] != "none":
        training.update(peft=case["peft"], lora_r=case.get("lora_r", matrix.LORA_R),
                        lora_target_modules=list(matrix.LORA_TARGETS))
        if case["peft"] == "qlora":
            training["quantization"] = "4bit"
    with tempfile.TemporaryDirectory() as tmp:
        config_json = Path(tmp, "config.json")
        config_json.write_text(json.dumps(case["model"]))
        with allocator_env(case.get("alloc_conf")):
            inputs = build(Request.taking(Command.ESTIMATE, config=matrix.estimate_config(case),
                                          model=str(config_json), gpus=1, gpu=gpu, **training))
        result = api.run_estimate(inputs, step_times=True)
    stage = result.configured
    steps = result.throughput or {}
    return stage, steps.get(stage.option), _step_gradient(result.estimate.settings, stage)


def _step_gradient(settings: Any, stage: Any) -> int:
    """Stage 3: the sub-group's fp32 gradient (stages 1 and 2: the partition's) the live-tensor reading at the optimizer
    step sees, which the estimate counts in the step only beyond the activations freed before it
    (memory/step_temporaries.py)."""
    from zeroadvisor.memory.bytes import nbytes
    from zeroadvisor.memory.step_temporaries import held_gradient

    # the term holding the rank's 16-bit gradient partition (memory/states.py): stage 1's is the epilogue's
    # averaged_gradients views, stage 2's grads_in_partition, stage 3's flat buffer
    buffer = {1: "independent_gradient_partition_epilogue", 2: "grads_in_partition"}.get(
        stage.option.stage, "grad_partitions_flat_buffer")
    flat = [t for t in stage.terms if t.phase == "train" and t.device == "gpu" and buffer in t.source]
    if not flat:
        return 0
    part = flat[0].nbytes // nbytes(settings.grad_accum_dtype)
    return held_gradient(settings, stage.option, part)


def entry(phase: str, term: str, device: str, estimate: float | None, measured: float | None,
          reason: str | None = None, what: str = "") -> dict[str, Any]:
    ratio = estimate / measured if estimate is not None and measured else None
    return {"phase": phase, "term": term, "device": device, "estimate": estimate, "measured": measured,
            "ratio": ratio, "reason": None if measured is not None else reason, "what": what}


def _sum(terms: list[Any], phase: str, device: str | None = None, row: str | None = None, key: str | None = None,
         allowances: bool = False) -> int:
    return sum(t.nbytes for t in terms if t.phase == phase and (device is None or t.device == device)
               and (row is None or t.row == row) and (key is None or t.key == key)
               and (allowances or t.kind != "allowance"))


def _fragmentation(m: dict[str, Any] | None) -> int | None:
    if m is None or m.get("max_memory_reserved") is None:
        return None
    return int(m["max_memory_reserved"] - m["max_memory_allocated"])


def decided(r: dict[str, Any], terms: list[Any], dry: bool) -> list[dict[str, Any]]:
    """The terms the row decides (matrix.py ``decides``): each zeroadvisor term against what measures it."""
    live_dev = "cpu" if dry else "cuda"
    grads = r.get("gradient_side") or {}
    no_grads = "not stage 3: the probe records the gradient side at stage 3 only"
    out: list[dict[str, Any]] = []
    for name in r["case"].get("decides", []):
        kind = matrix.DECIDABLE[name]
        if kind == "key":  # allowances included: fragmentation is one
            estimate = _sum(terms, "train", None if dry else "gpu", key=name, allowances=True)
        else:
            estimate = _sum(terms, "train", None if dry else "gpu", row=name)
        label = f"decides: {name}"
        if name == "gathered_grad":
            out.append(entry("train", label, "gpu", estimate, grads.get("largest_full_grad_bytes"), no_grads,
                             "the largest full gradient a stage-3 hook handed to the IPG bucket (one step)"))
        elif name == "reduce_scatter_copy":
            out.append(entry("train", label, "gpu", estimate, grads.get("largest_reduce_bytes"), no_grads,
                             "the largest set of full gradients reduce-scattered together (the flat copy's size)"))
        elif name == "ipg_bucket":
            out.append(entry("train", label, "gpu", estimate, grads.get("ipg_bucket_bytes"), no_grads,
                             "the IPG buckets' flat buffers after the step"))
        elif name == "fragmentation":
            for phase, key in (("load", "load"), ("train", "step"), ("save", "save")):
                m = r.get(key)
                est = _sum(terms, phase, "gpu", key=name, allowances=True)
                reason = "not measured in this row (matrix.py save=False)" if m is None else m.get("gpu_reason")
                out.append(entry(phase, label, "gpu", est, _fragmentation(m), reason,
                                 "allowance vs max_memory_reserved - max_memory_allocated in the phase"))
        elif name == "activations":
            out.append(entry("train", label, "gpu", estimate, (r.get("saved_for_backward") or {}).get(live_dev, 0),
                             what="bytes autograd saves for backward (one step)"))
        else:  # a row of live tensors (rows.py)
            out.append(entry("train", label, "gpu", estimate, (r.get("rows") or {}).get(live_dev, {}).get(name, 0),
                             what=f"live {name} tensors, largest over the probe's moments"))
    return out


def compare_row(r: dict[str, Any], dry: bool, gpu: str) -> dict[str, Any]:
    case = r["case"]
    from zeroadvisor.memory.states import STEP1_FREED_KEY
    from zeroadvisor.memory.step_temporaries import GRAD_KEY as STEP_FP32_GRAD

    stage, step_time, step_gradient = estimate_row(case, gpu)
    terms = stage.terms
    out: list[dict[str, Any]] = []
    gpu_info = r.get("gpu") or {}
    context = gpu_info.get("context_bytes")
    for phase_name, key in (("load", "load"), ("train", "step"), ("save", "save")):
        m = r.get(key)
        reason = "not measured in this row (matrix.py save=False)" if m is None else m.get("gpu_reason")
        allocated = None if m is None else m.get("max_memory_allocated")
        reserved = None if m is None else m.get("max_memory_reserved")
        out.append(entry(phase_name, "allocated peak", "gpu", _sum(terms, phase_name, "gpu"), allocated, reason,
                         "the phase's tensors (no allowances) vs torch.cuda.max_memory_allocated"))
        peak = stage.phases[phase_name].gpu if phase_name in stage.phases else None
        out.append(entry(phase_name, "GPU peak", "gpu", peak,
                         reserved + context if reserved is not None and context is not None else None, reason,
                         "the estimate's phase peak vs max_memory_reserved + the CUDA context"))
        host = stage.phases[phase_name].host_per_node if phase_name in stage.phases else None
        host_reason = "not measured in this row (matrix.py save=False)" if m is None else m.get("host_reason")
        out.append(entry(phase_name, "host peak", "cpu", host, None if m is None else m.get("host_peak_rss"),
                         host_reason, "the estimate's host peak vs the process's peak RSS (VmHWM) in the phase"))
    live = r.get("rows") or {}
    for row in ROWS:
        est_gpu, est_cpu = _sum(terms, "train", "gpu", row), _sum(terms, "train", "cpu", row)
        if row == "gradients":  # the live reading's moment: the step's gradient whole, not net of activations
            est_gpu += step_gradient - _sum(terms, "train", "gpu", row, key=STEP_FP32_GRAD)
            # stage 1: the full-size gradients outside the partition are freed before the step (states.py
            # STEP1_FREED_KEY), so the reading's largest moment is after backward or at the step, not both
            freed = _sum(terms, "train", "gpu", row, key=STEP1_FREED_KEY)
            if freed:
                est_gpu = max(est_gpu - step_gradient, est_gpu - freed)
        if dry:  # one RAM: the estimate's GPU and host bytes against the CPU tensors
            out.append(entry("train", row, "gpu+cpu", est_gpu + est_cpu, live.get("cpu", {}).get(row, 0)))
            continue
        out.append(entry("train", row, "gpu", est_gpu, live.get("cuda", {}).get(row, 0)))
        if est_cpu or live.get("cpu", {}).get(row):
            out.append(entry("train", row, "cpu", est_cpu, live.get("cpu", {}).get(row, 0)))
    saved = r.get("saved_for_backward") or {}
    out.append(entry("train", "activations", "gpu", _sum(terms, "train", "gpu", "activations"),
                     saved.get("cpu" if dry else "cuda", 0), what="bytes autograd saves for backward (one step)"))
    m = r["step"]
    frag = (m["max_memory_reserved"] - m["max_memory_allocated"]) if m.get("max_memory_reserved") is not None else None
    out.append(entry("train", "fragmentation", "gpu", _sum(terms, "train", "gpu", key="fragmentation", allowances=True),
                     frag, m.get("gpu_reason"), "allowance vs max_memory_reserved - max_memory_allocated"))
    out.append(entry("train", "cuda_context", "gpu", _sum(terms, "train", "gpu", key="cuda_context", allowances=True),
                     context, m.get("gpu_reason"), "allowance vs mem_get_info's used - reserved before the model"))
    from zeroadvisor.throughput import Throughput

    est_time = step_time.step_time_s if isinstance(step_time, Throughput) else None
    out.append(entry("train", "step time (s)", "gpu", est_time, m["step_time_s"],
                     what="the step-time model vs the median timed step (after a warm-up, synchronized)"))
    out += decided(r, terms, dry)
    notes = [FROZEN_NOTE] if case.get("freeze_embeddings") else []
    return {"name": case["name"], "option": stage.option.label, "optimizer": r.get("optimizer"),
            "decides": case.get("decides", []), "notes": notes, "allocator": r.get("allocator"),
            "model": r.get("model"), "step_time_bound": getattr(step_time, "bound", None),
            "no_step_time": None if est_time is not None else str(getattr(step_time, "reason", step_time)),
            "terms": out}


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (phase, term, device): how many rows measured it and the geometric mean, min and max of the ratio."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    for row in rows:
        for t in row["terms"]:
            group = groups.setdefault((t["phase"], t["term"], t["device"]), [])
            if t["ratio"] is not None and t["ratio"] > 0:
                group.append(t["ratio"])
    return [{"phase": p, "term": term, "device": d, "rows": len(v),
             "geomean_ratio": math.exp(sum(map(math.log, v)) / len(v)) if v else None,
             "min_ratio": min(v, default=None), "max_ratio": max(v, default=None)}
            for (p, term, d), v in groups.items()]


def fmt(value: float | None, term: str) -> str:
    if value is None:
        return "null"
    return f"{value:.4f}" if term.startswith("step time") else f"{value / 2**20:,.1f}"


def ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def markdown(doc: dict[str, Any]) -> str:
    lines = ["# GPU calibration: measured vs estimated", "",
             (f"Input: `{doc['input']}`; estimate for `{doc['gpu']}`. Bytes in MiB (2^20), step times in seconds; "
              "ratio = estimate / measured (above 1: the estimate is higher); null: not measured (reason in the "
              "JSON)."), ""]
    if doc["dry_run"]:
        lines += [f"**{DRY_NOTE}.**", ""]
    if doc.get("example"):
        lines += [f"**{doc['example']}**", ""]
    header = ("| row | option | optimizer run | train GPU peak | allocated (train) | load GPU peak | save GPU peak | "
              "activations | step time |")
    lines += ["## Overall", "", header, "|" + "---|" * 9]
    for row in doc["rows"]:
        by = {(t["phase"], t["term"]): t for t in row["terms"]}
        cells = [by[("train", "GPU peak")], by[("train", "allocated peak")], by[("load", "GPU peak")],
                 by[("save", "GPU peak")], by[("train", "activations")], by[("train", "step time (s)")]]
        opt = row["optimizer"] or {}
        lines.append(f"| {row['name']} | {row['option']} | {opt.get('engine')} / {opt.get('base')} | "
                     + " | ".join(f"{fmt(c['estimate'], c['term'])} / {fmt(c['measured'], c['term'])} "
                                  f"({ratio(c['ratio'])})" for c in cells) + " |")
    lines += ["", "Each cell: estimate / measured (ratio).", "", "## Ratio by term over the rows", "",
              "| phase | term | device | rows measured | geometric mean | min | max |", "|---|---|---|---|---|---|---|"]
    for s in doc["summary"]:
        lines.append(f"| {s['phase']} | {s['term']} | {s['device']} | {s['rows']} | {ratio(s['geomean_ratio'])} | "
                     f"{ratio(s['min_ratio'])} | {ratio(s['max_ratio'])} |")
    deciding = [row for row in doc["rows"] if row.get("decides")]
    if deciding:
        lines += ["", "## Decided terms (issue 34)", "",
                  "Each row below settles the zeroadvisor terms it names (matrix.py `decides`).", "",
                  "| row | phase | term | estimate | measured | ratio | measured as |", "|---|---|---|---|---|---|---|"]
        for row in deciding:
            for t in row["terms"]:
                if t["term"].startswith("decides: "):
                    lines.append(f"| {row['name']} | {t['phase']} | {t['term'][9:]} | "
                                 f"{fmt(t['estimate'], t['term'])} | {fmt(t['measured'], t['term'])} | "
                                 f"{ratio(t['ratio'])} | {t['what']} |")
        for row in deciding:
            lines += [f"* {row['name']}: {note}" for note in row.get("notes", [])]
    if doc["not_compared"]:
        lines += ["", "## Rows not compared", ""]
        lines += [f"* {n['name']}: {n['why']}" for n in doc["not_compared"]]
    lines += ["", "## Term by term", ""]
    for row in doc["rows"]:
        lines += [f"### {row['name']} ({row['option']})", "", "| phase | term | device | estimate | measured | ratio |",
                  "|---|---|---|---|---|---|"]
        for t in row["terms"]:
            lines.append(f"| {t['phase']} | {t['term']} | {t['device']} | {fmt(t['estimate'], t['term'])} | "
                         f"{fmt(t['measured'], t['term'])} | {ratio(t['ratio'])} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input", help="the JSON run.py wrote")
    parser.add_argument("--out", default=None, help="output prefix (.json and .md); default: beside the input")
    parser.add_argument("--gpu", default=GPU, help=f"the card to estimate for (default {GPU})")
    args = parser.parse_args(argv)
    source = Path(args.input)
    try:
        data = json.loads(source.read_text())
    except (OSError, ValueError) as err:
        print(f"compare.py: cannot read {source}: {err}", file=sys.stderr)
        return 2
    if not isinstance(data, dict) or data.get("format") != "zeroadvisor-gpu-calibration/1":
        print(f"compare.py: {source} is not a calibration JSON of run.py", file=sys.stderr)
        return 2
    dry = bool(data["dry_run"])
    rows, not_compared = [], []
    for r in data["rows"]:
        if "error" in r or r.get("skipped"):
            not_compared.append({"name": r["case"]["name"], "why": r.get("skipped") or f"failed: {r['error']}"})
            continue
        rows.append(compare_row(r, dry, args.gpu))
    # a format example (example_calibration.json) says so in every output: its numbers are invented
    doc = {"input": str(source), "gpu": args.gpu, "dry_run": dry, "note": DRY_NOTE if dry else None,
           "example": data.get("example"),
           "machine": data.get("machine"), "rows": rows, "summary": summary(rows), "not_compared": not_compared}
    prefix = Path(args.out) if args.out else source.with_name(source.stem + "_compare")
    prefix.with_suffix(".json").write_text(json.dumps(doc, indent=1))
    prefix.with_suffix(".md").write_text(markdown(doc))
    print(f"{len(rows)} rows compared, {len(not_compared)} not -> {prefix}.md, {prefix}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
