"""Measure TRL's chunked cross-entropy on CPU against zeroadvisor/memory/trl_sft_loss.py.

TRL 1.7 to 1.14 compute SFT's loss without the vocabulary-wide logits (SFTConfig loss_type "chunked_nll", the
default): SFTTrainer patches the model's forward (trl/trainer/sft_trainer.py _patch_chunked_ce_lm_head) and
_chunked_cross_entropy_loss runs the head and the loss 256 tokens at a time under torch.utils.checkpoint. This
script applies that same patch (from the TRL the oracle extra pins) to a randomly initialised transformers
LlamaForCausalLM with gradient checkpointing, runs one step on S tokens and measures the peak of live CPU bytes
over forward + backward beyond the start with torch.profiler's memory events (benchmarks/calibrate_step_temporaries.py
profiled_peak), after a warm-up step that made every gradient (zero_grad keeps them, so the step allocates its
activations and transients only). The same model without the patch (transformers' ForCausalLMLoss over the full
logits) is measured beside it.

Compared with memory/activations.py activation_bytes for the same model and shape, with the method setup TRL SFT
at 1.9.0 (chunked) and without it (full logits). Two regimes: a narrow model (hidden 64), where a chunk's logits
outweigh the head, and a wide one (hidden 1024 > the 256-token chunk, as in real models), where the head weight's
fp32 copy and gradients do.

    PYTHONPATH=. python benchmarks/calibrate_trl_sft_loss.py   # writes benchmarks/trl_sft_loss.json and .md
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

from calibrate_step_temporaries import profiled_peak  # noqa: E402

CASES = [
    {"hidden": 64, "layers": 2, "vocab": 8192, "tokens": 4096, "precision": "fp32"},
    {"hidden": 64, "layers": 2, "vocab": 8192, "tokens": 8192, "precision": "fp32"},
    {"hidden": 64, "layers": 2, "vocab": 32768, "tokens": 4096, "precision": "fp32"},
    {"hidden": 64, "layers": 2, "vocab": 8192, "tokens": 4096, "precision": "bf16"},
    {"hidden": 64, "layers": 2, "vocab": 32768, "tokens": 4096, "precision": "bf16"},
    {"hidden": 1024, "layers": 1, "vocab": 8192, "tokens": 1024, "precision": "fp32"},
    {"hidden": 1024, "layers": 1, "vocab": 8192, "tokens": 1024, "precision": "bf16"},
    {"hidden": 1024, "layers": 1, "vocab": 8192, "tokens": 2048, "precision": "bf16"},
    # the head frozen (PEFT without it in modules_to_save): no weight gradient, only the upcast copy
    {"hidden": 64, "layers": 2, "vocab": 32768, "tokens": 4096, "precision": "bf16", "frozen_head": True},
    {"hidden": 1024, "layers": 1, "vocab": 8192, "tokens": 1024, "precision": "bf16", "frozen_head": True},
    {"hidden": 1024, "layers": 1, "vocab": 8192, "tokens": 2048, "precision": "bf16", "frozen_head": True},
]
TRL_RELEASE = "1.9.0"  # the oracle extra's pin: the chunked era (1.7-1.14)


def config(case: dict[str, Any]) -> dict[str, Any]:
    h = case["hidden"]
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": h,
            "intermediate_size": 172 if h == 64 else 2 * h, "num_hidden_layers": case["layers"],
            "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": case["vocab"],
            "max_position_embeddings": 32768, "tie_word_embeddings": False, "torch_dtype": "float32",
            "attention_dropout": 0.0, "rms_norm_eps": 1e-6}


def measure(case: dict[str, Any], chunked: bool) -> int:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl.trainer.sft_trainer import _CHUNKED_LM_HEAD_CHUNK_SIZE, _patch_chunked_ce_lm_head

    torch.manual_seed(0)
    cfg = LlamaConfig(**{k: v for k, v in config(case).items() if k not in ("architectures", "model_type")})
    cfg._attn_implementation = "sdpa"
    dtype = torch.bfloat16 if case["precision"] == "bf16" else torch.float32
    model = LlamaForCausalLM(cfg).to(dtype).train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if case.get("frozen_head"):
        model.lm_head.weight.requires_grad_(False)
    if chunked:
        _patch_chunked_ce_lm_head(model, chunk_size=_CHUNKED_LM_HEAD_CHUNK_SIZE)
    ids = torch.randint(0, case["vocab"], (1, case["tokens"]))

    def step() -> None:
        model(input_ids=ids, labels=ids).loss.backward()

    step()  # every parameter's .grad now exists
    model.zero_grad(set_to_none=False)
    peak, _ = profiled_peak(step)
    return peak


def predict(case: dict[str, Any], chunked: bool) -> int:
    from zeroadvisor.config.method import MethodSetup
    from zeroadvisor.memory.activations import activation_bytes
    from zeroadvisor.model.hf import spec_from_hf_config
    from zeroadvisor.model.spec import Checkpointing, TrainingShape
    from zeroadvisor.vocab import Method, TrainerFamily

    setup = (MethodSetup(method=Method.SFT, trainer=TrainerFamily.TRL, trainer_version=TRL_RELEASE) if chunked
             else MethodSetup())
    shape = TrainingShape(sequence_length=case["tokens"], flash_attention=True,
                          activation_checkpointing=Checkpointing.FULL, method=setup)
    spec = spec_from_hf_config(config(case))
    if case.get("frozen_head"):  # every parameter but the head trains: the head gets no gradient
        spec = dataclasses.replace(spec, trainable_parameters=spec.parameters - case["vocab"] * case["hidden"])
    return activation_bytes(spec, shape, 1, case["precision"]).nbytes


def row(case: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = dict(case)
    for name, chunked in (("full", False), ("chunked", True)):
        measured, predicted = measure(case, chunked), predict(case, chunked)
        out[f"{name}_measured"], out[f"{name}_predicted"] = measured, predicted
        out[f"{name}_ratio"] = round(predicted / measured, 3)
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    intro = (f"TRL {TRL_RELEASE}'s _chunked_cross_entropy_loss on CPU (a transformers Llama, gradient checkpointing), "
             "peak live bytes of one step beyond its start, against memory/activations.py (TRL SFT at "
             f"{TRL_RELEASE}: memory/trl_sft_loss.py); the full logits (transformers' loss) beside it.")
    header = ("| hidden | vocab | tokens | precision | head | full: measured MB | predicted/measured | "
              "chunked: measured MB | predicted/measured |")
    lines = ["# TRL's chunked cross-entropy: measured vs estimate (benchmarks/calibrate_trl_sft_loss.py)", "", intro,
             "", header, "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['hidden']} | {r['vocab']} | {r['tokens']} | {r['precision']} | "
              f"{'frozen' if r.get('frozen_head') else 'trained'} | {r['full_measured'] / 1e6:.1f} | "
              f"{r['full_ratio']:.3f} | {r['chunked_measured'] / 1e6:.1f} | {r['chunked_ratio']:.3f} |" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    rows = []
    for case in CASES:
        rows.append(row(case))
        print(json.dumps(rows[-1]))
    (REPO / "benchmarks" / "trl_sft_loss.json").write_text(json.dumps(rows, indent=1) + "\n")
    (REPO / "benchmarks" / "trl_sft_loss.md").write_text(markdown(rows))


if __name__ == "__main__":
    main()
