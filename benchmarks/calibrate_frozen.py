"""Measure ZeRO-3's gradient buffers with frozen parameters, real DeepSpeed 0.19.8 on CPU (issue 34 item 2).

The estimate sizes what holds gradients by the trainable parameters only (zeroadvisor/memory/buffers.py
gathered_terms ``gathered_grad``, reduce_scatter_term; states.py optimized / largest_trainable), because
DeepSpeed registers its gradient hook only for parameters that require grad
(stage3.py create_reduce_and_remove_grad_hooks) and builds its groups from is_optimized_parameter ones.

Method. One rank (DS_ACCELERATOR=cpu, gloo; benchmarks/cpu_ranks.py) trains a randomly initialised
transformers Llama (4 layers, hidden 256, ffn 688, vocab 8192, untied head: the embedding and the head,
2,097,152 elements each, are the largest layers) in fp32 at ZeRO-3 (reduce_bucket_size 1,000,000) with a
client torch AdamW for 2 steps, in two cases:

* ``frozen_embedding``: every parameter trains except the input embedding and the LM head (requires_grad
  False): the largest layers are frozen;
* ``lora``: peft LoRA r=8 on q_proj and v_proj (the base frozen).

The engine's optimizer is instrumented on the rank: ``reduce_ready_partitions_and_remove_grads`` (what the
hook calls) records ``param.grad.numel()`` (the full gradient before it enters the IPG bucket), and
stage3's module-level ``reduce_scatter_coalesced`` records the elements of each bucket it copies. Also read:
the IPG buffer's numel and ``grad_partitions_flat_buffer``'s. They are compared with the estimate's terms
(fp32: 4 B per element) for a ModelSpec that says what the live model has (frozen count, trainable count,
largest trainable parameter, largest layer).

    python benchmarks/calibrate_frozen.py    # writes benchmarks/frozen.json and benchmarks/frozen.md
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
from cpu_ranks import machine, run_ranks, write_report  # noqa: E402

LLAMA = {"num_hidden_layers": 4, "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 8,
         "num_key_value_heads": 4, "vocab_size": 8192}
SEQ, STEPS, RBS = 64, 2, 1_000_000
CASES = [{"name": "frozen_embedding", "ranks": 1}, {"name": "lora", "ranks": 1}]


def ds_config() -> dict:
    return {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
            "zero_optimization": {"stage": 3, "reduce_bucket_size": RBS, "contiguous_gradients": True,
                                  "reduce_scatter": True, "stage3_param_persistence_threshold": 0}}


def worker(c: dict, out_path: str) -> None:
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import logging

    import deepspeed
    import torch
    from deepspeed.runtime.zero import stage3
    from transformers import LlamaConfig, LlamaForCausalLM

    logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
    deepspeed.utils.logger.setLevel(logging.ERROR)
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**LLAMA, max_position_embeddings=256, tie_word_embeddings=False))
    largest_layer = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    if c["name"] == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
    else:
        model.model.embed_tokens.weight.requires_grad_(False)
        model.lm_head.weight.requires_grad_(False)
    trainable = [p for p in model.parameters() if p.requires_grad]
    # counted before deepspeed.initialize partitions every parameter in place (numel 0 after)
    counts = {"frozen": sum(p.numel() for p in model.parameters() if not p.requires_grad),
              "trainable": sum(p.numel() for p in trainable), "largest_trainable": max(p.numel() for p in trainable)}
    optimizer = torch.optim.AdamW(trainable, lr=1e-3)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config())
    opt = engine.optimizer
    grads: list[int] = []
    buckets: list[int] = []
    reduce_ready = opt.reduce_ready_partitions_and_remove_grads

    def record_grad(param):
        grads.append(int(param.grad.numel()) if param.grad is not None else 0)
        return reduce_ready(param)

    opt.reduce_ready_partitions_and_remove_grads = record_grad
    scatter = stage3.reduce_scatter_coalesced

    def record_bucket(tensors, *args, **kwargs):
        buckets.append(sum(int(t.numel()) for t in tensors))
        return scatter(tensors, *args, **kwargs)

    stage3.reduce_scatter_coalesced = record_bucket
    generator = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        ids = torch.randint(0, LLAMA["vocab_size"], (2, SEQ), generator=generator)
        loss = engine(input_ids=ids, labels=ids).loss
        engine.backward(loss)
        engine.step()
        losses.append(float(loss))
    ipg = {str(dtype): int(b.buffer.numel()) for dtype, b in opt.ipg_buckets.items() if b.buffer is not None}
    result = {"rank": int(os.environ["RANK"]), **counts, "largest_layer": largest_layer,
              "hooked_params": len(opt._grad_acc_hooks), "trainable_params": len(trainable),
              "max_grad": max(grads), "grads_seen": len(grads), "max_bucket": max(buckets, default=0),
              "buckets": buckets[:20], "ipg_buffer": ipg,
              "grad_partitions_flat_buffer": int(opt.grad_partitions_flat_buffer.numel()), "losses": losses}
    Path(out_path).write_text(json.dumps(result))


def compare(result: dict) -> dict:
    from zeroadvisor.memory.estimate import Cluster, estimate
    from zeroadvisor.model.spec import ModelSpec, TrainingShape

    r0 = result["ranks"][0]
    spec = ModelSpec(parameters=r0["frozen"], model_type="llama", num_layers=LLAMA["num_hidden_layers"],
                     hidden_size=LLAMA["hidden_size"], num_attention_heads=LLAMA["num_attention_heads"],
                     num_key_value_heads=LLAMA["num_key_value_heads"], intermediate_size=LLAMA["intermediate_size"],
                     vocab_size=LLAMA["vocab_size"], gated_mlp=True, largest_layer_parameters=r0["largest_layer"],
                     tied_embeddings=False, trainable_parameters=r0["trainable"],
                     largest_trainable_parameter=r0["largest_trainable"], peft=result["case"]["name"])
    config = {**ds_config(), "optimizer": {"type": "AdamW"}}
    est = estimate(config, spec, TrainingShape(), Cluster(gpus=1))
    by_key = {t.key: t.nbytes // 4 for t in est.configured.terms if t.device == "gpu" and t.phase == "train"}
    rows = {
        "gathered_grad": (by_key.get("gathered_grad"), r0["max_grad"]),
        "reduce_scatter_copy": (by_key.get("reduce_scatter_copy"), r0["max_bucket"]),
        "ipg_bucket": (by_key.get("ipg_bucket"), max(r0["ipg_buffer"].values(), default=0)),
        "grad_partition": (by_key.get("lp_grads"), r0["grad_partitions_flat_buffer"]),
    }
    # what the model counted before issue 34 (the largest layer's gradient, a full bucket's copy, whatever trained)
    before = {"gathered_grad": r0["largest_layer"], "reduce_scatter_copy": RBS, "ipg_bucket": RBS,
              "grad_partition": r0["trainable"]}
    return {"name": result["case"]["name"], "measured": r0, "terms_elements": {
        k: {"estimate": e, "measured": m, "before": before[k]} for k, (e, m) in rows.items()}}


def markdown(rows: list[dict], meta: dict) -> str:
    out = ["# ZeRO-3 gradient buffers with frozen parameters (DeepSpeed on CPU)", "",
           ("`python benchmarks/calibrate_frozen.py` (method: its docstring). Elements, fp32, one rank. `before`: the "
           "terms before issue 34 (the largest layer's gradient and a full bucket's copy whatever trained); "
           "`estimate`: zeroadvisor's term now; `measured`: the largest param.grad at the hook, the largest "
           "bucket reduce_scatter_coalesced copied, the IPG buffer and grad_partitions_flat_buffer."), "",
           f"Machine: {meta}", "",
           "| case | frozen | trainable | largest layer | largest trainable | term | before | estimate | measured |",
           "|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        m = r["measured"]
        for key, v in r["terms_elements"].items():
            out.append(f"| {r['name']} | {m['frozen']:,} | {m['trainable']:,} | {m['largest_layer']:,} | "
                       f"{m['largest_trainable']:,} | {key} | {v['before']:,} | {v['estimate']:,} | "
                       f"{v['measured']:,} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", nargs=2)
    ap.add_argument("--out", default=str(HERE / "frozen"))
    args = ap.parse_args(argv)
    if args.worker:
        worker(json.loads(args.worker[0]), args.worker[1])
        return
    rows = []
    for c in CASES:
        result = run_ranks(__file__, c, timeout=600)
        if "error" in result:
            raise SystemExit(f"{c['name']}: {result['error']}\n{result['log']}")
        rows.append(compare(result))
    meta = machine()
    write_report(args.out, meta, {"cases": rows}, markdown(rows, meta))


if __name__ == "__main__":
    main()
