"""Measure ZeRO-3's gathered-parameter working set with real DeepSpeed 0.19.8 on CPU.

The estimate (zeroadvisor/memory/buffers.py gathered_terms) bounds the parameters ZeRO-3 keeps gathered
at once by ``min(P, stage3_max_live_parameters + L_p)`` when ``stage3_prefetch_bucket_size > 0`` and by
``L_p`` (the largest module's own parameters) without prefetch; zeroadvisor/memory/working_set.py
replays the coordinator on a trace. Both come from reading
``deepspeed/runtime/zero/partitioned_param_coordinator.py``; this script measures them.

Method. DeepSpeed runs with its CPU accelerator (DS_ACCELERATOR=cpu, gloo), 2 ranks as processes
(benchmarks/cpu_ranks.py). Each rank trains a randomly initialised transformers Llama (LlamaConfig:
8 layers, hidden 256, ffn 688, 8 heads, 4 KV heads, vocab 4096, untied head; fp32; batch 2 × 64
tokens) at ZeRO-3 with a client torch AdamW for 3 steps. Step 0 records the coordinator's trace (no
prefetch: ``is_complete_trace`` is false), steps 1 and 2 run with the complete trace. On rank 0 the
coordinator's ``fetch_sub_module`` and ``release_sub_module`` are wrapped (instance attributes shadow
the methods ``parameter_offload.py`` calls through ``get_param_coordinator()``); after every fetch
(the moment the current module and the prefetch are both gathered) and before every release it records

* ``counter``: ``PartitionedParameterCoordinator.__n_available_params`` (name-mangled
  ``_PartitionedParameterCoordinator__n_available_params``), the coordinator's own bookkeeping;
* ``gathered``: the elements of the non-persistent parameters (``ds_persist`` false) whose
  ``ds_status`` is not NOT_AVAILABLE (AVAILABLE or INFLIGHT: the full ``param.data`` is allocated
  from the all-gather on), the quantity the estimate's term counts;
* ``gathered_bytes``: the sum of ``p.data.numel() * p.data.element_size()`` over the same parameters;
* ``persistent``: the elements of the persistent parameters held whole (reported, not compared: the
  estimate counts them in the parameters row, memory/persistence.py).

The measured value is the maximum over all moments of steps 1 and 2 (the peak is the same in both
when the trace stays valid, which is checked). It is compared with

* ``bound``: the estimate's ``gathered`` term (zeroadvisor.memory.estimate.estimate on the same
  config and a ModelSpec of the live model: P, largest module, layers, hidden, ffn, vocab), in elements;
* ``replay_layered``: working_set.stage3_peak on the parameter sizes in ``model.parameters()`` order
  (each parameter its own module; what the estimate could call with a ModelSpec's parameter_numels);
* ``replay_trace``: working_set.peak on the coordinator's own recorded module trace
  (``__submodule_order``: every module entered, with or without parameters, forward, recompute and
  backward), with the live persistent set: the replay's rules on the exact module sequence.

    python benchmarks/calibrate_working_set.py            # full matrix
    python benchmarks/calibrate_working_set.py --quick    # the 2-config subset of the oracle test

Writes benchmarks/working_set.json and benchmarks/working_set.md (or --out PREFIX).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))  # benchmarks/: the shared launcher (cpu_ranks.py)
from cpu_ranks import machine, run_ranks  # noqa: E402

STEPS = 3  # step 0 records the trace; 1 and 2 prefetch
RANKS = 2
REDUCE_BUCKET = 5_000_000
LLAMA = dict(hidden_size=256, intermediate_size=688, num_hidden_layers=8, num_attention_heads=8,
             num_key_value_heads=4, vocab_size=4096)
SEQ = 64
DEFAULT_PERSISTENCE = 100_000  # DeepSpeedZeroConfig.param_persistence_threshold default (1e5)
DEFAULT_REUSE = 1_000_000_000  # DeepSpeedZeroConfig.max_reuse_distance default (1e9)
SMALL_BUCKET = 100_000  # below one MLP projection (176,128): one parameter per prefetch call
MAX_LIVES = (100_000, 300_000, 1_000_000, 1_000_000_000)
BUCKETS = (0, SMALL_BUCKET, 50_000_000)


# ----------------------------------------------------------------------------- cases


def case(max_live: int, bucket: int, persistence: int, checkpointing: bool, reuse: int) -> dict:
    name = (f"live {max_live:.0e} bucket {bucket:.0e} persist {persistence:.0e} reuse {reuse:.0e}"
            f"{' ckpt' if checkpointing else ''}")
    return {"name": name, "max_live": max_live, "bucket": bucket, "persistence": persistence,
            "checkpointing": checkpointing, "reuse": reuse, "ranks": RANKS}


def full_cases() -> list[dict]:
    """Every max_live × bucket × persistence × checkpointing with no reuse window (stage3_max_reuse_distance
    0: the coordinator's release decides alone); a few with the default window (1e9, larger than this
    model's whole trace: nothing it uses again is released). Without prefetch max_live decides nothing
    (fetch_sub_module reads it only in the prefetch), so bucket 0 runs once per combination."""
    cases = []
    for checkpointing in (False, True):
        for persistence in (0, DEFAULT_PERSISTENCE):
            cases.append(case(MAX_LIVES[-1], 0, persistence, checkpointing, 0))
            cases += [case(live, SMALL_BUCKET, persistence, checkpointing, 0) for live in MAX_LIVES]
            cases += [case(live, BUCKETS[-1], persistence, checkpointing, 0) for live in (100_000, 1_000_000,
                                                                                           MAX_LIVES[-1])]
        cases += [case(MAX_LIVES[-1], 0, DEFAULT_PERSISTENCE, checkpointing, DEFAULT_REUSE),
                  case(300_000, SMALL_BUCKET, DEFAULT_PERSISTENCE, checkpointing, DEFAULT_REUSE),
                  case(1_000_000, BUCKETS[-1], DEFAULT_PERSISTENCE, checkpointing, DEFAULT_REUSE)]
    return cases


def quick_cases() -> list[dict]:
    # the lead-growth mechanism (a bucket below one projection, max_live between one layer and the model)
    # and a bucket larger than the model held back by max_live alone
    # and the default reuse window (1e9), which keeps this whole model gathered
    return [case(300_000, SMALL_BUCKET, 0, False, 0), case(1_000_000, 50_000_000, DEFAULT_PERSISTENCE, True, 0),
            case(300_000, SMALL_BUCKET, DEFAULT_PERSISTENCE, False, DEFAULT_REUSE)]


def ds_config(c: dict) -> dict:
    zero = {"stage": 3, "reduce_bucket_size": REDUCE_BUCKET, "stage3_max_live_parameters": c["max_live"],
            "stage3_prefetch_bucket_size": c["bucket"], "stage3_param_persistence_threshold": c["persistence"],
            "stage3_max_reuse_distance": c["reuse"]}
    return {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "zero_optimization": zero,
            "steps_per_print": 10**9}


# ----------------------------------------------------------------------------- worker (one rank)


PEAK_KEYS = ("counter", "gathered", "gathered_bytes", "resident_bytes", "persistent")
COORDINATOR = "_PartitionedParameterCoordinator__"  # the name-mangling prefix of the coordinator's private state


def flat_buffers(registry) -> dict[int, int]:
    """Storages of the flat all-gather buffers the in-flight handles still hold (partition_parameters.py
    _all_gather_dtype: one flat tensor per coalesced call, kept by AllGatherCoalescedHandle.partitions until
    the coordinator drops the handle with its last parameter's wait)."""
    found: dict[int, int] = {}
    todo = list({id(h): h for h in registry.values()}.values())
    while todo:
        h = todo.pop()
        todo += list(getattr(h, "handles", ()) or ())  # MultipleAllGatherHandles
        for t in getattr(h, "partitions", None) or ():
            st = t.untyped_storage()
            found[st.data_ptr()] = st.nbytes()
    return found


class Probe:
    """Wraps the coordinator's fetch_sub_module / release_sub_module and keeps each step's peaks."""

    def __init__(self, coord, params, not_available) -> None:
        self.coord, self.not_available = coord, not_available
        self.persistent = [p for p in params if p.ds_persist]
        self.transient = [p for p in params if not p.ds_persist]
        self.registry = getattr(coord, COORDINATOR + "inflight_param_registry")
        self.step, self.modules, self.phase = 0, 0, "forward"
        self.peaks: list[dict] = []
        self.timeline: list[list] = []
        fetch, release = coord.fetch_sub_module, coord.release_sub_module

        def fetch_and_sample(module, forward):
            fetch(module, forward)
            self.modules += 1
            self.sample("after fetch", module)

        def sample_and_release(module, forward=False):
            self.sample("before release", module)
            release(module, forward)

        coord.fetch_sub_module, coord.release_sub_module = fetch_and_sample, sample_and_release

    def start_step(self, i: int) -> None:
        self.step, self.modules, self.phase = i, 0, "forward"
        self.peaks.append(dict.fromkeys(PEAK_KEYS, 0) | {"at": None})

    def sample(self, where: str, module) -> None:
        gathered = [p for p in self.transient if p.ds_status != self.not_available]
        resident = flat_buffers(self.registry)  # by storage: a single-parameter gather's buffer is its param.data
        for p in gathered:
            st = p.data.untyped_storage()
            if st.nbytes():
                resident[st.data_ptr()] = st.nbytes()
        point = {"counter": int(getattr(self.coord, COORDINATOR + "n_available_params")),
                 "gathered": int(sum(p.ds_numel for p in gathered)),
                 "gathered_bytes": int(sum(p.data.numel() * p.data.element_size() for p in gathered)),
                 "resident_bytes": int(sum(resident.values())),
                 "persistent": int(sum(p.data.numel() for p in self.persistent if p.ds_status != self.not_available)),
                 "where": where, "module": type(module).__name__, "index": self.modules, "phase": self.phase}
        if where == "after fetch" and self.step == STEPS - 1:
            self.timeline.append([type(module).__name__, point["gathered"]])
        peak = self.peaks[self.step]
        for key in PEAK_KEYS:
            if point[key] > peak[key]:
                peak[key] = point[key]
                if key == "gathered":
                    peak["at"] = {k: point[k] for k in ("where", "module", "index", "phase", "counter")}


def worker(c: dict, out_path: str) -> None:
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import logging

    import deepspeed
    import torch
    from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus
    from deepspeed.runtime.zero.partitioned_param_coordinator import iter_params
    from transformers import LlamaConfig, LlamaForCausalLM

    logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
    deepspeed.utils.logger.setLevel(logging.ERROR)
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**LLAMA, max_position_embeddings=256, tie_word_embeddings=False))
    if c["checkpointing"]:
        model.gradient_checkpointing_enable()
    numels = [p.numel() for p in model.parameters()]
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config(c))
    coord = engine.optimizer.parameter_offload.get_param_coordinator()
    params = list(engine.module.parameters())
    probe = Probe(coord, params, ZeroParamStatus.NOT_AVAILABLE)
    rank = int(os.environ["RANK"])
    generator = torch.Generator().manual_seed(1 + rank)
    losses, complete = [], []
    for i in range(STEPS):
        probe.start_step(i)
        ids = torch.randint(0, LLAMA["vocab_size"], (2, SEQ), generator=generator)
        loss = engine(input_ids=ids, labels=ids).loss
        probe.phase = "backward"
        engine.backward(loss)
        engine.step()
        losses.append(float(loss))
        complete.append(bool(coord.is_complete_trace()))
        probe.peaks[i]["modules_entered"] = probe.modules

    # the coordinator's recorded trace: every module entered, each with its own parameters (ds_id order)
    order = getattr(coord, COORDINATOR + "submodule_order")
    by_id = {p.ds_id: p for p in params}
    result = {"rank": rank, "parameters": sum(numels), "largest_layer": largest, "numels": numels,
              "persistent_ds_ids": sorted(p.ds_id for p in probe.persistent),
              "ds_numels": {str(i): int(by_id[i].ds_numel) for i in sorted(by_id)},
              "trace": [sorted(p.ds_id for p in iter_params(m, recurse=False)) for m in order],
              "trace_complete": complete, "peaks": probe.peaks, "losses": losses, "timeline": probe.timeline,
              "checkpointing": bool(getattr(engine.module, "is_gradient_checkpointing", False))}
    Path(out_path).write_text(json.dumps(result))


# ----------------------------------------------------------------------------- comparison


def compare(result: dict) -> dict:
    from zeroadvisor.memory import working_set as ws
    from zeroadvisor.memory.estimate import Cluster, estimate
    from zeroadvisor.model.spec import ModelSpec, TrainingShape

    c = result["case"]
    r0 = next(r for r in result["ranks"] if r["rank"] == 0)
    config = ds_config(c)
    config["optimizer"] = {"type": "AdamW"}
    spec = ModelSpec(parameters=r0["parameters"], model_type="llama", num_layers=LLAMA["num_hidden_layers"],
                     hidden_size=LLAMA["hidden_size"], num_attention_heads=LLAMA["num_attention_heads"],
                     num_key_value_heads=LLAMA["num_key_value_heads"],
                     intermediate_size=LLAMA["intermediate_size"], vocab_size=LLAMA["vocab_size"], gated_mlp=True,
                     largest_layer_parameters=r0["largest_layer"], tied_embeddings=False, source="working-set",
                     parameter_numels=tuple(r0["numels"]))
    est = estimate(config, spec, TrainingShape(), Cluster(gpus=c["ranks"]))
    gathered = [t for t in est.configured.terms if t.key == "gathered"]
    bound = gathered[0].nbytes // 4 if gathered else None  # fp32 here: 4 B per element
    # the copies plus the flat all-gather buffer of one prefetch: what the resident bytes are compared with
    flat = sum(t.nbytes for t in est.configured.terms if t.key == "gathered_flat") // 4
    bound_resident = bound + flat if bound is not None else None
    layered = ws.stage3_peak(r0["numels"], LLAMA["num_hidden_layers"], c["checkpointing"], False,
                             c["persistence"], sys.maxsize, c["bucket"], c["max_live"], c["reuse"])
    ds_numels = [r0["ds_numels"][str(i)] for i in range(len(r0["ds_numels"]))]
    trace = ws.Trace(tuple(ds_numels), tuple(tuple(m) for m in r0["trace"]), frozenset(r0["persistent_ds_ids"]))
    replay = ws.peak(trace, c["bucket"], c["max_live"], c["reuse"])
    steps = r0["peaks"][1:]  # with the complete trace
    measured = max(p["gathered"] for p in steps)
    worst = max(steps, key=lambda p: p["gathered"])
    return {"name": c["name"], "case": c, "measured": measured,
            "measured_bytes": max(p["gathered_bytes"] for p in steps),
            "resident_bytes": max(p["resident_bytes"] for p in steps),
            "counter_peak": max(p["counter"] for p in steps), "persistent": max(p["persistent"] for p in steps),
            "per_step": [p["gathered"] for p in r0["peaks"]], "at": worst["at"],
            "modules_entered": worst.get("modules_entered"), "trace_complete": r0["trace_complete"],
            "bound": bound, "bound_formula": gathered[0].formula if gathered else None,
            "bound_resident": bound_resident,
            "replay_layered": layered.elements if layered else None, "replay_trace": replay.elements,
            "replay_trace_transient": replay.transient,
            "ratio": bound / measured if bound and measured else None,
            "parameters": r0["parameters"], "largest_layer": r0["largest_layer"],
            "non_persistent": r0["parameters"] - sum(r0["ds_numels"][str(i)] for i in r0["persistent_ds_ids"]),
            "losses": r0["losses"], "checkpointing_on": r0["checkpointing"],
            "timeline": r0["timeline"]}  # last step: (module entered, gathered elements after its fetch)


def fmt(n) -> str:
    return "n/a" if n is None else f"{n:,}"


def render_md(report: dict) -> str:
    doc = (__doc__ or "").split("\n\n    python")[0]
    lines = ["# ZeRO-3 gathered working set: measured vs estimate", "", "## Method", "", doc.strip(), "",
             f"Machine: {report['machine']}", ""]
    if report.get("conclusion"):
        lines += ["## Conclusion", "", report["conclusion"], ""]
    legend = ("Elements per rank (fp32: bytes = 4 ×). *measured*: peak non-persistent gathered elements (rank 0, "
              "steps 1-2); *counter*: peak `__n_available_params`; *resident*: peak bytes / 4 of the gathered "
              "copies plus the flat all-gather buffers the in-flight handles hold; *bound*: the estimate's "
              "`gathered` term (copies); *bound + flat*: with its `gathered_flat` term (compare with *resident*); "
              "*replay (params)*: working_set.stage3_peak on model.parameters(); *replay "
              "(trace)*: working_set.peak on the recorded module trace (copies + flat buffers, compare with "
              "*resident*); *ratio*: bound / measured.")
    header = ("| reuse | ckpt | persist | bucket | max_live | measured | counter | resident | bound | bound + flat "
              "| replay (params) | replay (trace) | ratio | peak at |")
    lines += ["## Table", "", legend, "", header, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["cases"]:
        c = r["case"]
        at = r["at"] or {}
        ratio = "n/a" if r["ratio"] is None else f"{r['ratio']:.2f}"
        lines.append(f"| {c['reuse']:.0e} | {'on' if c['checkpointing'] else 'off'} | {c['persistence']:.0e} "
                     f"| {c['bucket']:.0e} | {c['max_live']:.0e} | {fmt(r['measured'])} | {fmt(r['counter_peak'])} "
                     f"| {fmt(r['resident_bytes'] // 4)} "
                     f"| {fmt(r['bound'])} | {fmt(r.get('bound_resident'))} | {fmt(r['replay_layered'])} "
                     f"| {fmt(r['replay_trace'])} | {ratio} "
                     f"| {at.get('phase', '')} {at.get('module', '')} #{at.get('index', '')} |")
    for f in report["failures"]:
        lines.append(f"\nFAILED {f['case']['name']}: {f['error']}")
    if report["cases"]:
        r = report["cases"][0]
        lines += ["", f"Model: P = {r['parameters']:,}, largest module L_p = {r['largest_layer']:,}; non-persistent "
                  "elements per persistence threshold: " + ", ".join(
                      sorted({f"{x['case']['persistence']:.0e}: {x['non_persistent']:,}" for x in report["cases"]}))]
    return "\n".join(lines) + "\n"


def run(cases: list[dict], timeout: int, jobs: int) -> dict:
    done, failures = [], []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for result in pool.map(lambda c: run_ranks(__file__, c, timeout), cases):
            if "error" in result:
                failures.append(result)
                print(f"FAILED {result['case']['name']}: {result['error']}", flush=True)
                continue
            row = compare(result)
            done.append(row)
            print(f"{row['name']}: measured {row['measured']:,} counter {row['counter_peak']:,} bound "
                  f"{fmt(row['bound'])} replay {fmt(row['replay_layered'])} / {row['replay_trace']:,}", flush=True)
    return {"cases": done, "failures": failures}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--worker", nargs=2, metavar=("CASE_JSON", "OUT_JSON"), help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="the 2-config subset the oracle test runs")
    ap.add_argument("--out", default=str(HERE / "working_set"), help="output prefix (.json and .md)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per case")
    ap.add_argument("--jobs", type=int, default=2, help="cases run at once (2 processes each)")
    ap.add_argument("--conclusion", default="", help="a file whose text goes under '## Conclusion' in the .md")
    args = ap.parse_args(argv)
    if args.worker:
        worker(json.loads(args.worker[0]), args.worker[1])
        return 0
    t0 = time.time()
    report = run(quick_cases() if args.quick else full_cases(), args.timeout, args.jobs)
    report["machine"] = machine(seconds=round(time.time() - t0, 1))
    report["conclusion"] = Path(args.conclusion).read_text().strip() if args.conclusion else ""
    prefix = Path(args.out)
    prefix.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    prefix.with_suffix(".md").write_text(render_md(report))
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
