"""Activation offloading (memory/activation_offload.py): the checkpointed layer inputs in host memory.

Hand calculations against memory/activations.py, the readers of each trainer's switch
(config/training_args.py), and the command line from the files users write.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config.training_args import TrainerInputError, from_mapping
from zeroadvisor.memory.activation_offload import OFFLOADERS
from zeroadvisor.memory.activations import DEFAULT_FACTS, activation_bytes
from zeroadvisor.memory.host import offloaded_input_terms, power_of_two_ceil
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.vocab import ActivationOffload, Checkpointing

# a Llama-like stack at a long sequence: the layer inputs are a large share of the activations
L, H, S = 32, 4096, 32_768
SPEC = ModelSpec(parameters=7_000_000_000, num_layers=L, hidden_size=H, num_attention_heads=32,
                 num_key_value_heads=8, intermediate_size=14_336, gated_mlp=True, vocab_size=32_000)
INPUT = 2 * S * H  # one layer's input, bf16, micro batch 1


def _act(offload: ActivationOffload, checkpointing: Checkpointing = Checkpointing.FULL, spec: ModelSpec = SPEC):
    shape = TrainingShape(sequence_length=S, activation_checkpointing=checkpointing, flash_attention=True,
                          activation_offload=offload)
    return activation_bytes(spec, shape, 1, "bf16")


def test_save_on_cpu_takes_every_layer_input_off_the_gpu():
    kept, moved = _act(ActivationOffload.NONE), _act(ActivationOffload.SAVE_ON_CPU)
    # the loss peak and a layer's recompute are unchanged; all L inputs leave (the recomputed layer's own input
    # comes back as part of its recompute)
    assert kept.nbytes - moved.nbytes == L * INPUT
    assert moved.offloaded == ((INPUT, L),)
    assert kept.offloaded == ()


def test_trl_keeps_one_input_beside_the_recompute_and_axolotl_two_at_the_loss():
    small_vocab = dataclasses.replace(SPEC, vocab_size=8_000)
    none = _act(ActivationOffload.NONE, spec=small_vocab)
    trl = _act(ActivationOffload.TRL, spec=small_vocab)
    assert OFFLOADERS[ActivationOffload.TRL].at_recompute == 1
    # with a small vocabulary a layer's recompute is the peak: TRL's delayed free keeps one more input there
    assert none.head_share == 0
    assert none.nbytes - trl.nbytes == (L - 1) * INPUT
    # a large vocabulary puts the peak at the loss, where axolotl's forward stash still holds two layer inputs
    spec = dataclasses.replace(SPEC, vocab_size=152_064)
    hidden = _act(ActivationOffload.HIDDEN_STATES, spec=spec)
    save = _act(ActivationOffload.SAVE_ON_CPU, spec=spec)
    assert hidden.nbytes - save.nbytes == 2 * INPUT


def test_no_offloader_moves_anything_without_full_recomputation():
    for checkpointing in (Checkpointing.NONE, Checkpointing.SELECTIVE):
        for mode in ActivationOffload:
            assert _act(mode, checkpointing).nbytes == _act(ActivationOffload.NONE, checkpointing).nbytes
    assert any("offloads every saved tensor" in n for n in _act(ActivationOffload.TRL, Checkpointing.NONE).notes)


def test_host_holds_each_input_as_a_pinned_power_of_two_block():
    odd = 2 * 3_000 * 3_584  # a Qwen2.5-7B layer input at 3,000 tokens: 20.5 MiB, held as 32 MiB
    [term] = offloaded_input_terms(ActivationOffload.SAVE_ON_CPU, ((odd, 28),))
    assert term.nbytes == 28 * power_of_two_ceil(odd) == 28 * 32 * 2**20
    assert term.device == "cpu" and term.key == "offloaded_layer_inputs"
    assert offloaded_input_terms(ActivationOffload.SAVE_ON_CPU, ()) == []


# --- the trainers' switches ----------------------------------------------------------------------------------


@pytest.mark.parametrize("data, mode, checkpointing", [
    # transformers 5.17+: TrainingArguments.gradient_checkpointing_kwargs, a mapping or the command line's JSON
    ({"gradient_checkpointing": True, "gradient_checkpointing_kwargs": {"offload": True}},
     ActivationOffload.SAVE_ON_CPU, True),
    ({"gradient_checkpointing": True, "gradient_checkpointing_kwargs": '{"offload": true}'},
     ActivationOffload.SAVE_ON_CPU, True),
    ({"gradient_checkpointing": True, "gradient_checkpointing_kwargs": {"use_reentrant": False}}, None, True),
    # 5.23+: activation_checkpointing_kwargs, read before its deprecated alias
    ({"activation_checkpointing": True, "activation_checkpointing_kwargs": {"offload": True},
      "gradient_checkpointing_kwargs": {"offload": False}}, ActivationOffload.SAVE_ON_CPU, True),
    # TRL's activation_offloading, with or without checkpointing
    ({"gradient_checkpointing": True, "activation_offloading": True}, ActivationOffload.TRL, True),
    ({"activation_offloading": True}, ActivationOffload.TRL, None),
    # axolotl 0.18: hidden_states; TRL's offloader over the recompute for a full fine-tune, instead of it for an
    # adapter; gradient_checkpointing: offload turns activation_offloading on
    ({"base_model": "m", "gradient_checkpointing": True, "activation_offloading": "hidden_states"},
     ActivationOffload.HIDDEN_STATES, True),
    ({"base_model": "m", "gradient_checkpointing": True, "activation_offloading": True}, ActivationOffload.TRL, True),
    ({"base_model": "m", "adapter": "lora", "lora_r": 16, "lora_target_linear": True, "gradient_checkpointing": True,
      "activation_offloading": True},
     ActivationOffload.TRL, False),
    ({"base_model": "m", "gradient_checkpointing": "offload"}, ActivationOffload.TRL, True),
    # LLaMA-Factory: unsloth's offloaded checkpoint
    ({"cutoff_len": 1024, "use_unsloth_gc": True}, ActivationOffload.SAVE_ON_CPU, True),
    ({"cutoff_len": 1024, "use_unsloth_gc": False}, None, True),
])
def test_each_trainer_switch_is_read(data, mode, checkpointing):
    args = from_mapping(data, "train.yaml")
    assert args.activation_offload == mode
    assert args.checkpointing is checkpointing
    if mode is not None:
        assert "train.yaml" in args.activation_offload_from


@pytest.mark.parametrize("value, message", [
    ("{offload: true", "gradient_checkpointing_kwargs in train.yaml: expected a JSON object"),
    ("[" * 100_000, "gradient_checkpointing_kwargs in train.yaml: expected a JSON object"),
    ([1, 2], "expected a mapping of checkpoint arguments"),
])
def test_bad_checkpoint_arguments_are_one_line_errors(value, message):
    with pytest.raises(TrainerInputError, match=message) as err:
        from_mapping({"gradient_checkpointing_kwargs": value}, "train.yaml")
    assert "\n" not in str(err.value)


def test_an_unknown_axolotl_offloader_is_refused():
    with pytest.raises(TrainerInputError, match=r"activation_offloading in train\.yaml"):
        from_mapping({"base_model": "m", "activation_offloading": "gpu"}, "train.yaml")


# --- the command line ----------------------------------------------------------------------------------------

Z3 = {"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto",
      "gradient_accumulation_steps": "auto"}
MODEL = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H, "intermediate_size": 14_336,
         "num_hidden_layers": L, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32_000,
         "torch_dtype": "bfloat16", "tie_word_embeddings": False}


def _configured(result):
    assert result.returncode in (0, 1, 5), result.stderr
    stages = json.loads(result.stdout)["estimate"]["stages"]
    return next(st for st in stages if st["configured"])


def test_a_trl_file_with_offload_lowers_the_peak_and_fills_the_host(cli, tmp_path):
    (tmp_path / "ds.json").write_text(json.dumps(Z3))
    (tmp_path / "config.json").write_text(json.dumps(MODEL))
    base = {"model_name_or_path": str(tmp_path), "max_length": S, "packing": True, "bf16": True,
            "gradient_checkpointing": True, "per_device_train_batch_size": 1}
    (tmp_path / "plain.yaml").write_text(json.dumps(base))
    (tmp_path / "offload.yaml").write_text(json.dumps({**base, "gradient_checkpointing_kwargs": {"offload": True}}))
    args = ("check", str(tmp_path / "ds.json"), "--gpus", "8", "--gpu", "H100-SXM5-80GB", "--format", "json")
    plain = _configured(cli(*args, "--training-args", str(tmp_path / "plain.yaml")))
    off_run = cli(*args, "--training-args", str(tmp_path / "offload.yaml"))
    offloaded = _configured(off_run)
    assert "activation offload save_on_cpu from offload in gradient_checkpointing_kwargs" in off_run.stderr
    def activations(st):
        return sum(t["bytes"] for t in st["terms"] if t["key"] == "activations" and t["device"] == "gpu")

    assert activations(plain) - activations(offloaded) == L * INPUT
    assert offloaded["peak_gpu"] < plain["peak_gpu"] - L * INPUT  # the allocator's allowance on them goes too
    [term] = [t for t in offloaded["terms"] if t["key"] == "offloaded_layer_inputs"]
    assert term["device"] == "cpu" and term["bytes"] == L * INPUT  # 256 MiB each: already a power of two
    assert offloaded["train_host_per_node"] - plain["train_host_per_node"] == 8 * L * INPUT
    # the flag says the same as the file
    flag = _configured(cli(*args, "--training-args", str(tmp_path / "plain.yaml"), "--activation-offload",
                           "save_on_cpu"))
    assert flag["peak_gpu"] == offloaded["peak_gpu"]


def test_trl_offload_without_checkpointing_leaves_a_does_not_fit_unknown(cli, tmp_path):
    (tmp_path / "ds.json").write_text(json.dumps(Z3))
    (tmp_path / "config.json").write_text(json.dumps(MODEL))
    (tmp_path / "sft.yaml").write_text(json.dumps({
        "model_name_or_path": str(tmp_path), "max_length": S, "packing": True, "bf16": True,
        "activation_offloading": True, "per_device_train_batch_size": 1}))
    args = ("check", str(tmp_path / "ds.json"), "--gpus", "8", "--gpu", "H100-SXM5-80GB",
            "--training-args", str(tmp_path / "sft.yaml"), "--activation-checkpointing", "none")
    st = _configured(cli(*args, "--format", "json"))
    assert st["counted_verdict"] == "does-not-fit"
    assert st["verdict"] == "unknown" and "activation_offload" in st["uncounted"]
    text = cli(*args).stdout
    assert "unknown (what is counted does not fit; what is not counted can only lower it)" in text
    assert "what is counted does not fit" in text and "may fit with what is not counted" in text


def test_a_bad_flag_value_is_a_usage_error(cli, tmp_path):
    (tmp_path / "ds.json").write_text(json.dumps(Z3))
    result = cli("check", str(tmp_path / "ds.json"), "--params", "7B", "--gpus", "8", "--activation-offload", "gpu")
    assert result.returncode == 2
    assert "--activation-offload" in result.stderr and "Traceback" not in result.stderr


# --- checkpointing every n-th layer (transformers 5.16+ every_n_layers) -------------------------------------------


def test_checkpointing_every_nth_layer_keeps_the_others_whole():
    from zeroadvisor.memory.activations import _checkpointed

    # modeling_utils.py _set_gradient_checkpointing: layer_index % every_n_layers == 0
    assert [_checkpointed(0, 32, n) for n in (1, 2, 3, 32, 33)] == [32, 16, 11, 1, 1]
    assert _checkpointed(5, 4, 3) == 1  # indices 5..8: only 6
    small_vocab = dataclasses.replace(SPEC, vocab_size=8_000)  # a layer's recompute is the peak
    whole_layer = _act(ActivationOffload.NONE, Checkpointing.NONE, small_vocab).per_layer

    def every(n: int):
        shape = TrainingShape(sequence_length=S, activation_checkpointing=Checkpointing.FULL, flash_attention=True,
                              checkpoint_every=n)
        return activation_bytes(small_vocab, shape, 1, "bf16")

    # 16 of the 32 layers keep their whole activations instead of their input
    assert every(2).nbytes - every(1).nbytes == 16 * (whole_layer - INPUT)
    # with the checkpointed inputs offloaded, the unchecked layers stay on the GPU
    offloaded = activation_bytes(small_vocab, TrainingShape(
        sequence_length=S, activation_checkpointing=Checkpointing.FULL, flash_attention=True, checkpoint_every=2,
        activation_offload=ActivationOffload.SAVE_ON_CPU), 1, "bf16")
    assert every(2).nbytes - offloaded.nbytes == 16 * INPUT
    assert offloaded.offloaded == ((INPUT, 16),)


def test_every_n_layers_is_read_from_the_checkpoint_arguments():
    args = from_mapping({"gradient_checkpointing": True,
                         "gradient_checkpointing_kwargs": {"every_n_layers": 4, "use_reentrant": False}}, "train.yaml")
    assert args.checkpoint_every == 4
    assert "every_n_layers in gradient_checkpointing_kwargs" in args.checkpoint_every_from
    assert from_mapping({"gradient_checkpointing": True}, "train.yaml").checkpoint_every is None
    for bad in (0, -1, "two", True):
        with pytest.raises(TrainerInputError, match="every_n_layers in gradient_checkpointing_kwargs"):
            from_mapping({"gradient_checkpointing_kwargs": {"every_n_layers": bad}}, "train.yaml")


def test_every_n_layers_in_a_file_raises_the_peak_as_the_flag_does(cli, tmp_path):
    (tmp_path / "ds.json").write_text(json.dumps(Z3))
    (tmp_path / "config.json").write_text(json.dumps(MODEL))
    base = {"model_name_or_path": str(tmp_path), "max_length": 8192, "packing": True, "bf16": True,
            "gradient_checkpointing": True, "per_device_train_batch_size": 1}
    (tmp_path / "all.yaml").write_text(json.dumps(base))
    (tmp_path / "half.yaml").write_text(json.dumps({**base, "gradient_checkpointing_kwargs": '{"every_n_layers": 2}'}))
    args = ("check", str(tmp_path / "ds.json"), "--gpus", "8", "--gpu", "H100-SXM5-80GB", "--format", "json")
    every = _configured(cli(*args, "--training-args", str(tmp_path / "all.yaml")))
    half_run = cli(*args, "--training-args", str(tmp_path / "half.yaml"))
    assert "every 2 layer(s) checkpointed from every_n_layers in gradient_checkpointing_kwargs" in half_run.stderr
    half = _configured(half_run)
    assert half["peak_gpu"] > every["peak_gpu"]
    flag = _configured(cli(*args, "--training-args", str(tmp_path / "all.yaml"), "--checkpoint-every", "2"))
    assert flag["peak_gpu"] == half["peak_gpu"]


# --- axolotl's TiledMLP (ALST) -----------------------------------------------------------------------------------


def test_tiled_mlp_keeps_its_input_and_one_shard_during_the_recompute():
    from zeroadvisor.memory.activations import _dimensions, mlp_bytes, tiled_mlp_bytes, tiled_mlp_shards

    small_vocab = dataclasses.replace(SPEC, vocab_size=1_000)  # a layer's recompute is the peak, tiled or not

    def run(**kw):
        shape = TrainingShape(sequence_length=S, activation_checkpointing=Checkpointing.FULL, flash_attention=True,
                              **kw)
        return activation_bytes(small_vocab, shape, 1, "bf16")

    d = _dimensions(small_vocab, 2, H, [])
    facts = DEFAULT_FACTS  # no hf_config: Korthikanti's layer
    # axolotl 0.18's default: ceil(seqlen / 32768) shards: 32,768 tokens are one shard
    assert tiled_mlp_shards(TrainingShape(tiled_mlp=True), S) == 1
    assert tiled_mlp_shards(TrainingShape(tiled_mlp=True), 500_000) == 16
    assert tiled_mlp_shards(TrainingShape(tiled_mlp=True, tiled_mlp_shards=4), 500_000) == 4
    # the input x and x_grad (2 x e·h per token) and one shard's MLP, against the whole MLP
    assert tiled_mlp_bytes(d, facts, S, 1, 4) == 2 * INPUT + mlp_bytes(d, facts, S // 4)
    plain, tiled = run(), run(tiled_mlp=True, tiled_mlp_shards=4)
    assert plain.head_share == tiled.head_share == 0
    assert plain.nbytes - tiled.nbytes == mlp_bytes(d, facts, S) - tiled_mlp_bytes(d, facts, S, 1, 4)
    assert any("TiledMLP: each MLP keeps its input" in n for n in tiled.notes)
    # without full recomputation it is not followed: counted whole, and said
    loose = activation_bytes(small_vocab, TrainingShape(sequence_length=S, activation_checkpointing=Checkpointing.NONE,
                                                        flash_attention=True, tiled_mlp=True), 1, "bf16")
    assert loose.nbytes == _act(ActivationOffload.NONE, Checkpointing.NONE, small_vocab).nbytes
    assert any("TiledMLP not costed" in n for n in loose.notes)


@pytest.mark.parametrize("data, tiled, shards", [
    ({"base_model": "m", "tiled_mlp": True}, True, None),
    ({"base_model": "m", "tiled_mlp": True, "tiled_mlp_num_shards": 8}, True, 8),
    ({"base_model": "m", "tiled_mlp": False, "tiled_mlp_num_shards": 8}, False, None),
    ({"base_model": "m"}, None, None),
    ({"tiled_mlp": True}, None, None),  # not axolotl's file
])
def test_axolotl_tiled_mlp_is_read(data, tiled, shards):
    args = from_mapping(data, "train.yaml")
    assert (args.tiled_mlp, args.tiled_mlp_shards) == (tiled, shards)


def test_a_bad_shard_count_is_a_one_line_error():
    for bad in (0, "many", True):
        with pytest.raises(TrainerInputError, match=r"tiled_mlp_num_shards in train\.yaml"):
            from_mapping({"base_model": "m", "tiled_mlp": True, "tiled_mlp_num_shards": bad}, "train.yaml")


def test_no_more_inputs_are_in_flight_than_layers_are_checkpointed():
    # with every_n_layers 32 one layer of 32 is checkpointed: axolotl's forward stash holds that one input, not two
    spec = dataclasses.replace(SPEC, vocab_size=152_064)  # the loss is the peak

    def run(mode: ActivationOffload):
        return activation_bytes(spec, TrainingShape(sequence_length=S, activation_checkpointing=Checkpointing.FULL,
                                                    flash_attention=True, checkpoint_every=32,
                                                    activation_offload=mode), 1, "bf16")

    assert run(ActivationOffload.HIDDEN_STATES).nbytes - run(ActivationOffload.SAVE_ON_CPU).nbytes == 1 * INPUT
