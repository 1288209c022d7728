"""Calibrate the load-phase memory model against real DeepSpeed 0.19.8 ``deepspeed.initialize`` on CPU.

Like benchmarks/calibrate.py (the train step): DeepSpeed's CPU accelerator (DS_ACCELERATOR=cpu, gloo),
1, 2 or 4 ranks as separate processes. Each rank builds a small model as a training script does
(fp32 tensors on the host, or under ``deepspeed.zero.Init`` at stage 3) and hands it to
``deepspeed.initialize``. At these moments it sums every live CPU tensor storage (deduplicated by
storage) and reads its RSS:

  built        the model as loaded, before ``deepspeed.initialize``
  moved        right after ``DeepSpeedEngine._configure_distributed_model`` (cast to 16 bits, move)
  flatten      stage 1/2: the flat bit16 copy returned by ``flatten_dense_tensors_aligned`` next to
               the parameters it copies (the 2x moment of DeepSpeedZeroOptimizer.__init__)
  initialized  after ``deepspeed.initialize`` returns

and compares each with ``zeroadvisor.memory.phases.load_moments`` for the same model. On CPU the
"GPU" and the host are the same RAM, so a moment's prediction is its GPU + host bytes for one rank.
RSS is compared with the runtime baseline measured in the same process (RSS after ``import torch,
deepspeed`` and before the model exists) plus the predicted tensor bytes.

    python benchmarks/calibrate_load.py            # full matrix (a few minutes on 2 cores)
    python benchmarks/calibrate_load.py --quick    # 2 cases for tests/oracle (no runtime case)

Writes benchmarks/load_calibration.json and benchmarks/load_calibration.md (or --out PREFIX).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))  # benchmarks/: the shared launcher (cpu_ranks.py)
from cpu_ranks import run_ranks  # noqa: E402

BOUND = 0.10  # the load-phase model must agree within 10 % per rank
REDUCE_BUCKET = 1_000_000  # stage 3 allocates this many elements at init (IPG buffer); keep it small
MOMENTS = ("built", "moved", "flatten", "initialized")
D, F = 1024, 4096  # MLP: 2 blocks of Linear(d, f) + Linear(f, d) = 16,787,456 params


def case(name, stage, ranks, precision="bf16", zero_init=False, model="mlp"):
    return {"name": name, "stage": stage, "ranks": ranks, "precision": precision, "zero_init": zero_init,
            "model": model}


RUNTIME_CASE = case("runtime (Linear(8, 8))", 2, 1, precision="fp32", model="tiny")


def full_cases() -> list[dict]:
    return [
        case("z2 bf16", 2, 1),
        case("z2 bf16", 2, 2),
        case("z2 fp32", 2, 2, precision="fp32"),
        case("z3 bf16", 3, 2),
        case("z3 bf16 zero.Init", 3, 2, zero_init=True),
        case("z3 fp32 zero.Init", 3, 2, precision="fp32", zero_init=True),
        case("z3 bf16", 3, 4),
        case("z3 bf16 zero.Init", 3, 4, zero_init=True),
    ]


def quick_cases() -> list[dict]:
    return [case("z2 bf16", 2, 1), case("z3 bf16 zero.Init", 3, 2, zero_init=True)]


def ds_config(c: dict) -> dict:
    config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "steps_per_print": 10**9,
              "zero_optimization": {"stage": c["stage"], "reduce_bucket_size": REDUCE_BUCKET}}
    if c["precision"] == "bf16":
        config["bf16"] = {"enabled": True}
    return config


# ----------------------------------------------------------------------------- worker (one rank)


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def live_tensor_bytes(extra=()) -> int:
    """Settled bytes of every live CPU tensor storage (``extra``: tensors held in locals).

    A gloo collective's worker thread keeps its Work, and so the tensors it sent or received, for a moment
    after ``wait()`` returns; torch keeps such a tensor's Python object alive while C++ holds it. Under
    load that left one gathered 8 MiB weight visible after ``deepspeed.initialize`` on one rank of a CI
    run. The moment's value is therefore read until two reads 50 ms apart agree (at most 6 reads).
    """
    previous = _tensor_bytes_once(extra)
    for _ in range(5):
        time.sleep(0.05)
        current = _tensor_bytes_once(extra)
        if current == previous:
            break
        previous = current
    return previous


def _tensor_bytes_once(extra=()) -> int:
    """Bytes of every live CPU tensor storage, each storage once."""
    import torch

    gc.collect()
    sizes: dict[int, int] = {}
    for obj in list(gc.get_objects()) + list(extra):
        if isinstance(obj, torch.Tensor) and obj.device.type == "cpu":
            try:
                st = obj.untyped_storage()
            except Exception:  # noqa: BLE001 - meta/sparse tensors have no plain storage
                continue
            if st.data_ptr() and st.nbytes():
                sizes[st.data_ptr()] = max(sizes.get(st.data_ptr(), 0), st.nbytes())
    return sum(sizes.values())


def build_model(kind: str):
    import torch

    torch.manual_seed(0)
    if kind == "tiny":  # the runtime case: what deepspeed.initialize costs without a model to speak of
        return torch.nn.Linear(8, 8)
    layers = []
    for _ in range(2):
        layers += [torch.nn.Linear(D, F), torch.nn.ReLU(), torch.nn.Linear(F, D)]
    return torch.nn.Sequential(*layers)


def worker(spec: dict, out_path: str) -> None:
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import logging

    import deepspeed
    import torch
    from deepspeed.runtime.engine import DeepSpeedEngine
    from deepspeed.runtime.zero.stage_1_and_2 import DeepSpeedZeroOptimizer

    logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
    deepspeed.utils.logger.setLevel(logging.ERROR)
    c = spec
    config = ds_config(c)
    gc.collect()
    baseline = {"rss": rss(), "tensors": live_tensor_bytes()}
    points: dict[str, dict] = {}

    if c["zero_init"]:
        deepspeed.init_distributed(dist_backend="gloo")
        with deepspeed.zero.Init(config_dict_or_path=config):
            model = build_model(c["model"])
    else:
        model = build_model(c["model"])
    points["built"] = {"tensors": live_tensor_bytes(), "rss": rss()}
    numels = [p.ds_numel if hasattr(p, "ds_numel") else p.numel() for p in model.parameters()]
    largest_layer = max(sum(p.ds_numel if hasattr(p, "ds_numel") else p.numel() for p in m.parameters(recurse=False))
                        for m in model.modules())

    original_configure = DeepSpeedEngine._configure_distributed_model

    def configure_and_measure(self, module):
        original_configure(self, module)
        points["moved"] = {"tensors": live_tensor_bytes(), "rss": rss()}

    DeepSpeedEngine._configure_distributed_model = configure_and_measure
    original_flatten = DeepSpeedZeroOptimizer.flatten_dense_tensors_aligned

    def flatten_and_measure(self, *args, **kwargs):
        out = original_flatten(self, *args, **kwargs)
        if "flatten" not in points:  # the first call is __init__'s flat bit16 group
            points["flatten"] = {"tensors": live_tensor_bytes(extra=[out]), "rss": rss()}
        return out

    DeepSpeedZeroOptimizer.flatten_dense_tensors_aligned = flatten_and_measure
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    t0 = time.time()
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    init_s = time.time() - t0
    points["initialized"] = {"tensors": live_tensor_bytes(), "rss": rss()}
    result = {"rank": int(os.environ["RANK"]), "parameter_numels": numels, "largest_layer": largest_layer,
              "baseline": baseline, "points": points, "init_s": init_s,
              "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
              "optimizer": type(engine.optimizer).__name__}
    Path(out_path).write_text(json.dumps(result))


# ----------------------------------------------------------------------------- orchestration


def run_case(c: dict, timeout: int) -> dict:
    return run_ranks(__file__, c, timeout)


def predict(c: dict, numels: list[int], largest_layer: int) -> dict[str, int]:
    """Per-rank bytes (GPU + host of one process) the load-phase model predicts at each moment."""
    from zeroadvisor.memory.estimate import Cluster
    from zeroadvisor.memory.options import configured_option
    from zeroadvisor.memory.phases import LoadInputs, load_moments
    from zeroadvisor.memory.settings import read_settings
    from zeroadvisor.model.spec import ModelSpec

    spec = ModelSpec(parameters=sum(numels), largest_layer_parameters=largest_layer, source="calibration",
                     parameter_numels=tuple(numels))
    config = ds_config(c)
    settings = read_settings(config, spec, c["ranks"])
    option, _ = configured_option(settings)
    cluster = Cluster(gpus=c["ranks"], gpus_per_node=c["ranks"])  # gpu_memory unknown: flatten on the device
    load = LoadInputs(load_dtype="fp32", zero_init=c["zero_init"], meta_device=False)
    moments = load_moments(spec, settings, option, cluster, load)
    return {m.name: m.rank_bytes(rank0=False, devices=("gpu", "cpu")) for m in moments}


def runtime_row(result: dict) -> dict:
    """RSS per process after the imports, and what deepspeed.initialize adds beyond its tensors."""
    r = result["ranks"][0]
    init = r["points"]["initialized"]
    return {"import_rss": r["baseline"]["rss"],
            "initialize_rss": init["rss"] - r["baseline"]["rss"] - (init["tensors"] - r["baseline"]["tensors"]),
            "maxrss": r["maxrss"]}


def compare(result: dict) -> dict:
    c = result["case"]
    r0 = result["ranks"][0]
    predicted = predict(c, r0["parameter_numels"], r0["largest_layer"])
    moments = {}
    for name in MOMENTS:
        measured = [r["points"][name]["tensors"] - r["baseline"]["tensors"] for r in result["ranks"]
                    if name in r["points"]]
        if not measured:
            continue
        est = predicted.get(name)
        worst = max(measured)
        moments[name] = {"predicted": est, "measured": worst, "measured_per_rank": measured,
                         "gap": None if est is None or not worst else (est - worst) / worst}
    peak_pred = max(v["predicted"] for v in moments.values() if v["predicted"] is not None)
    peak_meas = max(v["measured"] for v in moments.values())
    # RSS: the host.py runtime allowances for a CPU process (import + deepspeed.initialize) + predicted tensors
    from zeroadvisor.memory.host import RUNTIME_IMPORT_BYTES, RUNTIME_INIT_BYTES

    runtime = RUNTIME_IMPORT_BYTES + RUNTIME_INIT_BYTES
    rss_rows = []
    for r in result["ranks"]:
        after = r["points"]["initialized"]["rss"]
        rss_rows.append({"rank": r["rank"], "baseline": r["baseline"]["rss"], "after_init": after,
                         "maxrss": r["maxrss"], "predicted_after_init": runtime + moments["initialized"]["predicted"],
                         "predicted_peak": runtime + peak_pred})
    return {"name": c["name"], "ranks": c["ranks"], "case": c, "parameters": sum(r0["parameter_numels"]),
            "optimizer": r0["optimizer"], "moments": moments,
            "peak": {"predicted": peak_pred, "measured": peak_meas, "gap": (peak_pred - peak_meas) / peak_meas},
            "rss": rss_rows, "init_s": max(r["init_s"] for r in result["ranks"])}


def fmt_mb(n) -> str:
    return "n/a" if n is None else f"{n / 2**20:.2f}"


def fmt_gap(g) -> str:
    return "n/a" if g is None else f"{100 * g:+.1f}%"


def cell(entry: dict) -> str:
    return f"{fmt_mb(entry['predicted'])} / {fmt_mb(entry['measured'])} ({fmt_gap(entry['gap'])})"


def markdown(report: dict) -> str:
    lines = ["# Load-phase calibration (DeepSpeed 0.19.8 `deepspeed.initialize`, CPU, gloo)", "",
             (f"Model: MLP 2 x (Linear({D},{F}) + Linear({F},{D})) = {report['cases'][0]['parameters']:,} parameters "
              "built in fp32 (as `from_pretrained` without `dtype`, or a script building the model), client torch "
              f"AdamW, `reduce_bucket_size` {REDUCE_BUCKET:,}. `zero.Init`: the model is built inside "
              "`deepspeed.zero.Init(config_dict_or_path=ds_config)`, as the Hugging Face integration does at stage 3."),
             "",
             ("Live tensor bytes per rank above the process's own baseline (MiB), predicted by "
              "`zeroadvisor.memory.phases.load_moments` (GPU + host terms of one rank) / measured (largest rank). "
              f"Target: within {int(BOUND * 100)} %."), "",
             "| case | ranks | built | moved (cast + to(device)) | flatten (stage 1/2) | initialized | peak of these |",
             "|---|---|---|---|---|---|---|"]
    for c in report["cases"]:
        cells = []
        for name in MOMENTS:
            m = c["moments"].get(name)
            cells.append("-" if m is None else cell(m))
        cells.append(cell(c["peak"]))
        lines.append(f"| {c['name']} | {c['ranks']} | " + " | ".join(cells) + " |")
    rt = report.get("runtime")
    if rt:
        lines += ["", (f"Runtime allowance (`zeroadvisor/memory/host.py`), measured on a `Linear(8, 8)` at stage 2: "
                       f"RSS after `import torch, deepspeed` {fmt_mb(rt['import_rss'])} MiB; `deepspeed.initialize` "
                       f"adds {fmt_mb(rt['initialize_rss'])} MiB beyond its tensors (process group, comm op, engine).")]
    lines += ["", ("RSS per rank (MiB), reported, not bounded: host.py's runtime allowances for a CPU process "
              "(RUNTIME_IMPORT_BYTES + RUNTIME_INIT_BYTES) + the predicted tensor bytes, against the RSS measured "
              "after `deepspeed.initialize` and the process's peak RSS (`ru_maxrss`). The baseline column is the RSS "
              "measured before the model was built. The rest is memory the C allocator keeps after DeepSpeed frees "
              "it (the fp32 model after the cast, the stage-3 fp32 conversion and defragment copies; see below)."),
              "",
              "| case | ranks | baseline RSS | after init: predicted / measured | peak: predicted / maxrss |",
              "|---|---|---|---|---|"]
    for c in report["cases"]:
        r = max(c["rss"], key=lambda x: x["after_init"])
        lines.append(f"| {c['name']} | {c['ranks']} | {fmt_mb(r['baseline'])} | "
                     f"{fmt_mb(r['predicted_after_init'])} / {fmt_mb(r['after_init'])} "
                     f"({fmt_gap((r['predicted_after_init'] - r['after_init']) / r['after_init'])}) | "
                     f"{fmt_mb(r['predicted_peak'])} / {fmt_mb(r['maxrss'])} "
                     f"({fmt_gap((r['predicted_peak'] - r['maxrss']) / r['maxrss'])}) |")
    if report["failures"]:
        lines += ["", "Failures:", ""] + [f"* {f['case']['name']} x{f['case']['ranks']}: {f['error']}"
                                          for f in report["failures"]]
    lines += ["", EXPLANATIONS]
    return "\n".join(lines) + "\n"


EXPLANATIONS = """\
## How it is measured

Each rank runs `--worker` in its own process (DS_ACCELERATOR=cpu, gloo, OMP_NUM_THREADS=1). A moment's
measured value is the sum of every live CPU tensor storage (found with `gc.get_objects()`,
deduplicated by storage pointer, plus the flat copy held in a local at the `flatten` moment) minus
the same sum before the model existed, read until two reads 50 ms apart agree (a gloo worker thread
holds a finished collective's tensors for a moment after `wait()`); the table shows the largest rank. The prediction is
`load_moments(...)[moment].rank_bytes(rank0=False, devices=("gpu", "cpu"))`: on CPU the "GPU" and
the host are one RAM, so a moment's GPU and host terms add up. The model is built in fp32 (load dtype
fp32); `deepspeed.zero.Init` builds it in the config's dtype, partitioned.

## What the agreement confirms about DeepSpeed 0.19.8

* `_configure_distributed_model` casts the parameters to 16 bits before `module.to(device)`
  (per parameter, `p.data = p.data.to(param_dtype)`; `module.half()` is gone): `moved` is the
  bf16 model (2 B/param), and the fp32 copy is freed (`built` 4 B/param -> `moved` 2 B/param).
* Stage 1/2 flatten the bit16 parameters on the accelerator when it has room for a second copy:
  `flatten` holds 2 x the bf16 model; afterwards the parameters are views of the flat buffer.
* `deepspeed.initialize` creates the fp32 master partition (stage 1/2/3), the stage-3 gradient
  partition buffer and reduce bucket, but not Adam's moments (created at the first step).
* Under `zero.Init` no rank ever holds the whole model: `built` is the rank's partition.

## What the CPU run cannot show

* The host/GPU split: on a GPU, `built` (without zero.Init) is host RAM on every local rank and
  `moved` is GPU memory; here both are the same RAM. The per-node host total (GPUs per node x the
  model in the load dtype) follows from every rank running the same code.
* Checkpoint reading: the model is built, not read from disk, so transformers' loading path
  (rank 0's state dict under zero.Init, the memory-mapped safetensors pages) is cited, not measured.
* Pinned memory: the CPU accelerator's `pin_memory` does not page-lock, so the CachingHostAllocator's
  power-of-two rounding (zeroadvisor/memory/host.py) is cited from torch's source, not measured.
* The CUDA runtime's host memory: an allowance from public measurements (host.py CUDA_HOST_BYTES).
* RSS after init is above the tensors by the runtime (import + initialize, measured on the
  Linear(8, 8) case) and by freed memory glibc keeps (the fp32 copy freed by the cast); `ru_maxrss`
  includes the flatten transient.
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=str(HERE / "load_calibration"))
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--worker", nargs=2, metavar=("SPEC", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(json.loads(args.worker[0]), args.worker[1])
        return 0
    cases = quick_cases() if args.quick else full_cases()
    report = {"deepspeed": None, "torch": None, "cases": [], "failures": []}
    try:
        import deepspeed
        import torch

        report["deepspeed"], report["torch"] = deepspeed.__version__, torch.__version__
    except ImportError:
        pass
    # the runtime case measures host.py's allowances; --quick (the oracle test) checks tensors only
    runtime = None if args.quick else run_case(RUNTIME_CASE, args.timeout)
    if runtime is not None and "error" in runtime:
        report["failures"].append(runtime)
    elif runtime is not None:
        report["runtime"] = runtime_row(runtime)
        print("runtime:", {k: fmt_mb(v) for k, v in report["runtime"].items()}, flush=True)
    for c in cases:
        t0 = time.time()
        result = run_case(c, args.timeout)
        if "error" in result:
            report["failures"].append(result)
            print(f"{c['name']} x{c['ranks']}: FAILED {result['error']}", flush=True)
            continue
        row = compare(result)
        report["cases"].append(row)
        moments = ", ".join(f"{k} {cell(v)}" for k, v in row["moments"].items())
        print(f"{c['name']} x{c['ranks']}: {moments} [{time.time() - t0:.0f}s]", flush=True)
    prefix = Path(args.out)
    prefix.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    prefix.with_suffix(".md").write_text(markdown(report))
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
