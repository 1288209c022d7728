"""Oracle: LoRA's dropout (memory/activations.py _lora_dropout) against what peft and transformers save (CPU).

A small Llama wrapped by peft 0.21's get_peft_model (all-linear, r 4) runs one training forward under
saved_tensors_hooks with lora_dropout 0.1 and with 0; what each layer keeps more with the dropout is set against
the estimate's difference for the same config and LoRA settings. Dropout runs as on CUDA (native_dropout, a bool
mask: benchmarks/calibrate_activations.py dropout_as_on_cuda).
"""

from __future__ import annotations

import pytest

from conftest import load_script

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")


def _measured_layers(dropout: float, targets: object = "all-linear") -> dict[str, int]:
    import torch
    from peft import LoraConfig, get_peft_model
    from torch.autograd.graph import saved_tensors_hooks

    cal = load_script("benchmarks/calibrate_activations.py", "zeroadvisor_calibrate_activations")
    c = cal.case("llama sdpa bf16", cal.LLAMA, "sdpa", "bf16", b=2, s=48)
    torch.manual_seed(0)
    base = cal.build(c)
    model = get_peft_model(base, LoraConfig(r=4, target_modules=targets, lora_dropout=dropout))
    # DeepSpeed's bf16 engine casts the whole module, adapters included (peft makes them fp32 on a bf16 base)
    model = model.to(torch.bfloat16).train()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    where = ["outside"]
    for name, module in cal.layer_modules(base):
        module.register_forward_pre_hook(lambda m, *a, n=name: where.__setitem__(0, n))
        module.register_forward_hook(lambda m, *a: where.__setitem__(0, "outside"))
    seen: dict[int, tuple[str, int]] = {}
    alive = []  # every packed tensor, so that no storage address is freed and reused during the forward

    def pack(tensor):
        alive.append(tensor)
        storage = tensor.untyped_storage()
        ptr = storage.data_ptr()
        # the rotary cos/sin (1, 1, s, head_dim) are one pair for all layers, kept by the first layer whose q and k
        # need a gradient (not layer 0 when no attention module there is adapted): outside the layers
        rotary = tensor.dim() == 4 and tensor.shape[0] == 1 and tensor.shape[1] == 1
        if ptr and ptr not in params and ptr not in seen and not rotary:
            seen[ptr] = (where[0], storage.nbytes())
        return tensor

    ids = torch.randint(1, c["config"]["vocab_size"], (c["b"], c["s"]))
    with cal.dropout_as_on_cuda(), saved_tensors_hooks(pack, lambda tensor: tensor):
        out = model(input_ids=ids, labels=ids)
    assert out.loss is not None
    by: dict[str, int] = {}
    for name, n in seen.values():
        by[name] = by.get(name, 0) + n
    return by


def _predicted_layer(dropout: float, targets: object = "all-linear") -> int:
    from zeroadvisor.memory.activations import activation_bytes
    from zeroadvisor.model.description import peft_settings
    from zeroadvisor.model.hf import spec_from_hf_config
    from zeroadvisor.model.peft import apply
    from zeroadvisor.model.spec import TrainingShape

    cal = load_script("benchmarks/calibrate_activations.py", "zeroadvisor_calibrate_activations")
    spec = spec_from_hf_config(cal.LLAMA)
    block = {"method": "lora", "r": 4, "target_modules": targets, "lora_dropout": dropout}
    spec = apply(spec, spec.layout or (), peft_settings(block))
    act = activation_bytes(spec, TrainingShape(sequence_length=48, flash_attention=True), 2, "bf16")
    return dict(act.parts)["layer"]


@pytest.mark.oracle
def test_lora_dropout_keeps_what_the_estimate_adds_per_layer():
    with_dropout, without = _measured_layers(0.1), _measured_layers(0.0)
    predicted = _predicted_layer(0.1) - _predicted_layer(0.0)
    # per token: q, k, v, o, gate, up take 128 features, down 344 -> 6 x 128 + 344 = 1112 inputs, each a bf16
    # copy and a bool mask (3 B); the norms' outputs (2 x 128) and the down input (344), which only lora_A kept
    # without the dropout, are kept by none (2 B each): 3 x 1112 - 2 x 600 = 2136 B per token, 96 tokens
    assert predicted == (3 * 1112 - 2 * 600) * 2 * 48
    assert with_dropout["layer 1"] - without["layer 1"] == pytest.approx(predicted, rel=0.01)
    # layer 0 reads the frozen embedding: its q, k and v inputs need no gradient, so their masks are not kept
    assert with_dropout["layer 0"] - without["layer 0"] == pytest.approx(predicted - 3 * 128 * 2 * 48, rel=0.01)


@pytest.mark.oracle
@pytest.mark.parametrize(("targets", "dropout"), [("all-linear", 0.0), (["q_proj", "v_proj"], 0.0),
                                                  (["q_proj", "v_proj"], 0.1), (["down_proj"], 0.0)])
def test_a_lora_layer_keeps_what_the_estimate_counts(targets, dropout):
    # a frozen base keeps no input of its own: the inputs of modules without an adapter are kept by none (with q and
    # v adapted, the MLP's input and the down input), and with the dropout neither are the adapted ones'
    measured = _measured_layers(dropout, targets)["layer 1"]
    # what LoRA's own matmuls keep beyond that (lora_B's r-wide input, 2 B x 4 per adapted module and token) is
    # under 1 % of the layer
    assert measured == pytest.approx(_predicted_layer(dropout, targets), rel=0.01)
