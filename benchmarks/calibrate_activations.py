"""Calibrate memory/activations.py against what real transformers keeps for backward, on CPU.

For small BERT, T5 and Llama configs (transformers 5.24, torch 2.13) one training forward (with labels,
so the loss runs; model.train(), dropout as the config says) is run under
``torch.autograd.graph.saved_tensors_hooks``: every tensor autograd saves for backward is recorded once
per storage (views and tensors saved by two ops counted once), parameters excluded. The bytes are
attributed to the layer whose forward was running (hooks on every layer), the rest to "outside the
layers" (embeddings, final norm, head, loss). The estimate's numbers come from
``zeroadvisor.model.hf.spec_from_hf_config`` of the same config.json and
``zeroadvisor.memory.activations.activation_bytes``.

Two things differ on CPU from a GPU, and the script makes them behave as on CUDA:

* dropout: ``at::dropout`` uses the fused ``native_dropout`` (bool mask, 1 byte) only on CUDA
  (``is_fused_kernel_acceptable``); on CPU it multiplies by a float noise tensor. ``F.dropout`` is routed
  to ``torch.native_dropout`` here, the op CUDA runs.
* SDPA with dropout or with a bias that needs a gradient falls back to the math kernel on CPU (which keeps
  the scores), where CUDA runs a fused kernel. The SDPA cases therefore set the attention dropout to 0
  (the CPU flash kernel then runs, keeping q, k, v, its output and the fp32 log-sum-exp, as the CUDA
  kernels do); T5 (relative position bias) is measured with eager attention only.

The estimate's loss term is the peak in backward (three tokens × V tensors, see activations.py); autograd
saves one of them (the log-probabilities), so the comparison uses a third of it.

    PYTHONPATH=. python benchmarks/calibrate_activations.py       # writes benchmarks/activations.{md,json}
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BOUND = 0.05  # every part within 5 % (activations.py ignores a few small per-model tensors, see the md)

BERT = {"model_type": "bert", "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 512,
        "type_vocab_size": 2}
T5 = {"model_type": "t5", "d_model": 128, "d_ff": 512, "d_kv": 32, "num_heads": 4, "num_layers": 2,
      "num_decoder_layers": 2, "vocab_size": 1000, "decoder_start_token_id": 0, "pad_token_id": 0,
      "architectures": ["T5ForConditionalGeneration"]}
GQA = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
       "intermediate_size": 344, "vocab_size": 1000}
QWEN3 = {**GQA, "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]}
QWEN3_MOE = {**GQA, "model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "num_experts": 4,
             "num_experts_per_tok": 2, "moe_intermediate_size": 64, "decoder_sparse_step": 1}
QWEN2_MOE = {**GQA, "model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"], "num_experts": 4,
             "num_experts_per_tok": 2, "moe_intermediate_size": 64, "shared_expert_intermediate_size": 96,
             "decoder_sparse_step": 1}
MIXTRAL = {**GQA, "model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "num_local_experts": 4,
           "num_experts_per_tok": 2}
GPT_OSS = {**GQA, "model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"], "num_local_experts": 4,
           "num_experts_per_tok": 2, "intermediate_size": 64}
PHI = {"model_type": "phi", "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
       "intermediate_size": 512, "vocab_size": 1000, "architectures": ["PhiForCausalLM"]}
GPTJ = {"model_type": "gptj", "n_embd": 128, "n_layer": 2, "n_head": 4, "rotary_dim": 16, "vocab_size": 1000,
        "n_positions": 128, "architectures": ["GPTJForCausalLM"]}
MPT = {"model_type": "mpt", "d_model": 128, "n_layers": 2, "n_heads": 4, "vocab_size": 1000, "max_seq_len": 128,
       "architectures": ["MptForCausalLM"]}
DEEPSEEK_V3 = {**GQA, "model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], "num_key_value_heads": 4,
               "head_dim": 16, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
               "n_shared_experts": 1, "first_k_dense_replace": 0, "kv_lora_rank": 32, "q_lora_rank": 48,
               "qk_rope_head_dim": 16, "qk_nope_head_dim": 32, "v_head_dim": 32, "n_group": 1, "topk_group": 1}
GEMMA2 = {**GQA, "model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"]}
GEMMA3 = {**GQA, "model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"]}
BART = {"model_type": "bart", "d_model": 128, "encoder_ffn_dim": 512, "decoder_ffn_dim": 512,
        "encoder_attention_heads": 4, "decoder_attention_heads": 4, "encoder_layers": 2, "decoder_layers": 2,
        "vocab_size": 1000, "max_position_embeddings": 128, "architectures": ["BartForConditionalGeneration"]}
LLAMA = {"model_type": "llama", "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 344, "vocab_size": 1000,
         "architectures": ["LlamaForCausalLM"]}


def case(name, config, attn, dtype, b=4, s=64, t=None, **extra):
    return {"name": name, "config": {**config, **extra}, "attn": attn, "dtype": dtype, "b": b, "s": s, "t": t}


CASES = [
    case("bert MLM eager fp32", BERT, "eager", "fp32", architectures=["BertForMaskedLM"]),
    case("bert MLM eager bf16", BERT, "eager", "bf16", architectures=["BertForMaskedLM"]),
    case("bert classifier sdpa bf16", BERT, "sdpa", "bf16", architectures=["BertForSequenceClassification"],
         attention_probs_dropout_prob=0.0),
    case("t5 eager fp32", T5, "eager", "fp32", t=32),
    case("t5 eager bf16", T5, "eager", "bf16", t=32),
    case("t5 gated-gelu eager bf16", T5, "eager", "bf16", t=32, feed_forward_proj="gated-gelu"),
    case("t5 eager bf16 no dropout", T5, "eager", "bf16", t=48, dropout_rate=0.0),
    case("bart eager bf16", BART, "eager", "bf16", t=32),
    case("blenderbot eager bf16 all dropouts", BART, "eager", "bf16", t=48, model_type="blenderbot",
         architectures=["BlenderbotForConditionalGeneration"], attention_dropout=0.1, activation_dropout=0.1),
    case("qwen3 sdpa bf16", QWEN3, "sdpa", "bf16"),
    case("qwen3_moe sdpa bf16", QWEN3_MOE, "sdpa", "bf16"),
    case("qwen2_moe sdpa bf16", QWEN2_MOE, "sdpa", "bf16"),
    case("mixtral sdpa bf16", MIXTRAL, "sdpa", "bf16"),
    case("gpt_oss eager bf16", GPT_OSS, "eager", "bf16"),  # attention sinks: eager or FlashAttention 3 only
    case("phi sdpa bf16", PHI, "sdpa", "bf16"),  # attention and MLP in parallel on one norm
    case("gptj sdpa bf16", GPTJ, "sdpa", "bf16"),  # attention and MLP in parallel on one norm
    case("mpt eager bf16", MPT, "eager", "bf16"),  # eager only; its softmax in fp32
    # latent attention (eager: the CPU's SDPA takes its math path for unequal q/k and v head widths)
    case("deepseek_v3 eager bf16", DEEPSEEK_V3, "eager", "bf16"),
    case("gemma2 eager bf16", GEMMA2, "eager", "bf16"),  # transformers runs Gemma 2 eager or FlashAttention only
    case("gemma3 eager bf16", GEMMA3, "eager", "bf16"),
    case("llama eager bf16", LLAMA, "eager", "bf16"),
    case("llama sdpa fp32", LLAMA, "sdpa", "fp32"),
    case("llama sdpa bf16", LLAMA, "sdpa", "bf16", b=2, s=96),
]
QUICK = ("bert MLM eager bf16", "t5 eager bf16", "bart eager bf16", "qwen3_moe sdpa bf16", "gemma2 eager bf16",
         "gemma3 eager bf16", "llama sdpa bf16")


# ----------------------------------------------------------------------------- measurement


@contextlib.contextmanager
def dropout_as_on_cuda():
    """F.dropout as at::dropout runs on CUDA (native_dropout, bool mask), restored on exit."""
    import torch
    import torch.nn.functional as F

    original = F.dropout

    def dropout(input, p=0.5, training=True, inplace=False):
        if training and 0 < p < 1 and input.numel():
            return torch.native_dropout(input, p, True)[0]
        return original(input, p, training, inplace)

    F.dropout = dropout
    try:
        yield
    finally:
        F.dropout = original


def build(c: dict):
    import torch
    import transformers

    config = dict(c["config"])
    arch = config.pop("architectures", None)
    kind = config.pop("model_type")
    cls_config = transformers.AutoConfig.for_model(kind, **config, attn_implementation=c["attn"])
    if arch:
        model = getattr(transformers, arch[0])(cls_config)
    else:
        model = transformers.AutoModelForCausalLM.from_config(cls_config)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[c["dtype"]]
    return model.to(dtype).train()


def layer_modules(model) -> list[tuple[str, object]]:
    if hasattr(model, "model") and hasattr(model.model, "encoder") and hasattr(model.model, "decoder"):  # BART-like
        stacks = model.model
        return ([(f"encoder layer {i}", m) for i, m in enumerate(stacks.encoder.layers)]
                + [(f"decoder layer {i}", m) for i, m in enumerate(stacks.decoder.layers)])
    if hasattr(model, "encoder") and hasattr(model, "decoder"):  # T5
        return ([(f"encoder layer {i}", m) for i, m in enumerate(model.encoder.block)]
                + [(f"decoder layer {i}", m) for i, m in enumerate(model.decoder.block)])
    base = getattr(model, "bert", None) or getattr(model, "model", None) or getattr(model, "transformer", None)
    if hasattr(base, "encoder"):
        layers = base.encoder.layer
    else:  # LlamaModel & co.: layers; GPT-J: h; MPT: blocks
        layers = next(getattr(base, name) for name in ("layers", "h", "blocks") if hasattr(base, name))
    return [(f"layer {i}", m) for i, m in enumerate(layers)]


def saved_by_part(model, parts, run, outside: str = "outside the layers") -> dict[str, int]:
    """Run ``run()`` under saved_tensors_hooks and return the bytes autograd saves for backward, each storage once
    (``model``'s parameters left out), by the part whose forward saved it: ``parts`` are (name, module) pairs, the
    rest is ``outside`` (also used by calibrate_vision.py)."""
    from torch.autograd.graph import saved_tensors_hooks

    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    where = [outside]

    def enter(name):
        def hook(module, *args):
            where[0] = name
        return hook

    for name, module in parts:
        module.register_forward_pre_hook(enter(name))
        module.register_forward_hook(enter(outside))
    seen: dict[int, tuple[str, int]] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        ptr = storage.data_ptr()
        if ptr and ptr not in params and ptr not in seen:
            seen[ptr] = (where[0], storage.nbytes())
        return tensor

    with saved_tensors_hooks(pack, lambda tensor: tensor):
        run()
    by: dict[str, int] = {}
    for name, n in seen.values():
        by[name] = by.get(name, 0) + n
    return by


def measure(c: dict) -> dict:
    import torch

    torch.manual_seed(0)
    model = build(c)
    b, s, t = c["b"], c["s"], c["t"]
    V = c["config"]["vocab_size"]
    ids = torch.randint(1, V, (b, s))
    inputs = {"input_ids": ids, "attention_mask": torch.ones(b, s, dtype=torch.long)}
    if t is not None:
        inputs["labels"] = torch.randint(1, V, (b, t))
    elif "SequenceClassification" in type(model).__name__:
        inputs["labels"] = torch.randint(0, 2, (b,))
    else:
        inputs["labels"] = ids
    outputs = []
    by = saved_by_part(model, layer_modules(model), lambda: outputs.append(model(**inputs)))
    assert outputs[0].loss is not None
    stacks: dict[str, tuple[int, int]] = {}  # stack -> (layers, bytes of its last layer)
    for name in by:
        if name != "outside the layers":
            stack, index = name.rsplit(" ", 1)
            count = max(stacks.get(stack, (0, 0))[0], int(index) + 1)
            stacks[stack] = (count, by.get(f"{stack} {count - 1}", 0))
    return {"by_module": by, "stacks": stacks, "impl": model.config._attn_implementation, "total": sum(by.values())}


# ----------------------------------------------------------------------------- the estimate


def predict(c: dict) -> dict:
    from zeroadvisor.memory.activations import activation_bytes
    from zeroadvisor.model.hf import spec_from_hf_config
    from zeroadvisor.model.spec import TrainingShape

    spec = spec_from_hf_config(c["config"])
    shape = TrainingShape(sequence_length=c["s"], target_length=c["t"], flash_attention=c["attn"] != "eager")
    act = activation_bytes(spec, shape, c["b"], c["dtype"])
    parts = dict(act.parts)
    # autograd keeps the log-probabilities (and the int64 labels); the other two copies exist in backward only
    labels = 8 * c["b"] * (c["t"] or c["s"]) if spec.lm_head else 0
    saved_loss = (act.logits - labels) // 3 + labels
    return {"parts": parts, "logits_peak": act.logits, "saved_loss": saved_loss,
            "total": act.nbytes - act.logits + saved_loss}


def compare(c: dict, measured: dict, predicted: dict) -> dict:
    rows = []
    layers = measured["by_module"]
    for part, estimate in predicted["parts"].items():
        if part == "logits and loss":
            continue
        if part == "outside the layers":
            # what is not repeated per layer: the total less every layer counted as the last of its stack
            # (layer 0 also keeps one-time tensors: T5's relative-position buckets, rotary cos/sin, the encoder
            # output that the decoder's cross-attentions share)
            meas = measured["total"] - sum(n * last for n, last in measured["stacks"].values())
            est = estimate + predicted["saved_loss"]
            label = "outside the layers (incl. the saved log-probabilities)"
        else:
            meas = measured["stacks"][part][1]
            est = estimate
            label = f"{part} (the last)"
        rows.append({"part": label, "estimated": est, "measured": meas, "gap": (est - meas) / meas if meas else None})
    total = {"part": "total saved for backward", "estimated": predicted["total"], "measured": measured["total"],
             "gap": (predicted["total"] - measured["total"]) / measured["total"]}
    rows.append(total)
    return {"name": c["name"], "case": c, "impl": measured["impl"], "rows": rows,
            "loss_peak_estimate": predicted["logits_peak"], "measured_by_module": layers}


# ----------------------------------------------------------------------------- reports


def write(results: list[dict], prefix: Path) -> None:
    prefix.with_suffix(".json").write_text(json.dumps(results, indent=1))
    worst = max(abs(r["gap"]) for res in results for r in res["rows"] if r["gap"] is not None)
    lines = ["# Activations: memory/activations.py against real transformers (CPU)", "",
             ("Generated by `python benchmarks/calibrate_activations.py` (transformers 5.24, torch 2.13). Bytes "
              "that autograd saves for backward in one training forward with labels (`saved_tensors_hooks`, each "
              "storage once, parameters excluded), by layer; dropout routed to CUDA's `native_dropout` (1-byte "
              "masks). gap = (estimate - measured) / measured. Configs: BERT hidden 128, 2 layers, 4 heads, ffn "
              "512, vocab 1000; T5 d_model 128, d_ff 512, 4 heads of 32, 2 + 2 layers, vocab 1000; Llama hidden "
              "128, 2 layers, 4 heads / 2 KV, ffn 344, vocab 1000."), "",
             f"**Max gap: {100 * worst:.2f}%** over {len(results)} cases (bound {100 * BOUND:.0f}%).", "",
             "| case | attention | b × s (target) | part | estimate (bytes) | measured (bytes) | gap |",
             "|---|---|---|---|---:|---:|---:|"]
    for res in results:
        c = res["case"]
        shape = f"{c['b']} × {c['s']}" + (f" ({c['t']})" if c["t"] else "")
        lines += [f"| {res['name']} | {res['impl']} | {shape} | {r['part']} | {r['estimated']:,} | "
                  f"{r['measured']:,} | {100 * r['gap']:+.2f}% |" for r in res["rows"]]
    lines += ["", NOTES]
    prefix.with_suffix(".md").write_text("\n".join(lines) + "\n")


NOTES = """\
## What the measurement confirms (each is a term of memory/activations.py)

* BERT (post-LN, GeLU, dropout 0.1) keeps exactly Korthikanti et al.'s per-layer set: the QKV input,
  Q, K, V, the softmax output, the attention dropout mask and its output, the out-projection input,
  two 1-byte dropout masks, the two LayerNorm inputs, the MLP input, the GeLU input and output; plus
  each LayerNorm's mean and rstd. The softmax is kept in the model dtype. The MLM head's transform
  (dense, GeLU, LayerNorm) keeps three more h-wide tensors per token.
* T5LayerNorm keeps more than a LayerNorm: the fp32 copy of its input, the input itself (it is
  multiplied un-upcast), the rsqrt and the normalised tensor: 8·h + 4 bytes per token in fp32 and in
  16 bits. T5's ReLU keeps its output, which is also what the down projection keeps when dropout is 0;
  with dropout T5DenseActDense adds an f-wide mask and the dropped tensor. "gated-gelu" runs
  NewGELUActivation, written out in Python: it keeps four f-wide tensors where a torch GeLU keeps one.
* T5's decoder layers run cross-attention: queries over the target, keys and values over the source
  (eager attention keeps the a·t·s scores), and all of them read one tensor, the encoder output. Each
  stack looks up int64 relative-position buckets (s × s) once and drops out after its final norm.
* LlamaRMSNorm keeps its input upcast to fp32, the rsqrt and the normalised tensor in the model dtype.
  Llama's eager attention takes the softmax in fp32 and keeps that and the cast probabilities; with GQA
  `repeat_kv` expands K and V to every query head. With SDPA the kernel keeps q, k, v (K and V at the
  KV width), its output and the fp32 log-sum-exp; its output is laid out (b, s, a, d), so the
  transposed, reshaped out-projection input is the same storage.
* The loss: Llama (`loss_function`, ForCausalLMLoss) keeps fp32 log-probabilities; BERT's MLM head and
  T5 (`nn.CrossEntropyLoss` on the logits) keep them in the model dtype; nll_loss keeps the int64 labels.

Not modelled (the remaining gaps, all outside the layers): rotary cos/sin (Llama), BERT's token-type
ids and position-id buffer, the loss scalar. LayerNorm statistics: on CUDA native_layer_norm keeps mean
and rstd in fp32 (the estimate's 8 bytes per token), on CPU in the input dtype (4 bytes in bf16): the
+0.14 % of the bf16 BERT layers.

Not measurable on CPU, so not in this table: the GPU's fused attention with attention dropout (flash and
memory-efficient kernels keep an RNG state, not the scores; the CPU falls back to the math kernel) and
T5 with SDPA (the relative-position bias needs a gradient, which the CPU's fused kernel does not give;
on CUDA the memory-efficient kernel keeps the bias it is given, one (b or 1, a, s, s) tensor per layer
when a padding mask is combined into it, transformers sdpa_attention.py create_position_bias_mask).
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(HERE / "activations"), help="output prefix (.md and .json)")
    parser.add_argument("--quick", action="store_true", help="only the cases the oracle test runs")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if not args.quick or c["name"] in QUICK]
    with dropout_as_on_cuda():
        results = [compare(c, measure(c), predict(c)) for c in cases]
    write(results, Path(args.out))
    for res in results:
        print(res["name"], " ".join(f"{r['part'].split(' (')[0]}: {100 * r['gap']:+.2f}%" for r in res["rows"]))
    worst = max(abs(r["gap"]) for res in results for r in res["rows"] if r["gap"] is not None)
    print(f"max gap {100 * worst:.2f}%")
    return 0 if worst <= BOUND else 1


if __name__ == "__main__":
    sys.exit(main())
