"""Measure the optimizer step's temporaries on CPU: the peak memory one ``optimizer.step()`` allocates beyond the
steady state (parameters + gradients + optimizer states), against zeroadvisor's count (memory/step_temporaries.py).

Method. The states are created by a first step; the second step runs under ``torch.profiler`` with
``profile_memory=True``. Every CPU allocation and free inside it is a ``[memory]`` event of the Kineto results
(``prof.profiler.kineto_results.events()``, as torch/autograd/profiler.py _parse_kineto_results reads them) with
signed ``nbytes()``; in recorded order (stable-sorted by start time) their running sum is the memory the step
holds beyond what existed when it began, and its maximum is the step's peak extra. The profiler sees torch's CPU
allocator itself (c10 reportMemoryUsage), so the number is exact to the byte; a cross-check reads the kernel's
peak resident set (VmHWM, reset by writing 5 to /proc/self/clear_refs) around one step of a 2 GB parameter, whose
temporaries are mmap'd and fully written by the step (glibc serves allocations this large with mmap).

Cases: torch.optim.AdamW with foreach=True (on CUDA the default; on CPU torch/optim/optimizer.py
_default_to_fused_or_foreach picks the single-tensor path, so it is passed explicitly), foreach=False, fused=True
(CPU has a fused kernel in torch 2.13: torch/utils/_foreach_utils.py _get_fused_kernels_supported_devices), and
torch.optim.Adam(weight_decay=0.1) (L2: grads + wd·params) in both paths; each with (a) one flat fp32 parameter of
N elements (what ZeRO hands the optimizer per parameter group) and (b) many equal parameters summing to N.

zeroadvisor's count is the step-temporary term of ``estimate()`` for the same optimizer at stage 0, fp32, one
GPU, no activations (the stepped tensor is then the N-element fp32 group: step_temporaries.py stepped_elements).

A real DeepSpeed 0.19.8 ZeRO-2 run (DS_ACCELERATOR=cpu, gloo; benchmarks/cpu_ranks.py) with a client
torch.optim.AdamW(foreach=True) and two parameter groups records, inside the base optimizer's step, the shapes of
``param_groups[i]['params']`` and the profiled peak extra of each call (stage_1_and_2.py _optimizer_step steps
one group at a time).

    python benchmarks/calibrate_step_temporaries.py            # N = 5e7, VmHWM cross-check, DeepSpeed 1 and 2 ranks
    python benchmarks/calibrate_step_temporaries.py --quick    # flat layout only, N = 1e7, no DeepSpeed

Writes benchmarks/step_temporaries.json and benchmarks/step_temporaries.md (or --out PREFIX).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))  # benchmarks/: the shared launcher (cpu_ranks.py)
from cpu_ranks import machine, run_ranks  # noqa: E402

N_FULL = 50_000_000
N_QUICK = 10_000_000
MANY = 500  # parameters in the "many" layout
HWM_N = 500_000_000  # 2 GB fp32: the VmHWM cross-check
BOUND = 0.01  # measured vs counted, as a fraction of 4 B × N
LR, WD = 1e-3, 0.1

# name -> (constructor keyword arguments, the DeepSpeed config / Trainer optim zeroadvisor is asked about)
IMPLEMENTATIONS: dict[str, dict[str, Any]] = {
    "AdamW foreach": {"cls": "AdamW", "kw": {"foreach": True}, "optim": "adamw_torch"},
    "AdamW single-tensor": {"cls": "AdamW", "kw": {"foreach": False},
                            "optimizer": {"type": "AdamW", "params": {"torch_adam": True, "foreach": False}}},
    "AdamW fused": {"cls": "AdamW", "kw": {"fused": True}, "optim": "adamw_torch_fused"},
    "Adam L2 foreach": {"cls": "Adam", "kw": {"foreach": True, "weight_decay": WD},
                        "optimizer": {"type": "Adam", "params": {"torch_adam": True, "adam_w_mode": False,
                                                                 "weight_decay": WD}}},
    "Adam L2 single-tensor": {"cls": "Adam", "kw": {"foreach": False, "weight_decay": WD},
                              "optimizer": {"type": "Adam", "params": {"torch_adam": True, "adam_w_mode": False,
                                                                       "weight_decay": WD, "foreach": False}}},
}
QUICK_IMPLEMENTATIONS = ("AdamW foreach", "AdamW single-tensor", "AdamW fused")


# ----------------------------------------------------------------------------- measuring


def profiled_peak(fn: Callable[[], object]) -> tuple[int, int]:
    """(peak, net) bytes of CPU memory ``fn`` allocated beyond what was live when it began."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [e for e in prof.profiler.kineto_results.events()
              if e.name() == "[memory]" and e.device_type() == DeviceType.CPU]
    events.sort(key=lambda e: e.start_ns())  # stable: ties keep the recorded order
    running = peak = 0
    for e in events:
        running += e.nbytes()
        peak = max(peak, running)
    return peak, running


def make_params(layout: str, n: int) -> list[Any]:
    """fp32 parameters summing to ``n`` elements, each with a gradient."""
    import torch

    sizes = [n] if layout == "flat" else [n // MANY] * MANY
    generator = torch.Generator().manual_seed(0)
    params = []
    for size in sizes:
        p = torch.nn.Parameter(torch.randn(size, generator=generator))
        p.grad = torch.randn(size, generator=generator)
        params.append(p)
    return params


def build_optimizer(name: str, params: list[Any]) -> Any:
    import torch

    impl = IMPLEMENTATIONS[name]
    return getattr(torch.optim, impl["cls"])(params, lr=LR, **impl["kw"])


def measure(name: str, layout: str, n: int) -> dict[str, Any]:
    params = make_params(layout, n)
    try:
        opt = build_optimizer(name, params)
        opt.step()  # creates exp_avg / exp_avg_sq: the steady state the measured step starts from
    except (RuntimeError, ValueError) as e:  # an implementation this torch build lacks on CPU
        return {"implementation": name, "layout": layout, "N": n, "supported": False, "error": str(e)}
    peak, net = profiled_peak(opt.step)
    largest = max(p.numel() for p in params)
    return {"implementation": name, "layout": layout, "N": n, "parameters": len(params), "largest": largest,
            "supported": True, "peak_extra": peak, "net": net, "in_N_fp32": peak / (4 * n),
            "in_largest_fp32": peak / (4 * largest)}


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def hwm_cross_check(name: str, n: int) -> dict[str, Any]:
    """The same step's peak extra seen by the kernel: VmHWM after the step minus VmRSS before it."""
    params = make_params("flat", n)
    opt = build_optimizer(name, params)
    opt.step()
    peak, _ = profiled_peak(opt.step)  # the profiler's number for the same tensors
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    before = _status_kb("VmRSS")
    opt.step()
    hwm_extra = _status_kb("VmHWM") - before
    del opt, params
    return {"implementation": name, "N": n, "profiler_peak_extra": peak, "vmhwm_extra": hwm_extra,
            "ratio": hwm_extra / peak if peak else None}


# ----------------------------------------------------------------------------- zeroadvisor's count


def zeroadvisor_count(name: str, n: int) -> int:
    """The step-temporary bytes zeroadvisor counts for ``name`` stepping an ``n``-element fp32 group."""
    from zeroadvisor.memory.estimate import Cluster, estimate
    from zeroadvisor.memory.step_temporaries import KEY
    from zeroadvisor.model.spec import ModelSpec, TrainingShape

    impl = IMPLEMENTATIONS[name]
    config: dict[str, Any] = {"zero_optimization": {"stage": 0}}
    if "optimizer" in impl:
        config["optimizer"] = {"type": impl["optimizer"]["type"], "params": {"lr": LR, **impl["optimizer"]["params"]}}
    shape = TrainingShape(optim=impl.get("optim"))
    est = estimate(config, ModelSpec(parameters=n, largest_layer_parameters=n), shape, Cluster(gpus=1))
    stage = next(s for s in est.stages if s.configured)
    return sum(t.nbytes for t in stage.terms if t.key == KEY)


def zero2_count(parameters: int, ranks: int) -> int:
    """zeroadvisor's step-temporary bytes for the client AdamW (adamw_torch) at ZeRO-2 fp32 (a bound: the whole
    partition stands in for the largest parameter group)."""
    from zeroadvisor.memory.estimate import Cluster, estimate
    from zeroadvisor.memory.step_temporaries import KEY
    from zeroadvisor.model.spec import ModelSpec, TrainingShape

    est = estimate({"zero_optimization": {"stage": 2}}, ModelSpec(parameters=parameters,
                   largest_layer_parameters=parameters), TrainingShape(optim="adamw_torch"), Cluster(gpus=ranks))
    stage = next(s for s in est.stages if s.configured)
    return sum(t.nbytes for t in stage.terms if t.key == KEY)


# ----------------------------------------------------------------------------- real DeepSpeed ZeRO-2


def ds_worker(c: dict[str, Any], out_path: str) -> None:
    """One rank: ZeRO-2 fp32 with a client AdamW(foreach=True), weights (wd 0.1) and biases (wd 0) as two groups."""
    import logging

    import deepspeed
    import torch

    deepspeed.utils.logger.setLevel(logging.ERROR)
    torch.manual_seed(0)
    d, f = 1024, 4096
    model = torch.nn.Sequential(torch.nn.Linear(d, f), torch.nn.ReLU(), torch.nn.Linear(f, d))
    weights = [p for p in model.parameters() if p.dim() > 1]
    biases = [p for p in model.parameters() if p.dim() == 1]
    optimizer = torch.optim.AdamW([{"params": weights, "weight_decay": WD}, {"params": biases, "weight_decay": 0.0}],
                                  lr=LR, foreach=True)
    config = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "steps_per_print": 10**9,
              "zero_optimization": {"stage": 2, "reduce_bucket_size": 5_000_000}}
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    base = engine.optimizer.optimizer
    original = base.step
    calls: list[dict[str, Any]] = []
    state = {"measure": False}

    def step(*args: Any, **kwargs: Any) -> Any:
        if not state["measure"]:
            return original(*args, **kwargs)
        shapes = [[list(p.shape) for p in g["params"]] for g in base.param_groups]
        out: list[Any] = []
        peak, net = profiled_peak(lambda: out.append(original(*args, **kwargs)))
        calls.append({"param_group_shapes": shapes, "peak_extra": peak, "net": net})
        return out[0]

    base.step = step
    generator = torch.Generator().manual_seed(1 + int(os.environ["RANK"]))
    for i in range(3):
        state["measure"] = i == 2  # states exist from initialize (initialize_optimizer_states) and two steps
        loss = engine(torch.randn(2, d, generator=generator)).pow(2).mean()
        engine.backward(loss)
        engine.step()
    partitions = [int(t.numel()) for t in engine.optimizer.single_partition_of_fp32_groups]
    group_numels = [sum(p.numel() for p in g) for g in (weights, biases)]
    Path(out_path).write_text(json.dumps({"rank": int(os.environ["RANK"]), "calls": calls, "partitions": partitions,
                                          "group_numels": group_numels,
                                          "parameters": sum(p.numel() for p in model.parameters())}))


def run_deepspeed(ranks: int, timeout: int) -> dict[str, Any]:
    result = run_ranks(__file__, {"ranks": ranks}, timeout)
    if "error" in result:
        return {"ranks": ranks, "error": result["error"], "log": result["log"]}
    rows = []
    for r in result["ranks"]:
        for call, partition in zip(r["calls"], r["partitions"], strict=True):
            rows.append({"rank": r["rank"], "param_group_shapes": call["param_group_shapes"], "partition": partition,
                         "peak_extra": call["peak_extra"], "count": 4 * partition,
                         "ratio": call["peak_extra"] / (4 * partition)})
    r0 = result["ranks"][0]
    largest = max(row["partition"] for row in rows)
    peak = max(row["peak_extra"] for row in rows)
    return {"ranks": ranks, "group_numels": r0["group_numels"], "parameters": r0["parameters"], "calls": rows,
            "peak_extra": peak, "largest_partition": largest, "count_largest_group": 4 * largest,
            "zeroadvisor": zero2_count(r0["parameters"], ranks)}


# ----------------------------------------------------------------------------- report


def compare(m: dict[str, Any]) -> dict[str, Any]:
    count = zeroadvisor_count(m["implementation"], m["N"])
    m = dict(m, zeroadvisor=count)
    if m["supported"]:
        m["ratio"] = m["peak_extra"] / count if count else None
        m["gap_of_4N"] = (m["peak_extra"] - count) / (4 * m["N"])
    return m


def write_reports(data: dict[str, Any], prefix: Path) -> None:
    prefix.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    doc = (__doc__ or "").split("\n\n")
    lines = ["# Optimizer-step temporaries (CPU calibration)", "", *(p.replace("\n", " ") + "\n" for p in doc[:4]),
             f"Machine: {data['machine']}.", "",
             ("| implementation | layout | N | params | measured peak extra (B) | in 4 B × N | zeroadvisor (B) "
             "| ratio |"),
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for m in data["cases"]:
        if not m["supported"]:
            lines.append(f"| {m['implementation']} | {m['layout']} | {m['N']:,} | | not on CPU: {m['error'][:60]} "
                         f"| | {m['zeroadvisor']:,} | |")
            continue
        ratio = f"{m['ratio']:.4f}" if m["ratio"] is not None else "— (count 0)"
        lines.append(f"| {m['implementation']} | {m['layout']} | {m['N']:,} | {m['parameters']} | "
                     f"{m['peak_extra']:,} | {m['in_N_fp32']:.4f} | {m['zeroadvisor']:,} | {ratio} |")
    if data.get("hwm"):
        lines += ["", "## VmHWM cross-check (one flat parameter)", "",
                  "| implementation | N | profiler peak extra (B) | VmHWM − VmRSS before (B) | ratio |",
                  "|---|---:|---:|---:|---:|"]
        lines += [f"| {h['implementation']} | {h['N']:,} | {h['profiler_peak_extra']:,} | {h['vmhwm_extra']:,} | "
                  f"{h['ratio']:.4f} |" for h in data["hwm"]]
    if data.get("deepspeed"):
        model = ("Model: Linear(1024, 4096) · ReLU · Linear(4096, 1024); group 0 the weights (wd 0.1), group 1 the "
                 "biases. Each row is one base-optimizer step call on the third step (stage_1_and_2.py "
                 "_optimizer_step hands it one group).")
        header = ("| ranks | rank | param_groups' shapes at the step | partition | measured peak extra (B) | "
                  "4 B × partition | ratio |")
        lines += ["", "## Real DeepSpeed 0.19.8 ZeRO-2 fp32, client torch AdamW(foreach=True)", "", model, "",
                  header, "|---:|---:|---|---:|---:|---:|---:|"]
        for run in data["deepspeed"]:
            if "error" in run:
                lines.append(f"| {run['ranks']} | | FAILED: {run['error']} | | | | |")
                continue
            lines += [f"| {run['ranks']} | {c['rank']} | {c['param_group_shapes']} | {c['partition']:,} | "
                      f"{c['peak_extra']:,} | {c['count']:,} | {c['ratio']:.4f} |" for c in run["calls"]]
        header = ("| ranks | largest group's partition | peak extra (B) | 4 B × largest partition | "
                  "zeroadvisor (4 B × whole partition, a bound) |")
        lines += ["", header, "|---:|---:|---:|---:|---:|"]
        lines += [f"| {r['ranks']} | {r['largest_partition']:,} | {r['peak_extra']:,} | {r['count_largest_group']:,} "
                  f"| {r['zeroadvisor']:,} |" for r in data["deepspeed"] if "error" not in r]
    if data.get("findings"):
        lines += ["", "## Findings", "", *data["findings"]]
    prefix.with_suffix(".md").write_text("\n".join(lines) + "\n")


# Why a measurement differs from the count, from torch 2.13's code (shown under a contradiction in the .md)
EXPLANATIONS: dict[tuple[str, str], str] = {
    ("Adam L2 foreach", "flat"): (
        "torch/optim/adam.py _multi_tensor_adam: the L2 temporary device_grads = torch._foreach_add(device_grads, "
        "device_params, alpha=weight_decay) is released (`del device_grads`, `del scaled_device_grads`) before "
        "exp_avg_sq_sqrt = torch._foreach_sqrt(...) is built, so the two never coexist: 1 temporary, not 2. "
        "Proposed change, zeroadvisor/memory/step_temporaries.py implementation(): "
        "`temporaries = (1 if foreach else 2) + (1 if adam_l2 and not foreach else 0)` (the single-tensor path keeps "
        "grad = grad.add(param, alpha=weight_decay) alive through sqrt and the division: 3, as measured)."),
    ("AdamW single-tensor", "many"): (
        "torch/optim/adam.py _single_tensor_adam loops over the parameters: the previous parameter's `denom` stays "
        "bound until the next one's division is assigned, so the peak is max over i of 4 B × (2 n_i + n_(i-1)), at "
        "most 3 × 4 B × the largest parameter, not 2 × 4 B × N. ZeRO (stage 1/2/3, FP16_Optimizer, "
        "BF16_Optimizer) hands the step one flat tensor per parameter group, and Adam.step calls adam() once per "
        "group (its temporaries freed in between), so 2 holds there; only an optimizer over the model's own "
        "parameters (stage 0 without those wrappers) sees this layout, and there "
        "zeroadvisor's 2 × 4 B × P (stepped_elements returns P) is a loose upper bound."),
    ("Adam L2 single-tensor", "many"): (
        "as AdamW single-tensor over many parameters, plus that parameter's grad.add(param): 4 × 4 B × the largest "
        "parameter; the count (3 × 4 B × N) is a loose upper bound for this layout."),
    ("Adam L2 foreach", "many"): "as Adam L2 foreach over one flat parameter: the L2 temporary is freed before "
                                 "the sqrt.",
}


def findings(cases: list[dict[str, Any]]) -> list[str]:
    """A line per case whose measurement is off the count by more than BOUND of 4 B × N, with its reason."""
    out = []
    for m in cases:
        if m["supported"] and abs(m["gap_of_4N"]) > BOUND:
            largest = f"; {m['peak_extra'] / (4 * m['largest']):.4f} × 4 B × the largest parameter" \
                if m["parameters"] > 1 and IMPLEMENTATIONS[m["implementation"]]["kw"].get("foreach") is False else ""
            out.append(f"- **{m['implementation']}, {m['layout']}**: measured {m['peak_extra']:,} B "
                       f"({m['in_N_fp32']:.4f} × 4 B × N{largest}), zeroadvisor counts {m['zeroadvisor']:,} B. "
                       + EXPLANATIONS.get((m["implementation"], m["layout"]), "(not explained)"))
    return out or [f"- every case within {BOUND:.0%} of 4 B × N of zeroadvisor's count"]


def run(quick: bool, n: int, ranks: list[int], timeout: int) -> dict[str, Any]:
    names = QUICK_IMPLEMENTATIONS if quick else tuple(IMPLEMENTATIONS)
    layouts = ("flat",) if quick else ("flat", "many")
    cases = []
    for layout in layouts:
        for name in names:
            t0 = time.time()
            m = compare(measure(name, layout, n))
            cases.append(m)
            shown = f"{m['peak_extra']:>12,} B = {m['in_N_fp32']:.4f} × 4N" if m["supported"] else "unsupported"
            print(f"{name:<22} {layout:<5} {shown}  zeroadvisor {m['zeroadvisor']:,}  [{time.time() - t0:.1f}s]",
                  flush=True)
    data: dict[str, Any] = {"machine": machine(), "quick": quick, "cases": cases, "findings": findings(cases)}
    if not quick:
        data["hwm"] = [hwm_cross_check(name, HWM_N) for name in ("AdamW foreach", "AdamW single-tensor")]
        for h in data["hwm"]:
            print(f"VmHWM {h['implementation']}: profiler {h['profiler_peak_extra']:,} vmhwm {h['vmhwm_extra']:,}")
    data["deepspeed"] = [run_deepspeed(r, timeout) for r in ranks]
    for r in data["deepspeed"]:
        print(f"DeepSpeed ZeRO-2 x{r['ranks']}: " + (r["error"] if "error" in r else
              f"peak {r['peak_extra']:,} vs 4 B × largest partition {r['count_largest_group']:,}"), flush=True)
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="flat layout, AdamW foreach/single-tensor/fused only")
    parser.add_argument("--n", type=int, default=None, help="elements stepped (default 5e7; 1e7 with --quick)")
    parser.add_argument("--ranks", default=None, help="DeepSpeed rank counts, comma-separated ('' for none)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per DeepSpeed run")
    parser.add_argument("--out", default=str(HERE / "step_temporaries"), help="output prefix (.md and .json)")
    parser.add_argument("--report", default=None, metavar="JSON", help="rewrite the .md from an existing .json")
    parser.add_argument("--worker", nargs=2, metavar=("CASE_JSON", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        ds_worker(json.loads(args.worker[0]), args.worker[1])
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # gloo destructors sometimes abort at teardown, after the measurement is written
    if args.report:
        data = json.loads(Path(args.report).read_text())
        data["findings"] = findings(data["cases"])
        write_reports(data, Path(args.out))
        return 0
    ranks_text = args.ranks if args.ranks is not None else ("" if args.quick else "1,2")
    ranks = [int(x) for x in ranks_text.split(",") if x.strip()]
    data = run(args.quick, args.n or (N_QUICK if args.quick else N_FULL), ranks, args.timeout)
    write_reports(data, Path(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
