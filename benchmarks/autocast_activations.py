"""Measure what torch_autocast leaves in the activations, on CPU (memory/autocast.py cites the numbers).

A 2-layer transformers Llama (5.24) runs one training forward with labels under
``torch.autograd.graph.saved_tensors_hooks``; every tensor autograd saves is recorded once per storage,
parameters excluded, and attributed to the layer running (layer 1 is reported, per token). Three runs per
shape: a bf16 model, an fp32 model under ``torch.autocast("cpu", dtype=torch.bfloat16)``, and the same with
F.linear replaced by DeepSpeed's zero3_linear_wrap (what zero.Init does for the process at ZeRO-3).

Measured (per token, layer 1, h = hidden): autocast keeps beyond the bf16 model 4·(4 − 2)·h = 8h of fp32
(the two norms' inputs and outputs) plus, through plain F.linear, 2h more and the bf16 copy of every Linear
weight; through zero3_linear_wrap the 8h alone and no weight copies.

    PYTHONPATH=. python benchmarks/autocast_activations.py
"""

from __future__ import annotations

import torch


def layer_bytes(h: int, f: int, heads: int, kv: int, mode: str, s: int = 64, b: int = 2) -> dict[str, float]:
    """Bytes per token autograd keeps in layer 1, by dtype (mode: bf16 | autocast)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=h, intermediate_size=f, num_attention_heads=heads, num_key_value_heads=kv,
                         num_hidden_layers=2, vocab_size=1000, attn_implementation="sdpa")
    model = LlamaForCausalLM(config)
    if mode == "bf16":
        model = model.to(torch.bfloat16)
    model.train()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    where = ["outside"]
    seen: dict[int, tuple[str, int, str]] = {}
    for i, layer in enumerate(model.model.layers):
        layer.register_forward_pre_hook(lambda mod, args, i=i: where.append(f"layer{i}") and None)
        layer.register_forward_hook(lambda mod, args, out: where.pop() and None)

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = t.untyped_storage().data_ptr()
        if key not in params and key not in seen:
            seen[key] = (where[-1], t.untyped_storage().nbytes(), str(t.dtype))
        return t

    ids = torch.randint(0, 1000, (b, s))
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "autocast")
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast:
        model(input_ids=ids, labels=ids)
    out: dict[str, float] = {}
    for name, nbytes, dtype in seen.values():
        if name == "layer1":
            out[dtype] = out.get(dtype, 0) + nbytes / (s * b)
    return out


def weights_per_token(h: int, f: int, heads: int, kv: int, s: int = 64, b: int = 2) -> float:
    hd = h // heads
    return 2 * (2 * h * heads * hd + 2 * h * kv * hd + 3 * h * f) / (s * b)


def main() -> None:
    from deepspeed.runtime.zero.linear import zero3_linear_wrap

    plain = torch.nn.functional.linear
    for dims in [(128, 344, 4, 2), (256, 344, 4, 2), (128, 688, 4, 2)]:
        h = dims[0]
        bf16 = sum(layer_bytes(*dims, "bf16").values())
        auto = sum(layer_bytes(*dims, "autocast").values())
        torch.nn.functional.linear = zero3_linear_wrap
        try:
            z3 = sum(layer_bytes(*dims, "autocast").values())
        finally:
            torch.nn.functional.linear = plain
        copies = weights_per_token(*dims)
        print(f"h={h} f={dims[1]} kv={dims[3]}: F.linear +{(auto - bf16 - copies) / h:.2f}h beyond the weight "
              f"copies ({copies:.0f} B/token); zero3_linear_wrap +{(z3 - bf16) / h:.2f}h")


if __name__ == "__main__":
    main()
