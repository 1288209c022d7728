"""Configs whose verdict depends on the DeepSpeed release: real corpus configs with one change each.

Each case is a real config from ../shared/corpus/real (MANIFEST.tsv) with one of the CHANGES below applied, the
changes being what the parsers of 0.9 to 0.19 read differently (docs/deepspeed-releases.md). The corpus is read
from where it lies, never copied (benchmarks/releases.py and tests/oracle/test_release_oracle.py write the cases
to a temporary folder).
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable
from typing import Any

CORPUS = pathlib.Path(__file__).resolve().parents[2] / "shared" / "corpus" / "real"

# Bases: one config per common shape (stage 2 fp16 with CPU offload, stage 3 "auto" bf16, stage 2 bf16, ...).
BASES = (
    "Aashish75__fine-tune-llama-trump__ds_config.json",
    "0traced__frontier-finetuning__ds_config.json",
    "AISquaredInc__DLite-official__deepspeed_config.json",
)


def _zero(config: dict[str, Any], **keys: Any) -> dict[str, Any]:
    zero = dict(config.get("zero_optimization") or {})
    zero.update(keys)
    return {**config, "zero_optimization": zero}


def _block(config: dict[str, Any], name: str, **keys: Any) -> dict[str, Any]:
    block = dict(config.get(name) or {}) if isinstance(config.get(name), dict) else {}
    block.update(keys)
    return {**config, name: block}


def _offload(config: dict[str, Any], which: str, **keys: Any) -> dict[str, Any]:
    zero = dict(config.get("zero_optimization") or {})
    zero[which] = {"device": "cpu", **(zero.get(which) if isinstance(zero.get(which), dict) else {}), **keys}
    return {**config, "zero_optimization": zero}


def _without(config: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k not in keys}


def _precision(fp16: Any, bf16: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def change(config: dict[str, Any]) -> dict[str, Any]:
        out = _without(config, "fp16", "bf16", "bfloat16", "amp")
        if fp16 is not None:
            out["fp16"] = {"enabled": fp16}
        if bf16 is not None:
            out["bf16"] = {"enabled": bf16}
        return out
    return change


def _scheduler(steps: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def change(config: dict[str, Any]) -> dict[str, Any]:
        return {**config, "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 1e-4,
                                                                         "warmup_num_steps": steps}}}
    return change


# name -> change; each is something a release line reads differently (the list, from the parsers)
CHANGES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "as-is": lambda c: c,
    "fractional-prefetch": lambda c: _zero(c, stage=3, stage3_prefetch_bucket_size=15099494.4),
    "stage-as-string": lambda c: _zero(c, stage="1"),
    "fp16-opt-level": lambda c: _block(_precision(True, None)(c), "fp16", opt_level="O2"),
    "bf16-auto-cast": lambda c: _block(_precision(None, True)(c), "bf16", auto_cast=True),
    "precision-auto-both": _precision("auto", "auto"),
    "precision-fp16-auto": _precision("auto", None),
    "bf16-on": _precision(None, True),
    "zeropp-hpz": lambda c: _zero(c, stage=3, zero_hpz_partition_size=2),
    "zeropp-quantized": lambda c: _zero(c, stage=3, zero_quantized_weights=True, zero_quantized_gradients=True),
    "offload-ratio": lambda c: _offload(c, "offload_optimizer", ratio=0.5),
    "module-granularity": lambda c: _zero(c, stage=3, stage3_module_granularity_threshold=0),
    "zenflow": lambda c: _zero(c, stage=2, zenflow={"topk_ratio": 0.05}),
    "compute-grad-norm": lambda c: _zero(c, compute_grad_norm=True),
    "tensor-parallel": lambda c: {**c, "tensor_parallel": {"autotp_size": 1}},
    "torch-autocast": lambda c: {**_precision(None, None)(c), "torch_autocast": {"enabled": True}},
    "compile": lambda c: {**c, "compile": {"deepcompile": False}},
    "seq-parallel-comm-dtype": lambda c: {**c, "seq_parallel_communication_data_type": "fp32"},
    "aio-thread-count": lambda c: {**c, "aio": {"thread_count": 1}},
    "aio-intra-op": lambda c: {**c, "aio": {"intra_op_parallelism": 1}},
    "amp": lambda c: {**_precision(None, None)(c), "amp": {"enabled": False}},
    "compression-training": lambda c: {**c, "compression_training": {}},
    "sparse-attention": lambda c: {**c, "sparse_attention": {"mode": "fixed"}},
    "curriculum-learning": lambda c: {**c, "curriculum_learning": {"enabled": False}},
    "mics-shard-size": lambda c: _zero(c, stage=3, mics_shard_size=-1),
    "communication-bfp16": lambda c: {**c, "communication_data_type": "bfp16"},
    "communication-bf16": lambda c: {**c, "communication_data_type": "bf16"},
    "warmup-zero-steps": _scheduler(0),
    "loss-scale-window-zero": lambda c: _block(_precision(True, None)(c), "fp16", loss_scale=0, loss_scale_window=0),
    "min-loss-scale-zero": lambda c: _block(_precision(True, None)(c), "fp16", loss_scale=0, min_loss_scale=0),
    "allreduce-sum-zero3": lambda c: {**_zero(c, stage=3), "gradient_allreduce_op": "sum"},
    "allreduce-sum-zero2": lambda c: {**_zero(c, stage=2), "gradient_allreduce_op": "sum"},
    "immediate-grad-update": lambda c: _block(_precision(None, True)(c), "bf16", immediate_grad_update=True),
    "pin-memory-unset": lambda c: _offload(c, "offload_optimizer"),
}


BATCH_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")


def batch_filled(config: dict[str, Any]) -> dict[str, Any]:
    """The base with its "auto" batch sizes given (1 each, world size 1), as an integration would: plain
    DeepSpeedConfig compares "auto" with 0 and raises TypeError in every release, which says nothing about
    the release."""
    if not any(config.get(key) == "auto" for key in BATCH_KEYS):
        return config
    return {**{k: v for k, v in config.items() if k not in BATCH_KEYS}, "train_micro_batch_size_per_gpu": 1,
            "gradient_accumulation_steps": 1}


def cases(corpus: pathlib.Path = CORPUS) -> dict[str, dict[str, Any]]:
    """name -> config: every change on every base that exists (an empty dict where the corpus is absent)."""
    out: dict[str, dict[str, Any]] = {}
    for base in BASES:
        path = corpus / base
        if not path.is_file():
            continue
        config = batch_filled(json.loads(path.read_text(encoding="utf-8")))
        for name, change in CHANGES.items():
            out[f"{path.stem}--{name}"] = change(json.loads(json.dumps(config)))
    return out


def write(into: pathlib.Path, corpus: pathlib.Path = CORPUS) -> list[pathlib.Path]:
    into.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, config in cases(corpus).items():
        path = into / f"{name}.json"
        path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        paths.append(path)
    return paths
