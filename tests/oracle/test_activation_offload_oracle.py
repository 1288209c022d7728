"""Oracle: what transformers' checkpoint offload (gradient_checkpointing_kwargs {"offload": true}) moves to the host.

memory/activation_offload.py reads transformers 5.17+: the Trainer pops ``offload`` from the checkpoint arguments and
wraps each checkpointed layer in torch's ``save_on_cpu``, so what that packs is each layer's input and nothing
else. A real Trainer step of a tiny Llama on CPU, with save_on_cpu recording what it packs (pinned memory needs an
accelerator: the recording packs to pageable memory, which changes where the bytes go, not which), is compared with
the estimate's offloaded inputs for the same config.json.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

LAYERS, HIDDEN, BATCH, SEQ = 3, 64, 2, 16


@pytest.mark.oracle
@pytest.mark.parametrize("switch, kwargs", [("gradient_checkpointing", "gradient_checkpointing_kwargs"),
                                            ("activation_checkpointing", "activation_checkpointing_kwargs")])  # 5.23+
def test_the_trainer_offloads_one_input_per_layer(tmp_path, monkeypatch, switch, kwargs):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments, modeling_utils

    packed: list[tuple[tuple[int, ...], int]] = []

    class Recording(modeling_utils.save_on_cpu):  # type: ignore[misc,name-defined]
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(pin_memory=False, device_type=str(kwargs.get("device_type", "cpu")))
            pack = self.pack_hook

            def record(tensor: torch.Tensor) -> object:
                packed.append((tuple(tensor.shape), tensor.element_size()))
                return pack(tensor)

            self.pack_hook = record

    monkeypatch.setattr(modeling_utils, "save_on_cpu", Recording)
    config = LlamaConfig(hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=LAYERS,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=256)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    ids = torch.randint(0, 256, (SEQ,))
    given = {switch: True, kwargs: {"offload": True}}
    args = TrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True, report_to=[], max_steps=1,
                             per_device_train_batch_size=BATCH, save_strategy="no", logging_strategy="no", **given)
    Trainer(model=model, args=args, train_dataset=[{"input_ids": ids, "labels": ids}] * BATCH).train()

    from zeroadvisor.config.training_args import from_mapping
    from zeroadvisor.memory.activations import activation_bytes
    from zeroadvisor.model.hf import spec_from_hf_config
    from zeroadvisor.model.spec import TrainingShape
    from zeroadvisor.vocab import Checkpointing

    reading = from_mapping(given, "args.json")
    assert reading.activation_offload is not None
    (tmp_path / "config.json").write_text(json.dumps(config.to_dict()))
    spec = spec_from_hf_config(config.to_dict())
    shape = TrainingShape(sequence_length=SEQ, activation_checkpointing=Checkpointing.FULL,
                          activation_offload=reading.activation_offload)
    estimate = activation_bytes(spec, shape, BATCH, "fp32")  # the CPU run trains in fp32
    assert estimate.offloaded == ((4 * BATCH * SEQ * HIDDEN, LAYERS),)
    # one pack per layer, of exactly the layer's input, and nothing else
    assert packed == [((BATCH, SEQ, HIDDEN), 4)] * LAYERS


@pytest.mark.oracle
@pytest.mark.parametrize("every", [1, 2, 3, 5])
def test_every_n_layers_checkpoints_the_layers_the_estimate_counts(every):
    # transformers 5.16+ _set_gradient_checkpointing marks GradientCheckpointingLayer i when i % every_n_layers == 0
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.modeling_layers import GradientCheckpointingLayer

    from zeroadvisor.memory.activations import _checkpointed

    layers = 7
    config = LlamaConfig(hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=256)
    model = LlamaForCausalLM(config)
    model.activation_checkpointing_enable(every_n_layers=every)
    marked = [m.gradient_checkpointing for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    assert len(marked) == layers
    assert sum(marked) == _checkpointed(0, layers, every)
    assert marked == [i % every == 0 for i in range(layers)]
