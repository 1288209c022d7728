"""The calibration matrix: which DeepSpeed runs the kit measures, and the DeepSpeed config of each.

One model decides the matrix on the GPU: a TinyLlama-1.1B-shaped Llama (the public TinyLlama/TinyLlama-1.1B
config.json: hidden 2048, 22 layers, 32 heads / 4 KV heads, ffn 5632, vocab 32000, untied), built from a
LlamaConfig with random weights (nothing is downloaded). The dry run keeps every row and its code path but
runs a tiny Llama of the same family on the CPU, at a shorter sequence.

Rows vary one thing at a time from the base (ZeRO-2, bf16, micro batch 4, sequence 1024, no activation
checkpointing): the stage (0-3), optimizer and parameter offload, the micro batch, the sequence length,
activation checkpointing, LoRA and QLoRA.

Rows named "small ..." (issue 34) train a smaller Llama of the same family (SMALL_MODEL, 0.16B) and each names
the zeroadvisor terms it decides (``decides``; compare.py prints measured against estimated for each): the
gradient-side buffers of ZeRO-3 when only some parameters train (LoRA r 8 and 16; a frozen embedding and head
without PEFT), the allocator's fragmentation with expandable segments off and on (PYTORCH_CUDA_ALLOC_CONF in the
worker's environment, set before torch starts), and torch_autocast on an fp32 model against bf16.
"""

from __future__ import annotations

from typing import Any

# The model the GPU rows train (1,100,048,384 parameters: TinyLlama-1.1B's config.json)
GPU_MODEL: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632,
    "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4, "vocab_size": 32000,
    "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False,
    "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
}
# The dry run's model: the same family, small enough for 2 CPU cores
DRY_MODEL: dict[str, Any] = {**GPU_MODEL, "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
                             "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
                             "max_position_embeddings": 512}
# The issue-34 rows' model: the same family, small enough that a row is mostly start-up (155,730,944
# parameters: embedding and head 32000 x 1024 each, 8 layers of 11.3M); untied, so a frozen embedding and head
# leave an MLP weight (1024 x 2816) as the largest trainable parameter.
SMALL_MODEL: dict[str, Any] = {**GPU_MODEL, "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 8,
                               "num_attention_heads": 16, "num_key_value_heads": 4}
DRY_SEQ_DIVISOR = 32  # the dry run's sequence: the GPU row's / 32 (1024 -> 32)
DRY_MAX_MICRO_BATCH = 2

LORA_R = 16
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")  # peft's names in LlamaAttention
REDUCE_BUCKET = 50_000_000  # DeepSpeed's default 5e8 would be a 1 GB bf16 bucket next to a 1.1B model
ALLOC_CONF_ENV = "PYTORCH_CUDA_ALLOC_CONF"
EXPANDABLE = "expandable_segments:True"
# What a row can decide (``decides``), and how compare.py reads each: "key" terms are one zeroadvisor term
# (Term.key, summed over the train phase's GPU terms), "row" terms a whole row of them (Term.row).
DECIDABLE: dict[str, str] = {
    "gathered_grad": "key",  # memory/buffers.py: the largest trainable parameter's full gradient (stage 3)
    "reduce_scatter_copy": "key",  # memory/buffers.py reduce_scatter_term: the flat copy of one bucket
    "ipg_bucket": "key",  # memory/buffers.py: the IPG flat buffer(s), one per comm dtype
    "fragmentation": "key",  # memory/allocator.py fragmentation_term
    "activations": "row",  # memory/activations.py and memory/autocast.py
    "gathered_parameters": "row",  # memory/autocast.py (fp32 gathered copies) and working_set.py
}
GRADIENT_SIDE = ("gathered_grad", "reduce_scatter_copy", "ipg_bucket")


def row(name: str, stage: int = 2, offload_optimizer: str = "none", offload_param: str = "none", micro_batch: int = 4,
        seq_len: int = 1024, checkpointing: bool = False, peft: str = "none", save: bool = False,
        steps: int = 3, model: str = "1.1b", lora_r: int = LORA_R, freeze_embeddings: bool = False,
        alloc_conf: str | None = None, precision: str = "bf16", decides: tuple[str, ...] = (),
        expected_s: int = 0) -> dict[str, Any]:
    """One row; ``steps``: timed steps after one warm-up step; ``save``: run engine.save_checkpoint too;
    ``model``: "1.1b" (GPU_MODEL) or "small" (SMALL_MODEL); ``freeze_embeddings``: requires_grad=False on the
    input embedding and the LM head, without PEFT; ``alloc_conf``: PYTORCH_CUDA_ALLOC_CONF in the worker's
    environment (None: unset); ``precision``: "bf16" or "autocast" (an fp32 model under torch_autocast bf16);
    ``decides``: the zeroadvisor terms (DECIDABLE) this row settles; ``expected_s``: the planned seconds."""
    return {"name": name, "stage": stage, "offload_optimizer": offload_optimizer, "offload_param": offload_param,
            "micro_batch": micro_batch, "seq_len": seq_len, "checkpointing": checkpointing, "peft": peft,
            "save": save, "steps": steps, "model_size": model, "lora_r": lora_r,
            "freeze_embeddings": freeze_embeddings, "alloc_conf": alloc_conf, "precision": precision,
            "decides": list(decides),
            "expected_s": expected_s or (SMALL_EXPECTED_S if model == "small" else EXPECTED_S)}


# Seconds a row is expected to take on one H200, start-up (imports, 1.1B random weights built on the host)
# included: a planning figure, not a measurement (README.md "Time budget"); run.py starts no row with less left.
EXPECTED_S = 25
# The same for a "small" row: start-up (about 10 s of imports and deepspeed.initialize) and 0.16B weights
SMALL_EXPECTED_S = 15


# The save phase runs in four rows (a 1.1B checkpoint with its fp32 Adam states is about 15 GB to write).
MATRIX: list[dict[str, Any]] = [
    row("z0", stage=0),
    row("z1", stage=1),
    row("z2", stage=2, save=True),
    row("z3", stage=3, save=True),
    row("z2 +opt:cpu", offload_optimizer="cpu", steps=2),
    row("z3 +opt:cpu", stage=3, offload_optimizer="cpu", steps=2),
    row("z3 +opt:cpu +par:cpu", stage=3, offload_optimizer="cpu", offload_param="cpu", save=True, steps=2),
    row("z2 mb1", micro_batch=1),
    row("z2 mb8", micro_batch=8),
    row("z2 seq2048", seq_len=2048),
    row("z2 mb8 ckpt", micro_batch=8, checkpointing=True),
    row("z2 seq2048 ckpt", seq_len=2048, checkpointing=True),
    row("z3 mb8 ckpt", stage=3, micro_batch=8, checkpointing=True),
    row("z2 lora", peft="lora", save=True),
    row("z3 lora", stage=3, peft="lora"),
    row("z2 qlora", peft="qlora"),
    # issue 34: ZeRO-3 with frozen parameters. The gradient-side buffers are sized by the trainable parameters:
    # LoRA r 8 and r 16 on q/k/v/o (425,984 / 851,968 trainable elements, the largest 1024 x r), and a frozen
    # embedding and head without PEFT (90,194,944 trainable, the largest 2,883,584)
    row("small z3 lora r8", stage=3, peft="lora", lora_r=8, model="small", micro_batch=2, seq_len=512,
        decides=GRADIENT_SIDE),
    row("small z3 lora r16", stage=3, peft="lora", lora_r=16, model="small", micro_batch=2, seq_len=512,
        decides=GRADIENT_SIDE),
    row("small z3 frozen-embed", stage=3, freeze_embeddings=True, model="small", micro_batch=2, seq_len=512,
        decides=GRADIENT_SIDE),
    # torch_autocast: an fp32 model, the forward under torch.autocast(bfloat16)
    row("small z3 autocast", stage=3, model="small", micro_batch=4, seq_len=1024, precision="autocast",
        decides=("activations", "gathered_parameters", "fragmentation")),
    # the allocator: the same run with torch's default allocator and with expandable segments; the default
    # one is also autocast's bf16 counterpart. Expandable segments last: the dry run runs rows in one process
    # per PYTORCH_CUDA_ALLOC_CONF (run.py alloc_groups), so the matrix costs it one extra process only
    row("small z3 alloc:default", stage=3, model="small", micro_batch=4, seq_len=1024,
        decides=("fragmentation", "activations", "gathered_parameters")),
    row("small z3 alloc:expandable", stage=3, model="small", micro_batch=4, seq_len=1024, alloc_conf=EXPANDABLE,
        decides=("fragmentation",)),
]


def for_run(case: dict[str, Any], dry: bool) -> dict[str, Any]:
    """The row as it runs: the GPU's shape, or the dry run's smaller one (every switch kept)."""
    if not dry:
        return {**case, "model": SMALL_MODEL if case["model_size"] == "small" else GPU_MODEL}
    return {**case, "model": DRY_MODEL, "seq_len": max(16, case["seq_len"] // DRY_SEQ_DIVISOR),
            "micro_batch": min(case["micro_batch"], DRY_MAX_MICRO_BATCH)}


def ds_config(case: dict[str, Any]) -> dict[str, Any]:
    """The DeepSpeed config the row trains with (the client torch AdamW is passed to deepspeed.initialize)."""
    zero: dict[str, Any] = {"stage": case["stage"], "reduce_bucket_size": REDUCE_BUCKET}
    # autocast keeps the model fp32 (no bf16 section) and runs the forward under torch.autocast
    # (runtime/torch_autocast.py); its dtype written, so the Linear weights' comm dtype is bf16
    precision: dict[str, Any] = ({"torch_autocast": {"enabled": True, "dtype": "bfloat16"}}
                                 if case["precision"] == "autocast" else {"bf16": {"enabled": True}})
    if case["offload_optimizer"] != "none":
        zero["offload_optimizer"] = {"device": case["offload_optimizer"]}
    if case["offload_param"] != "none":
        zero["offload_param"] = {"device": case["offload_param"]}
    return {
        "train_micro_batch_size_per_gpu": case["micro_batch"], "gradient_accumulation_steps": 1,
        **precision, "zero_optimization": zero, "steps_per_print": 10**9,
        # DeepSpeedCPUAdam needs the cpu_adam op, which a DS_BUILD_OPS=0 wheel cannot JIT-build without a
        # compiler run; a client torch AdamW on the host partition is what DeepSpeed 0.19.8 allows instead
        # (runtime/engine.py _configure_optimizer raises only while zero_force_ds_cpu_optimizer is true)
        "zero_force_ds_cpu_optimizer": False,
    }


def estimate_config(case: dict[str, Any]) -> dict[str, Any]:
    """The config the estimate reads: the run's, with the optimizer named (the client AdamW is not in it)."""
    return {**ds_config(case), "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}
