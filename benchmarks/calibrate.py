"""Calibrate the memory model against real DeepSpeed 0.19.8 ZeRO training steps on CPU.

DeepSpeed runs on this CPU-only machine with its CPU accelerator (DS_ACCELERATOR=cpu, gloo),
1, 2 and 4 ranks as separate processes (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT). Each rank
trains a small model for a few steps; on the last step it sums the bytes of every live CPU
tensor (deduplicated by storage) at these moments (more are listed in calibration.md):

  A. right after ``engine.backward`` (gradients as backward leaves them), and
  B. when the base optimizer's ``step`` is entered (master weights, optimizer states, and the
     gradients the step consumes).

Each storage is classified into the estimate's rows by walking the engine's and optimizer's
attributes (parameters, gradients, optimizer_states, buffers, gathered_parameters); anything
else (inputs, outputs, autograd leftovers, module buffers) is "unclassified". A row's measured
value is its largest value over the moments and the ranks: the estimate's rows are per-GPU peaks of
that kind of memory on the most loaded GPU. At stage 1/2 the estimate is given the live model's
parameter sizes (ModelSpec.parameter_numels), so it models the per-rank partition layout.

On CPU "GPU" and host memory are the same RAM, so each estimate row is compared as the sum of
its GPU and host terms (NVMe terms are excluded).

    python benchmarks/calibrate.py            # full matrix: 1, 2, 4 ranks
    python benchmarks/calibrate.py --quick    # CI subset: client torch AdamW only (no cpu_adam build)

Writes benchmarks/calibration.json and benchmarks/calibration.md (or --out PREFIX).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))  # benchmarks/: the shared launcher (cpu_ranks.py)
from cpu_ranks import run_ranks  # noqa: E402

STATE_ROWS = ("parameters", "gradients", "optimizer_states")
ROWS = ("parameters", "gradients", "optimizer_states", "gathered_parameters", "buffers")
MODEL_STATE_BOUND = 0.02  # model-state rows must agree within 2 %
STEPS = 3
REDUCE_BUCKET = 5_000_000  # keep the buckets small next to the model (default 5e8 would dwarf it)


# ----------------------------------------------------------------------------- cases


def case(name, stage, ranks, precision="fp32", offload_optimizer="none", offload_param="none", model="mlp",
         grad_accum=None, optimizer="client-adamw", zero=None):
    return {"name": name, "stage": stage, "ranks": ranks, "precision": precision,
            "offload_optimizer": offload_optimizer, "offload_param": offload_param, "model": model,
            "grad_accum": grad_accum, "optimizer": optimizer, "zero": zero or {}}


def full_cases() -> list[dict]:
    cases = []
    for ranks in (1, 2, 4):
        cases += [case(f"mlp fp32 z{stage}", stage, ranks) for stage in (0, 1, 2, 3)]
        cases += [case(f"mlp fp32 z{stage} +opt:cpu", stage, ranks, offload_optimizer="cpu", optimizer="cpu-adam")
                  for stage in (1, 2, 3)]
        cases.append(case("mlp fp32 z3 +opt:cpu +par:cpu", 3, ranks, offload_optimizer="cpu", offload_param="cpu",
                          optimizer="cpu-adam"))
        cases.append(case("mlp bf16 z2", 2, ranks, precision="bf16"))
        cases.append(case("mlp bf16 z3", 3, ranks, precision="bf16"))
        cases.append(case("mlp bf16 z1 fp32-accum (BF16_Optimizer)", 1, ranks, precision="bf16", grad_accum="fp32"))
        cases.append(case("llama bf16 z3", 3, ranks, precision="bf16", model="llama"))
        cases.append(case("llama fp32 z2", 2, ranks, model="llama"))
        # stage-3 persistent parameters (numel <= stage3_param_persistence_threshold stay whole on every rank):
        # hidden 256 keeps q/k/v/o and the norms whole, hidden 512 only k/v (512 x 128) and the norms; a
        # model_persistence_threshold cap makes the selection depend on the parameter order
        cases.append(case("llama fp32 z3", 3, ranks, model="llama"))
        cases.append(case("llama512 fp32 z3", 3, ranks, model="llama512"))
        cases.append(case("llama fp32 z3 model_persistence 300000", 3, ranks, model="llama",
                          zero={"model_persistence_threshold": 300_000}))
    return cases


def quick_cases() -> list[dict]:
    return [
        case("mlp fp32 z0", 0, 1),
        case("mlp fp32 z1", 1, 2),
        case("mlp fp32 z2", 2, 2),
        case("mlp fp32 z3", 3, 2),
        # torch AdamW on the host partition (zero_force_ds_cpu_optimizer false): no g++ build of cpu_adam
        case("mlp fp32 z2 +opt:cpu (torch AdamW)", 2, 1, offload_optimizer="cpu"),
        # stage-3 persistent parameters: the llama's q/k/v/o (< 1e5 elements) stay whole on both ranks
        case("llama fp32 z3", 3, 2, model="llama"),
    ]


def ds_config(c: dict) -> dict:
    zero: dict = {"stage": c["stage"], "reduce_bucket_size": REDUCE_BUCKET, **c.get("zero", {})}
    if c["offload_optimizer"] != "none":
        zero["offload_optimizer"] = {"device": c["offload_optimizer"]}
    if c["offload_param"] != "none":
        zero["offload_param"] = {"device": c["offload_param"]}
    config = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "zero_optimization": zero,
              "steps_per_print": 10**9}
    if c["precision"] == "bf16":
        config["bf16"] = {"enabled": True}
    if c["grad_accum"]:
        config["data_types"] = {"grad_accum_dtype": c["grad_accum"]}
    if c["optimizer"] == "cpu-adam":
        config["zero_force_ds_cpu_optimizer"] = True
    elif c["offload_optimizer"] != "none":
        config["zero_force_ds_cpu_optimizer"] = False  # allow the client torch optimizer with offload
    return config


# ----------------------------------------------------------------------------- worker (one rank)


def build_model(kind: str):
    import torch

    torch.manual_seed(0)
    if kind == "mlp":
        d, f = 1024, 4096
        layers = []
        for _ in range(2):
            layers += [torch.nn.Linear(d, f), torch.nn.ReLU(), torch.nn.Linear(f, d)]
        return torch.nn.Sequential(*layers), {"d": d}
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**LLAMAS[kind], max_position_embeddings=256, tie_word_embeddings=False)
    return LlamaForCausalLM(cfg), {"vocab": cfg.vocab_size, "seq": 64}


LLAMAS = {
    "llama": dict(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=8,
                  num_key_value_heads=4, vocab_size=8000),
    "llama512": dict(hidden_size=512, intermediate_size=1376, num_hidden_layers=2, num_attention_heads=8,
                     num_key_value_heads=2, vocab_size=4000),
}


def storage_key(t):
    try:
        st = t.untyped_storage()
        return st.data_ptr(), st.nbytes()
    except Exception:  # noqa: BLE001 - meta/sparse/odd tensors have no plain storage
        return None


def classify(engine, sizes: dict[int, int]) -> dict[str, set[int]]:
    """Storage pointers per row, found by walking the engine's and optimizer's attributes.

    Tensors reached here are added to ``sizes`` too: a gradient autograd created in C++ has no
    Python object (so gc cannot see it) until someone reads ``param.grad``.
    """
    import torch

    cats: dict[str, set[int]] = {row: set() for row in ROWS}

    def add(row, obj, depth=0):
        if obj is None or depth > 4:
            return
        if isinstance(obj, torch.Tensor):
            key = storage_key(obj)
            if key and key[0] and key[1] and obj.device.type == "cpu":
                cats[row].add(key[0])
                sizes[key[0]] = max(sizes.get(key[0], 0), key[1])
            return
        if isinstance(obj, dict):
            for value in obj.values():
                add(row, value, depth + 1)
        elif isinstance(obj, (list, tuple, set)):
            for value in obj:
                add(row, value, depth + 1)
        elif hasattr(obj, "buffer"):  # IPG bucket objects
            add(row, obj.buffer, depth + 1)
        elif hasattr(obj, "flat_partition"):  # compact gradient partition groups
            add(row, obj.flat_partition, depth + 1)
            add(row, getattr(obj, "grad_buffers", None), depth + 1)

    opt = engine.optimizer
    module = engine.module
    params = list(module.parameters())
    for p in params:
        if hasattr(p, "ds_tensor"):
            add("parameters", p.ds_tensor)
            if p.data.numel() > 0 and storage_key(p.data) != storage_key(p.ds_tensor):
                # a persistent parameter's full copy is never released (partitioned_param_coordinator.py
                # __params_to_release skips ds_persist): part of the parameters, not of the transient gather
                add("parameters" if getattr(p, "ds_persist", False) else "gathered_parameters", p.data)
        else:
            add("parameters", p.data)
    for name in ("bit16_groups_flat", "fp16_groups_flat", "bf16_groups_flat", "lp_param_buffer",
                 "fp16_partitioned_groups_flat", "param_groups_fp16_flat_cpu_memory",
                 "param_buffer_of_bit16_for_cpu_offload_groups"):
        add("parameters", getattr(opt, name, None))

    masters = []
    for name in ("single_partition_of_fp32_groups", "fp32_partitioned_groups_flat", "fp32_groups_flat",
                 "fp32_groups_flat_partition"):
        value = getattr(opt, name, None)
        if value is not None:
            masters += list(value)
            add("optimizer_states", value)
    base = engine.basic_optimizer if engine.basic_optimizer is not None else opt
    for candidate in {id(base): base, id(getattr(opt, "optimizer", None)): getattr(opt, "optimizer", None)}.values():
        if candidate is not None and hasattr(candidate, "state"):
            add("optimizer_states", dict(candidate.state))

    for p in params:
        if hasattr(p, "ds_tensor"):
            # stage 3: a full-size param.grad not (yet) copied into the reduce bucket is the estimate's
            # "full gradient of the layer before it is reduced" term of gathered_parameters
            add("gathered_parameters", p.grad)
        add("gradients", p.grad)
        add("gradients", getattr(p, "grad_accum", None))
    for m in masters:
        if isinstance(m, torch.Tensor):
            add("gradients", m.grad)
    for name in ("grads_in_partition", "grad_partitions_flat_buffer", "fp32_groups_gradients_flat",
                 "averaged_gradients", "fp32_groups_gradients"):
        add("gradients", getattr(opt, name, None))

    add("buffers", getattr(opt, "ipg_buckets", None))
    for name in ("temp_grad_buffer_for_cpu_offload", "temp_grad_buffer_for_gpu_offload"):
        add("buffers", getattr(opt, name, None))
    return cats


# A storage claimed by two rows goes to the first: e.g. param.grad is a view into the reduce bucket
# while the bucket is filled, so the bucket counts as buffers, not gradients.
PRIORITY = ("parameters", "optimizer_states", "buffers", "gathered_parameters", "gradients")


def snapshot(engine, buffers=()) -> dict:
    """Row totals of every live CPU tensor storage; ``buffers``: transient buffers held in locals."""
    import torch

    gc.collect()
    sizes: dict[int, int] = {}
    for obj in gc.get_objects():
        if isinstance(obj, torch.Tensor) and obj.device.type == "cpu":
            key = storage_key(obj)
            if key and key[0] and key[1]:
                sizes[key[0]] = max(sizes.get(key[0], 0), key[1])
    cats = classify(engine, sizes)
    for tensor in buffers:
        key = storage_key(tensor)
        if key and key[0] and key[1]:
            sizes[key[0]] = max(sizes.get(key[0], 0), key[1])
            cats["buffers"].add(key[0])
    rows = dict.fromkeys(ROWS, 0)
    other = 0
    for ptr, n in sizes.items():
        for row in PRIORITY:
            if ptr in cats[row]:
                rows[row] += n
                break
        else:
            other += n
    rows["unclassified"] = other
    return rows


def partition_layout(opt) -> dict | None:
    """Stage 1/2: how this rank's partition lies across parameters (DeepSpeed sizes grads_in_partition
    by the parameters that touch the partition, counted whole)."""
    if not hasattr(opt, "params_in_partition") or not hasattr(opt, "partition_size"):
        return None
    return {"touching": int(sum(p.numel() for group in opt.params_in_partition for p in group)),
            "partition": int(sum(int(x) for x in opt.partition_size)),
            "element_size": int(opt.bit16_groups_flat[0].element_size()),
            "single_tensor_groups": int(sum(len(group) == 1 for group in opt.params_in_partition))}


def worker(spec: dict, out_path: str) -> None:
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import logging

    import deepspeed
    import torch

    logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
    deepspeed.utils.logger.setLevel(logging.ERROR)
    c = spec
    model, info = build_model(c["model"])
    n_params = sum({p.data_ptr(): p.numel() for p in model.parameters()}.values())
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    largest_param = max(p.numel() for p in model.parameters())
    # what DeepSpeed flattens into its stage-1/2 bit16 group (one param group), before stage 3 partitions them
    parameter_numels = [p.numel() for p in model.parameters() if p.requires_grad]
    if c["optimizer"] == "cpu-adam":
        from deepspeed.ops.adam import DeepSpeedCPUAdam

        optimizer = DeepSpeedCPUAdam(model.parameters(), lr=1e-3, adamw_mode=True)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    t0 = time.time()
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config(c))
    init_s = time.time() - t0
    dtype = torch.bfloat16 if c["precision"] == "bf16" else torch.float32
    generator = torch.Generator().manual_seed(1 + int(os.environ["RANK"]))

    state = {"last": False, "B": None, "points": []}
    inner = getattr(engine.optimizer, "optimizer", None)
    target = inner if inner is not None and hasattr(inner, "step") else engine.optimizer
    original_step = target.step

    def step_and_measure(*args, **kwargs):
        if state["last"] and state["B"] is None:
            state["B"] = snapshot(engine)
        return original_step(*args, **kwargs)

    target.step = step_and_measure

    # More moments on the last step (instance attributes shadow the methods DeepSpeed calls on self):
    # entering the gradient epilogue (full stage-1 grads and the reduce buckets are still alive), each
    # free_grad_in_param_list in step() (the reduced partition next to its fp32 copy), and the forward
    # of every module with parameters (stage-3 gathered parameters).
    def measure_around(obj, name):
        original = getattr(obj, name, None)
        if original is None:
            return

        def wrapped(*args, **kwargs):
            if state["last"]:
                state["points"].append(dict(snapshot(engine), moment=name))
            return original(*args, **kwargs)

        setattr(obj, name, wrapped)

    # Transient flat buffers that only live inside one call: the engine's all-reduce bucket (stage 0
    # and BF16_Optimizer; engine.allreduce_bucket -> self.flatten) and the stage-3 reduce-scatter copy
    # of a bucket (coalesced_collectives.reduce_scatter_coalesced -> instrument_w_nvtx(torch.cat)).
    def keep_output(function, moment):
        def wrapped(*args, **kwargs):
            out = function(*args, **kwargs)
            if state["last"]:
                state["points"].append(dict(snapshot(engine, buffers=[out]), moment=moment))
            return out

        return wrapped

    engine.flatten = keep_output(engine.flatten, "allreduce_bucket")
    import deepspeed.runtime.comm.coalesced_collectives as collectives

    instrument = collectives.instrument_w_nvtx
    collectives.instrument_w_nvtx = (
        lambda fn: keep_output(instrument(fn), "reduce_scatter_coalesced") if fn is torch.cat else instrument(fn))
    measure_around(engine.optimizer, "reduce_gradients")
    measure_around(engine.optimizer, "independent_gradient_partition_epilogue")
    measure_around(engine.optimizer, "free_grad_in_param_list")
    if c["stage"] == 3:
        def forward_hook(module, inputs, output):
            if state["last"]:
                state["points"].append(dict(snapshot(engine), moment="forward"))
        for m in engine.module.modules():
            if any(True for _ in m.parameters(recurse=False)):
                m.register_forward_hook(forward_hook)
    losses = []
    A = None
    for i in range(STEPS):
        state["last"] = i == STEPS - 1
        if c["model"] == "mlp":
            x = torch.randn(2, info["d"], generator=generator).to(dtype)
            loss = engine(x).float().pow(2).mean()
        else:
            ids = torch.randint(0, info["vocab"], (2, info["seq"]), generator=generator)
            loss = engine(input_ids=ids, labels=ids).loss
        engine.backward(loss)
        if state["last"]:
            A = snapshot(engine)
        engine.step()
        losses.append(float(loss))
    B = dict(state["B"] or {})
    for point in state["points"]:  # fold the extra moments into B as a row-wise maximum
        B = {k: max(B.get(k, 0), point.get(k, 0)) for k in (*ROWS, "unclassified")}
    if os.environ.get("CALIBRATE_DEBUG"):
        for label, point in [("after backward", A), ("optimizer step", state["B"])] + [
                (p["moment"], p) for p in state["points"]]:
            print(label, {k: round(v / 2**20, 2) for k, v in (point or {}).items() if k != "moment"}, flush=True)
    result = {"rank": int(os.environ["RANK"]), "parameters": n_params, "largest_layer": largest,
              "largest_param": largest_param,
              "parameter_numels": parameter_numels, "A": A, "B": B, "losses": losses, "init_s": init_s,
              "moments": 2 + len(state["points"]), "layout": partition_layout(engine.optimizer),
              "optimizer": type(engine.optimizer).__name__,
              "base_optimizer": type(engine.basic_optimizer).__name__ if engine.basic_optimizer is not None else None}
    Path(out_path).write_text(json.dumps(result))


# ----------------------------------------------------------------------------- orchestration


def run_case(c: dict, timeout: int) -> dict:
    return run_ranks(__file__, c, timeout)


def compare(result: dict) -> dict:
    from zeroadvisor.memory.estimate import Cluster, estimate
    from zeroadvisor.memory.partition import layout_stage12, step_gradient_elements
    from zeroadvisor.model.spec import ModelSpec, TrainingShape

    c = result["case"]
    r0 = result["ranks"][0]
    config = ds_config(c)
    config["optimizer"] = {"type": "AdamW"}
    numels = r0.get("parameter_numels")
    spec = ModelSpec(parameters=r0["parameters"], largest_layer_parameters=r0["largest_layer"], source="calibration",
                     parameter_numels=tuple(numels) if numels is not None else None)
    est = estimate(config, spec, TrainingShape(), Cluster(gpus=c["ranks"]))
    st = est.configured
    # the step's tensors: the train phase without the allowances (CUDA context, fragmentation, the runtime),
    # which no live-tensor count on CPU can see
    terms = [t for t in st.terms if t.phase == "train" and t.kind != "allowance"]
    estimated = {row: sum(t.nbytes for t in terms if t.row == row and t.device != "nvme") for row in ROWS}
    # The estimate is per GPU: the most loaded rank (stage 1/2 with a known layout: the rank with the most
    # gradient bytes). The measurement is therefore the largest value over the ranks, row by row.
    rows = {}
    for row in ROWS:
        measured = [max(rank["A"][row], rank["B"][row] if rank["B"] else 0) for rank in result["ranks"]]
        worst = max(range(len(measured)), key=lambda i: measured[i])
        m = measured[worst]
        gap = (estimated[row] - m) / m if m else (0.0 if estimated[row] == 0 else None)
        rows[row] = {"estimated": estimated[row], "measured": m, "measured_per_rank": measured,
                     "gap": gap, "worst_rank": worst}
    states_est = sum(estimated[r] for r in STATE_ROWS)
    states_meas = [sum(max(rank["A"][r], rank["B"][r] if rank["B"] else 0) for r in STATE_ROWS)
                   for rank in result["ranks"]]
    rows["model_states"] = {"estimated": states_est, "measured": max(states_meas), "measured_per_rank": states_meas,
                            "gap": (states_est - max(states_meas)) / max(states_meas),
                            "worst_rank": max(range(len(states_meas)), key=lambda i: states_meas[i])}
    # Parameter layout (stage 1/2, gradients through copy_grads_in_partition): the estimate's gradient term
    # at the step is the worst rank's; zeroadvisor/memory/partition.py gives every rank's, so each rank is
    # also compared with its own modelled bytes (and the model's rank layout with the optimizer's own).
    step_terms = [t for t in terms if t.row == "gradients" and "copy_grads_in_partition" in t.source]
    if numels is not None and step_terms and c["stage"] in (1, 2):
        w = 2 if c["precision"] == "bf16" else 4
        layout = layout_stage12(numels, c["ranks"], element_size=w)
        at_rank = [w * lp + 4 * m for lp, m in (step_gradient_elements(r, w, 4) for r in layout.ranks)]
        at_worst = sum(t.nbytes for t in terms if t.row == "gradients" and t.device != "nvme"
                       and ("copy_grads_in_partition" in t.source or "single_grad_partition" in t.source))
        grads_rank = [estimated["gradients"] - at_worst + a for a in at_rank]
        grads = rows["gradients"]
        grads["estimated_per_rank"] = grads_rank
        grads["gap_per_rank"] = [(e - m) / m for e, m in zip(grads_rank, grads["measured_per_rank"], strict=False)]
        states_rank = [states_est - estimated["gradients"] + g for g in grads_rank]
        rows["model_states"]["estimated_per_rank"] = states_rank
        rows["model_states"]["gap_per_rank"] = [(e - m) / m for e, m in zip(states_rank, states_meas, strict=False)]
        measured_layout = [rank.get("layout") for rank in result["ranks"]]
        rows["gradients"]["layout_matches_deepspeed"] = all(
            lay is not None and lay["touching"] == r.touched and lay["partition"] == r.partition
            and bool(lay["single_tensor_groups"]) == (r.params == 1)
            for lay, r in zip(measured_layout, layout.ranks, strict=False))
    return {"name": c["name"], "ranks": c["ranks"], "case": c, "rows": rows,
            "unclassified": max(max(rank["A"]["unclassified"], (rank["B"] or {}).get("unclassified", 0))
                                for rank in result["ranks"]),
            "optimizer": r0["optimizer"], "base_optimizer": r0["base_optimizer"], "parameters": r0["parameters"],
            "losses": r0["losses"], "estimate_terms": [
                {"row": t.row, "device": t.device, "bytes": t.nbytes, "what": t.what, "source": t.source}
                for t in terms]}


def fmt_mb(n: int) -> str:
    return f"{n / 2**20:.2f}"


def fmt_gap(g) -> str:
    return "n/a" if g is None else f"{100 * g:+.1f}%"


EXPLANATIONS = """\
## How it is measured

On the last of the steps each rank sums every live CPU tensor storage (deduplicated by storage
pointer; tensors reached only through DeepSpeed's attributes are added too, since autograd's
gradients have no Python object until read) at these moments: after `engine.backward`; entering
`reduce_gradients` and `independent_gradient_partition_epilogue` (stage 1/2: full-size
gradients and the reduce bucket still alive); every `free_grad_in_param_list` in `step()` (the
reduced partition next to its fp32 copy); entering the base optimizer's `step`; the output of the
engine's all-reduce flatten (stage 0, BF16_Optimizer) and of the stage-3 reduce-scatter
`torch.cat`; and (stage 3) the forward of every module with parameters. A row's measured value is
its largest value over these moments and over the ranks, the same definition as the estimate's rows
(per-GPU peaks of that kind of memory, on the most loaded GPU); the model-state total is the
largest per-rank sum of the three rows.

Storages are classified by walking the engine's and optimizer's attributes: `parameters` (module
parameters, `ds_tensor` partitions, bit16 flat groups, offload upload staging), `optimizer_states`
(fp32 master partitions and the base optimizer's `state`), `buffers` (`ipg_buckets`, offload
gradient staging, the transient flat buckets), `gathered_parameters` (stage 3: full `param.data`
and full-size `param.grad` not yet copied into the bucket), `gradients` (everything reached from
`.grad`, `grad_accum`, `grads_in_partition`, `averaged_gradients`, `grad_partitions_flat_buffer`,
BF16_Optimizer's fp32 gradient buffer). A stage-3 persistent parameter's full `param.data`
(`ds_persist`: never released) counts as parameters, not as a transient gather. When a storage is
claimed twice the order is parameters, optimizer_states, buffers, gathered_parameters, gradients
(e.g. a `param.grad` that is a view into the reduce bucket counts as the bucket).

On CPU "GPU" and host memory are the same RAM, so each estimate row is its GPU + host terms
(NVMe terms excluded).

## Rows other than the model states

* **buffers**: the stage-0/BF16_Optimizer flat all-reduce bucket, the stage-1/2 reduce bucket
  (`setup_buckets`, 1 × `reduce_bucket_size` since `overlap_comm` is off below stage 3) and the
  stage-1/2 offload staging buffers (`temp_grad_buffer_for_{gpu,cpu}_offload`, one largest
  parameter each) agree exactly. At stage 3 the IPG buffer (allocated at init) agrees exactly;
  the estimate also counts the reduce-scatter flat copy of a *full* bucket
  (`reduce_scatter_coalesced`), while the real copy holds the bucket's contents, which stay below
  `reduce_bucket_size` because a bucket is flushed before a gradient would overflow it (here a
  4,194,304-element weight plus biases in a 5,000,000-element bucket). The estimate is the upper
  bound: gaps of about +8 % (MLP) and +0.5 % (llama).
* **gathered_parameters** (stage 3): with 2 and 4 ranks the MLP's prefetch bucket (5e7 elements)
  is larger than the whole model, so the forward gathers every parameter (4 B × P); the estimate
  adds the largest layer's full gradient (4 B × L_p), which exists in backward when most of the
  model is already released again, so its two peaks do not coincide here: about +25 %. With 1
  rank the partition is the whole tensor and nothing extra is gathered; only the full gradient
  of a layer waiting for the bucket is seen, so the estimate (largest layer + prefetch) is far
  above the measurement. Not calibrated as a bound better than "upper bound".
* **activations**: not measured; by the time of every moment above except the forward hooks they
  are freed, and in the forward hooks they are partial. They follow Korthikanti et al. (see
  `zeroadvisor/memory/activations.py`), not calibrated here.
* **overhead**: an allowance for the CUDA context and allocator fragmentation; a CPU run has
  neither. Not calibrated.
* **unclassified**: input batch, outputs and logits, module buffers (the llama's rotary
  `inv_freq`), autograd leftovers and communication temporaries that no DeepSpeed attribute holds
  (e.g. a bucket-sized reduction output with 2 ranks). At stage 3 with 2 and 4 ranks it is
  about 4 B × P during forward, next to the same amount of gathered parameters, and gone by
  the last module: a second full-size copy while parameters are all-gathered. It is probably
  the gloo backend's own all-gather output (gloo has no in-place all-gather into a tensor;
  NCCL's `all_gather_into_tensor` writes into DeepSpeed's buffer directly); not verified on a
  GPU, and not counted in the estimate. Part of no row.

## What the model-state agreement confirms about DeepSpeed 0.19.8

* Stage 1/2 gradients are a peak of two moments: full-size gradients after backward (stage 1 keeps
  them until the reduction) and, in `step()`, the reduced partition plus its flattened copy in
  the master dtype (`averaged_gradients` + `single_grad_partition`). With 4 ranks stage 1's
  full-size gradients are the larger.
* Stage 3 keeps every parameter with at most `stage3_param_persistence_threshold` elements (1e5)
  whole on every rank, next to its partition (`parameter_offload.py mark_persistent_parameters`;
  `stage3.py _post_step` gathers them again after each step into ceil(numel/N)·N-element buffers);
  their gradients and optimizer states stay partitioned. The llama (hidden 256) keeps q, k, v, o
  and the norms whole: 788,736 elements, 23 % of its 3,499,136-element partition at 2 ranks; the
  llama512 only k, v (512 × 128) and the norms; with `model_persistence_threshold` 300,000 the
  selection follows the parameter order (the estimate replays the loop on `parameter_numels`). With
  one rank the full tensor is the partition (no copy); with an offloaded partition the GPU copy
  `NoGatherHandle` makes is a no-op on CPU (same device), so the 1-rank `+par:cpu` case shows the
  estimate's GPU copy of the MLP's biases (+0.1 %).
* Stage 3 always clones the fp32 master partition, also when the model is fp32: the no-copy
  branch of `_create_fp32_partitions` compares a `torch.device` with a device-name string and is
  never taken.
* Stage 3 keeps `grad_partitions_flat_buffer` (P/N in the gradient-accumulation dtype) and, in
  the step, an fp32 copy of the sub-group's gradients: 4 + 4 B per partition element in fp32,
  2 + 4 in bf16, beyond DeepSpeed's own estimator (which counts 4).
* BF16_Optimizer (bf16 + stage 1 + fp32 accumulation) keeps an unpartitioned fp32 gradient buffer
  and the bf16 gradients (zeroed, never freed).
* CPU offload keeps a host fp32 gradient partition, the master partition, the Adam states and a
  16-bit upload copy (stage 1/2); stage 3 keeps the flat gradient buffer and a per-sub-group fp32
  gradient buffer on the host.
* Stage 1/2 gradients at the step depend on the parameter layout (section above):
  `grads_in_partition` is sized by the parameters that *touch* the partition (boundary parameters
  counted whole), and a partition inside one fp32 parameter is flattened as a view. With 4 ranks
  the llama's first and last partitions lie inside the embedding and the LM head (7.81 MiB of
  gradients each: the 2,048,000-element parameter whole, no fp32 copy), the middle ones touch 20
  parameters each (20.27 and 20.02 MiB, boundary parameters whole). The estimate, modelling this,
  takes the worst rank; every rank also agrees with its own modelled bytes.
"""


def write_reports(comparisons: list[dict], failures: list[dict], prefix: Path, quick: bool) -> None:
    prefix.with_suffix(".json").write_text(json.dumps({"quick": quick, "cases": comparisons,
                                                       "failures": failures}, indent=1))
    lines = ["# Calibration: the memory model against DeepSpeed 0.19.8 on CPU", "",
             (f"Generated by `python benchmarks/calibrate.py{' --quick' if quick else ''}` "
              "(DS_ACCELERATOR=cpu, gloo). Bytes in MiB (2^20); gap = (estimate - measured) / measured, "
              "measured = the most loaded rank per row (the estimate is per GPU: the most loaded rank). "
              "Model: `mlp` = 2 × [Linear(1024→4096), ReLU, Linear(4096→1024)] "
              "(16,787,456 params); `llama` = LlamaForCausalLM(hidden 256, 4 layers, 8 heads / 4 KV, "
              "ffn 688, vocab 8000, untied; 6,998,272 params); `llama512` = LlamaForCausalLM(hidden 512, 2 layers, "
              "8 heads / 2 KV, ffn 1376, vocab 4000, untied). Optimizer: client torch AdamW, or DeepSpeedCPUAdam "
              "for offload. "
              f"reduce_bucket_size = {REDUCE_BUCKET:,}. {STEPS} steps, micro batch 2."), ""]
    worst = max_state_gap(comparisons)
    worst_rank = max_state_gap(comparisons, per_rank=True)
    layout_cases = [c for c in comparisons if "gap_per_rank" in c["rows"]["gradients"]]
    lines += [(f"**Max model-state gap: {100 * worst:.2f}%** over {len(comparisons)} case(s) (bound "
               f"{100 * MODEL_STATE_BOUND:.0f}%; estimate vs the most loaded rank, every model-state row). Rank by "
               f"rank, with each rank's own stage-1/2 partition layout (see below), the max is "
               f"**{100 * worst_rank:.2f}%**."), ""]
    header = ("| case | ranks | DS optimizer | params est/meas | grads est/meas | opt states est/meas | "
              "model states est/meas (gap) | buffers est/meas | gathered est/meas | unclassified |")
    lines += [header, "|" + "---|" * 10]
    for c in comparisons:
        r = c["rows"]

        def cell(row, r=r):  # bound now: each table line reads its own case
            return f"{fmt_mb(r[row]['estimated'])} / {fmt_mb(r[row]['measured'])} ({fmt_gap(r[row]['gap'])})"

        lines.append(f"| {c['name']} | {c['ranks']} | {c['optimizer']} | {cell('parameters')} | {cell('gradients')} | "
                     f"{cell('optimizer_states')} | {cell('model_states')} | {cell('buffers')} | "
                     f"{cell('gathered_parameters')} | {fmt_mb(c['unclassified'])} |")
    if layout_cases:
        lines += ["", "## Parameter layout at stage 1/2 (modelled)", "",
                  ("DeepSpeed sizes a rank's 16-bit gradient partition (`grads_in_partition`, "
                   "`copy_grads_in_partition`) by the parameters that touch its partition, counted whole, and in "
                   "fp32 `step()` flattens a partition that lies inside one parameter as a view (no copy). Both "
                   "depend on where the partition boundaries fall in the parameter list. The estimate models this "
                   "when `ModelSpec.parameter_numels` (the trainable parameters' sizes in `model.parameters()` "
                   "order, one param group) is given, as calibrate.py does from the live model: "
                   "`zeroadvisor/memory/partition.py` reproduces `get_data_parallel_partitions` / "
                   "`get_partition_info` / `get_flat_partition` (2·N alignment, first offset) and the estimate "
                   "takes the worst rank. Without `parameter_numels` it falls back to the partition P/N (as "
                   "DeepSpeed's own estimator does) and says so in its assumptions; the error is then at most "
                   "two boundary parameters per GPU (e.g. Llama-2-7B on 8 GPUs: at most 2 × 131M embedding "
                   "elements × 2 B next to a 842M-element partition). Cases where the step's gradient terms "
                   "apply, rank by rank (modelled / measured gradients in MiB; `layout = DS`: the modelled "
                   "touching elements and single-parameter partitions equal the optimizer's `params_in_partition`):"),
                  "",
                  "| case | ranks | gradients per rank, modelled / measured (MiB) | worst per-rank gap | layout = DS |",
                  "|---|---|---|---|---|"]
        for c in layout_cases:
            g = c["rows"]["gradients"]
            per_rank = ", ".join(f"{fmt_mb(e)} / {fmt_mb(m)}" for e, m in zip(g["estimated_per_rank"],
                                                                            g["measured_per_rank"], strict=False))
            lines.append(f"| {c['name']} | {c['ranks']} | {per_rank} | {fmt_gap(max(g['gap_per_rank'], key=abs))} | "
                         f"{'yes' if g.get('layout_matches_deepspeed') else 'NO'} |")
    if failures:
        lines += ["", "## Cases that did not run", ""]
        for f in failures:
            lines.append(f"* {f['case']['name']} ({f['case']['ranks']} ranks): {f['error']}")
    lines += ["", EXPLANATIONS]
    prefix.with_suffix(".md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="CI subset")
    parser.add_argument("--out", default=str(HERE / "calibration"), help="output prefix (.md and .json)")
    parser.add_argument("--only", default=None, help="run only cases whose name contains this text")
    parser.add_argument("--ranks", default=None, help="comma-separated rank counts to keep")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per case")
    parser.add_argument("--report", default=None, metavar="JSON", help="rewrite the .md from an existing .json")
    parser.add_argument("--update", action="store_true",
                        help="merge the cases run into the existing --out .json (same name and ranks replaced)")
    parser.add_argument("--worker", nargs=2, metavar=("CASE_JSON", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.report:
        data = json.loads(Path(args.report).read_text())
        write_reports(data["cases"], data["failures"], Path(args.out), data["quick"])
        return 0
    if args.worker:
        worker(json.loads(args.worker[0]), args.worker[1])
        sys.stdout.flush()
        sys.stderr.flush()
        # skip interpreter teardown: gloo/shm-comm destructors sometimes abort ("terminate called
        # without an active exception") after the measurement is already written
        os._exit(0)
    cases = quick_cases() if args.quick else full_cases()
    if args.only:
        cases = [c for c in cases if args.only in c["name"]]
    if args.ranks:
        keep = {int(x) for x in args.ranks.split(",")}
        cases = [c for c in cases if c["ranks"] in keep]
    comparisons, failures = [], []
    for c in cases:
        t0 = time.time()
        result = run_case(c, args.timeout)
        if "error" in result:
            failures.append({"case": c, "error": result["error"], "log": result["log"]})
            print(f"FAILED {c['name']} x{c['ranks']}: {result['error']}\n{result['log'][-1500:]}", flush=True)
            continue
        comp = compare(result)
        comparisons.append(comp)
        ms = comp["rows"]["model_states"]
        print(f"{c['name']:<42} x{c['ranks']}  model states est {fmt_mb(ms['estimated'])} MiB "
              f"meas {fmt_mb(ms['measured'])} MiB ({fmt_gap(ms['gap'])})  "
              + "  ".join(f"{row[:5]} {fmt_gap(comp['rows'][row]['gap'])}" for row in STATE_ROWS)
              + f"  [{time.time() - t0:.0f}s]", flush=True)
    if args.update and Path(args.out).with_suffix(".json").is_file():
        comparisons, failures = merge(json.loads(Path(args.out).with_suffix(".json").read_text()), comparisons,
                                      failures, cases)
    write_reports(comparisons, failures, Path(args.out), args.quick)
    worst = max_state_gap(comparisons)
    worst_rank = max_state_gap(comparisons, per_rank=True)
    print(f"max model-state gap {100 * worst:.2f}% (rank by rank {100 * worst_rank:.2f}%) over "
          f"{len(comparisons)} case(s); {len(failures)} failed")
    return 0 if not failures and max(worst, worst_rank) <= MODEL_STATE_BOUND else 1


def merge(old: dict, comparisons: list[dict], failures: list[dict], cases: list[dict]) -> tuple[list, list]:
    """The old report's cases with those just run (same name and ranks) replaced, in the full matrix's order."""
    ran = {(c["name"], c["ranks"]) for c in cases}
    by_key = {(c["name"], c["ranks"]): c for c in old["cases"] if (c["name"], c["ranks"]) not in ran}
    by_key.update({(c["name"], c["ranks"]): c for c in comparisons})
    order: dict[tuple[str, int], int] = {}
    for i, c in enumerate(full_cases() + quick_cases()):
        order.setdefault((c["name"], c["ranks"]), i)
    merged = sorted(by_key.values(), key=lambda c: order.get((c["name"], c["ranks"]), len(order)))
    kept = [f for f in old["failures"] if (f["case"]["name"], f["case"]["ranks"]) not in ran]
    return merged, kept + failures


def max_state_gap(comparisons: list[dict], per_rank: bool = False) -> float:
    """Largest |gap| over the model-state rows (estimate vs the most loaded rank); ``per_rank``: also each
    rank against its own modelled bytes where the stage-1/2 layout gives them."""
    gaps = []
    for comp in comparisons:
        for row in (*STATE_ROWS, "model_states"):
            entry = comp["rows"][row]
            if entry["gap"] is not None:
                gaps.append(abs(entry["gap"]))
            if per_rank:
                gaps += [abs(g) for g in entry.get("gap_per_rank", ())]
    return max(gaps, default=0.0)


if __name__ == "__main__":
    sys.exit(main())
