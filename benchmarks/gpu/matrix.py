"""The calibration matrix: which DeepSpeed runs the kit measures, and the DeepSpeed config of each.

One model decides the matrix on the GPU: a TinyLlama-1.1B-shaped Llama (the public TinyLlama/TinyLlama-1.1B
config.json: hidden 2048, 22 layers, 32 heads / 4 KV heads, ffn 5632, vocab 32000, untied), built from a
LlamaConfig with random weights (nothing is downloaded). The dry run keeps every row and its code path but
runs a tiny Llama of the same family on the CPU, at a shorter sequence.

Rows vary one thing at a time from the base (ZeRO-2, bf16, micro batch 4, sequence 1024, no activation
checkpointing): the stage (0-3), optimizer and parameter offload, the micro batch, the sequence length,
activation checkpointing, LoRA and QLoRA.
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
DRY_SEQ_DIVISOR = 32  # the dry run's sequence: the GPU row's / 32 (1024 -> 32)
DRY_MAX_MICRO_BATCH = 2

LORA_R = 16
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")  # peft's names in LlamaAttention
REDUCE_BUCKET = 50_000_000  # DeepSpeed's default 5e8 would be a 1 GB bf16 bucket next to a 1.1B model


def row(name: str, stage: int = 2, offload_optimizer: str = "none", offload_param: str = "none", micro_batch: int = 4,
        seq_len: int = 1024, checkpointing: bool = False, peft: str = "none", save: bool = False,
        steps: int = 3) -> dict[str, Any]:
    """One row; ``steps``: timed steps after one warm-up step; ``save``: run engine.save_checkpoint too."""
    return {"name": name, "stage": stage, "offload_optimizer": offload_optimizer, "offload_param": offload_param,
            "micro_batch": micro_batch, "seq_len": seq_len, "checkpointing": checkpointing, "peft": peft,
            "save": save, "steps": steps}


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
]
# Seconds a row is expected to take on one H200, start-up (imports, 1.1B random weights built on the host)
# included: a planning figure, not a measurement (README.md "Time budget"); run.py starts no row with less left.
EXPECTED_S = 25


def for_run(case: dict[str, Any], dry: bool) -> dict[str, Any]:
    """The row as it runs: the GPU's shape, or the dry run's smaller one (every switch kept)."""
    if not dry:
        return {**case, "model": GPU_MODEL}
    return {**case, "model": DRY_MODEL, "seq_len": max(16, case["seq_len"] // DRY_SEQ_DIVISOR),
            "micro_batch": min(case["micro_batch"], DRY_MAX_MICRO_BATCH)}


def ds_config(case: dict[str, Any]) -> dict[str, Any]:
    """The DeepSpeed config the row trains with (the client torch AdamW is passed to deepspeed.initialize)."""
    zero: dict[str, Any] = {"stage": case["stage"], "reduce_bucket_size": REDUCE_BUCKET}
    if case["offload_optimizer"] != "none":
        zero["offload_optimizer"] = {"device": case["offload_optimizer"]}
    if case["offload_param"] != "none":
        zero["offload_param"] = {"device": case["offload_param"]}
    return {
        "train_micro_batch_size_per_gpu": case["micro_batch"], "gradient_accumulation_steps": 1,
        "bf16": {"enabled": True}, "zero_optimization": zero, "steps_per_print": 10**9,
        # DeepSpeedCPUAdam needs the cpu_adam op, which a DS_BUILD_OPS=0 wheel cannot JIT-build without a
        # compiler run; a client torch AdamW on the host partition is what DeepSpeed 0.19.8 allows instead
        # (runtime/engine.py _configure_optimizer raises only while zero_force_ds_cpu_optimizer is true)
        "zero_force_ds_cpu_optimizer": False,
    }


def estimate_config(case: dict[str, Any]) -> dict[str, Any]:
    """The config the estimate reads: the run's, with the optimizer named (the client AdamW is not in it)."""
    return {**ds_config(case), "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}
