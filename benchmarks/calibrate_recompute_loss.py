"""Measure the activation peak of a fully checkpointed transformers Llama on CPU: loss peak vs a layer's recompute.

zeroadvisor/memory/activations.py counts, under full recomputation, every layer's checkpointed input, what is
kept outside the layers, and the larger of (one layer's activations while torch.utils.checkpoint recomputes it)
and (the LM head's saved input + the loss peak): autograd frees the loss and head before it recomputes the
last layer. The sum of the two, today's count before this change, over-counts. This script measures it.

Method. A randomly initialised transformers 5.24 LlamaForCausalLM (hidden 64, 4 layers, 4 heads, 2 KV heads,
SwiGLU 172, fp32, SDPA: CPU's flash kernel keeps no s x s scores), gradient checkpointing on (non-reentrant),
one sample of S tokens with labels (transformers' ForCausalLMLoss, fp32). One warm-up step makes every
parameter's gradient; the measured step keeps them (zero_grad(set_to_none=False)), so what it allocates beyond
the start is the activations and backward's transients. torch.profiler's CPU memory events (profile_memory) give
the peak of live bytes over forward + backward beyond the start (benchmarks/calibrate_step_temporaries.py
profiled_peak). Two vocabularies: one where the loss peak is the larger (8192), one where the layer is (256).

Compared with: ``max`` (activation_bytes.nbytes, the count) and ``sum`` (the count + the smaller of the two
peaks: what was counted before). The measured peak also holds backward's gradient transients (the hidden
state's gradient, a layer's activation gradients), which neither counts.

    PYTHONPATH=. python benchmarks/calibrate_recompute_loss.py   # writes benchmarks/recompute_loss.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

from calibrate_step_temporaries import profiled_peak  # noqa: E402

CASES = [
    {"vocab": 8192, "tokens": 8192},
    {"vocab": 8192, "tokens": 16384},
    {"vocab": 256, "tokens": 16384},
]


def config(vocab: int) -> dict[str, Any]:
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 172,
            "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": vocab,
            "max_position_embeddings": 32768, "tie_word_embeddings": False, "torch_dtype": "float32",
            "attention_dropout": 0.0, "rms_norm_eps": 1e-6}


def measure(vocab: int, tokens: int) -> int:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(**{k: v for k, v in config(vocab).items() if k not in ("architectures", "model_type")})
    cfg._attn_implementation = "sdpa"
    model = LlamaForCausalLM(cfg).float().train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ids = torch.randint(0, vocab, (1, tokens))

    def step() -> None:
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()

    step()  # every parameter's .grad now exists
    model.zero_grad(set_to_none=False)
    peak, _ = profiled_peak(step)
    return peak


def predict(vocab: int, tokens: int) -> dict[str, int]:
    from zeroadvisor.memory.activations import activation_bytes
    from zeroadvisor.model.hf import spec_from_hf_config
    from zeroadvisor.model.spec import Checkpointing, TrainingShape

    spec = spec_from_hf_config(config(vocab))
    shape = TrainingShape(sequence_length=tokens, flash_attention=True, activation_checkpointing=Checkpointing.FULL)
    act = activation_bytes(spec, shape, 1, "fp32")
    layer = dict(act.parts)["layer"]
    head = 4 * tokens * spec.hidden_size  # the LM head's saved input, fp32
    return {"max": act.nbytes, "sum": act.nbytes + min(layer, head + act.logits), "layer": layer,
            "loss_and_head": head + act.logits}


def main() -> None:
    rows = []
    for c in CASES:
        measured = measure(c["vocab"], c["tokens"])
        p = predict(c["vocab"], c["tokens"])
        rows.append({**c, "measured_peak": measured, **p,
                     "gap_max": (p["max"] - measured) / measured, "gap_sum": (p["sum"] - measured) / measured})
        print(json.dumps(rows[-1]))
    (REPO / "benchmarks" / "recompute_loss.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
