"""LoRA/QLoRA counts (zeroadvisor.model.peft) against hand calculations.

The formulas: peft's LoRA adds lora_A (r x fan_in) and lora_B (fan_out x r) to each targeted Linear
(tuners/lora/layer.py update_layer); bitsandbytes 4-bit stores (n + 1) // 2 bytes of packed data and
one fp32 absmax per 64 elements (functional.py quantize_4bit) plus the 16-entry fp32 code; LLM.int8
stores 1 byte per element and one fp32 scale per output row. tests/oracle/test_peft_oracle.py checks
the counts against peft itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zeroadvisor.model.description import load_description
from zeroadvisor.model.errors import ModelError
from zeroadvisor.model.hf import layout_from_hf_config, spec_from_hf_config
from zeroadvisor.model.peft import PeftSettings, apply, count, quantized_bytes

LLAMA_2_7B = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 32000, "hidden_size": 4096,
    "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
}
BASE_7B = 6_738_415_616  # Llama-2-7B's parameter count (transformers' sum of numel)


def _count(config, settings):
    spec = spec_from_hf_config(config)
    return count(layout_from_hf_config(config)[2], settings, spec)


def test_issue_example_llama_2_7b_r16_q_v():
    c = _count(LLAMA_2_7B, PeftSettings(r=16, target_modules=("q_proj", "v_proj")))
    # 32 layers x 2 modules x (4096 x 16 + 16 x 4096)
    assert c.trainable == 32 * 2 * (4096 * 16 + 16 * 4096) == 8_388_608
    assert c.all == BASE_7B + 8_388_608 == 6_746_804_224  # what peft prints as "all params"
    assert c.adapted_modules == 64
    assert sum(numel * n for numel, n in c.trainable_tensors) == c.trainable


def test_all_linear_skips_the_output_head():
    c = _count(LLAMA_2_7B, PeftSettings(r=8))
    # per layer: q,k,v,o (4096 -> 4096) and gate, up (4096 -> 11008), down (11008 -> 4096); lm_head skipped
    per_layer = 4 * 8 * (4096 + 4096) + 3 * 8 * (4096 + 11008)
    assert c.trainable == 32 * per_layer == 19_988_480


def test_modules_to_save_counts_a_trainable_copy():
    c = _count(LLAMA_2_7B, PeftSettings(r=16, target_modules=("q_proj", "v_proj"), modules_to_save=("lm_head",)))
    head = 32000 * 4096  # the copy of lm_head (4096 -> 32000, no bias)
    assert c.trainable == 8_388_608 + head
    assert c.all == BASE_7B + 8_388_608 + head  # the original stays, frozen


def test_qlora_4bit_base_bytes():
    spec = spec_from_hf_config(LLAMA_2_7B)
    q = apply(spec, layout_from_hf_config(LLAMA_2_7B)[2],
              PeftSettings(method="qlora", r=16, target_modules=("q_proj", "v_proj")))
    attn, mlp = 4096 * 4096, 4096 * 11008
    assert q.quantized_parameters == 32 * (4 * attn + 3 * mlp) == 6_476_005_376  # embeddings, norms, lm_head stay
    # 4-bit: n/2 bytes + fp32 absmax per 64 + 64 B code, per weight
    per_attn = attn // 2 + 4 * (attn // 64) + 64  # 8,388,608 + 1,048,576 + 64
    per_mlp = mlp // 2 + 4 * (mlp // 64) + 64  # 22,544,384 + 2,818,048 + 64
    assert q.quantized_bytes == 32 * (4 * per_attn + 3 * per_mlp) == 3_642_767_360
    assert q.trainable_parameters == 8_388_608
    assert q.largest_quantized_parameters == mlp


def test_quantized_bytes_double_quant_and_int8():
    n = 4096 * 11008  # 704,512 blocks of 64
    # double quant: uint8 absmax per block + fp32 per 256 blocks (2,752) + fp32 offset + 64 B code
    assert quantized_bytes(4096, 11008, "4bit", True) == n // 2 + 704_512 + 4 * 2_752 + 4 + 64
    # LLM.int8: 1 B/element + fp32 scale per output row
    assert quantized_bytes(4096, 11008, "8bit", False) == n + 4 * 11008
    # odd element count: (n + 1) // 2 packed bytes, ceil(n / 64) blocks
    assert quantized_bytes(3, 5, "4bit", False) == 8 + 4 * 1 + 64


def test_unknown_target_is_an_error():
    with pytest.raises(ModelError, match="matches no module"):
        _count(LLAMA_2_7B, PeftSettings(target_modules=("query",)))
    with pytest.raises(ModelError, match="not a Linear"):
        _count(LLAMA_2_7B, PeftSettings(target_modules=("embed_tokens",)))


def _write(tmp_path: Path, peft: str, hf=True) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_2_7B))
    head = "hf_config: config.json\n" if hf else "parameters: 7B\n"
    path = tmp_path / "model.yaml"
    path.write_text(head + peft)
    return path


def test_description_peft_block(tmp_path):
    path = _write(tmp_path, "peft:\n  method: qlora\n  r: 16\n  target_modules: [q_proj, v_proj]\n")
    spec, _ = load_description(path)
    assert spec.trainable_parameters == 8_388_608
    assert spec.quantized_parameters == 6_476_005_376
    assert spec.parameters == BASE_7B


def test_flags_override_the_description(tmp_path):
    path = _write(tmp_path, "peft:\n  method: lora\n  r: 8\n  target_modules: [q_proj]\n")
    spec, _ = load_description(path, {"r": 16, "target_modules": ["q_proj", "v_proj"]})
    assert spec.trainable_parameters == 8_388_608 and spec.quantized_parameters == 0


@pytest.mark.parametrize("text, message", [
    ("peft:\n  method: dora\n", "peft must be a mapping"),
    ("peft:\n  method: lora\n  r: 0\n", "peft must be a mapping"),
    ("peft:\n  method: lora\n  quantization: 4bit\n", "qlora only"),
    ("peft:\n  method: lora\n  target_modules: [nope]\n", "matches no module"),
])
def test_bad_peft_block_is_one_located_error(tmp_path, text, message):
    with pytest.raises(ModelError, match=message) as err:
        load_description(_write(tmp_path, text))
    assert err.value.line == 3  # the peft: block (its value starts on line 3)


def test_peft_needs_hf_config(tmp_path):
    with pytest.raises(ModelError, match="peft needs hf_config"):
        load_description(_write(tmp_path, "peft:\n  method: lora\n", hf=False))


# ------------------------------------------------------------------ the flags

from cli_run import cli  # noqa: E402,F401 - the fixture


@pytest.mark.parametrize("command", ["estimate", "check"])
def test_flags_give_the_issue_example(cli, tmp_path, command):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_2_7B))
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}}')
    config = [tmp_path / "ds.json"] if command == "estimate" else [tmp_path / "ds.json", "--fail-on", "never"]
    result = cli(command, *config, "--model", tmp_path / "config.json", "--gpus", "2", "--gpu", "H100-SXM5-80GB",
                 "--peft", "lora", "--lora-r", "16", "--lora-target-modules", "q_proj",
                 "--lora-target-modules", "v_proj", "-f", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    model = data["model"] if command == "estimate" else data["estimate"]["model"]
    assert model["trainable_parameters"] == 8_388_608 and model["parameters"] == BASE_7B


def test_peft_flags_with_params_are_a_usage_error(cli):
    result = cli("estimate", "--params", "7B", "--gpus", "2", "--lora-r", "16")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "--model" in result.stderr


def test_text_report_names_the_trainable_parameters(cli, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_2_7B))
    result = cli("estimate", "--model", tmp_path / "config.json", "--gpus", "2", "--peft", "qlora", "--lora-r", "16",
                 "--lora-target-modules", "q_proj,v_proj")
    assert result.returncode == 0, result.stderr
    assert "6,738,415,616 parameters (8,388,608 trainable: QLoRA r=16 on q_proj, v_proj (4bit base))" in result.stdout


def test_lora_dropout_copies_each_adapted_input_per_layer(tmp_path):
    from zeroadvisor.model.description import load_description

    (tmp_path / "config.json").write_text(json.dumps(LLAMA_2_7B))
    (tmp_path / "model.yaml").write_text("hf_config: config.json\nsequence_length: 2048\n"
                                         "peft: {method: lora, lora_dropout: 0.05}\n")
    spec, _ = load_description(tmp_path / "model.yaml")
    h, f, layers = 4096, 11008, 32
    # all-linear: q, k, v, o, gate and up read h features, down f: each drops out its own copy
    assert spec.lora_dropout_inputs == layers * (6 * h + f)
    # the norms' outputs (attention and MLP input) and the down input were kept by lora_A alone
    assert spec.lora_unkept_inputs == layers * (h + h + f)
    assert spec.peft == "LoRA r=8 on all-linear, lora_dropout 0.05"
    (tmp_path / "model.yaml").write_text("hf_config: config.json\npeft: {method: lora, target_modules: [q_proj, "
                                         "v_proj], lora_dropout: 0.1}\n")
    spec, _ = load_description(tmp_path / "model.yaml")
    # with the dropout no layer input is kept: q and v keep their copies, the MLP's readers are frozen
    assert (spec.lora_dropout_inputs, spec.lora_unkept_inputs) == (layers * 2 * h, layers * (h + h + f))
    (tmp_path / "model.yaml").write_text("hf_config: config.json\npeft: {method: lora, target_modules: [q_proj, "
                                         "v_proj]}\n")
    spec, _ = load_description(tmp_path / "model.yaml")
    # without it q and v's lora_A keep the attention's input; the MLP's and the down input nobody keeps
    assert (spec.lora_dropout_inputs, spec.lora_unkept_inputs) == (0, layers * (h + f))
    (tmp_path / "model.yaml").write_text("hf_config: config.json\npeft: {method: lora}\n")
    spec, _ = load_description(tmp_path / "model.yaml")
    assert (spec.lora_dropout_inputs, spec.lora_unkept_inputs) == (0, 0)  # all-linear, peft's default dropout 0


def test_lora_dropout_adds_to_the_activations(cli, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_2_7B))
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}}')

    def activations(*extra: str) -> int:
        result = cli("estimate", tmp_path / "ds.json", "--model", tmp_path / "config.json", "--gpus", "2",
                     "--seq-len", "1024", "--activation-checkpointing", "none", "--peft", "lora", *extra, "-f", "json")
        assert result.returncode == 0, result.stderr
        stage = next(s for s in json.loads(result.stdout)["stages"] if s["configured"])
        return int(stage["per_gpu"]["activations"])

    # per token per layer: (2 + 1) x (6 x 4096 + 11008) - 2 x (2 x 4096 + 11008); 1024 tokens, 32 layers
    per_token_layer = 3 * (6 * 4096 + 11008) - 2 * (2 * 4096 + 11008)
    assert activations("--lora-dropout", "0.05") - activations() == per_token_layer * 1024 * 32


@pytest.mark.parametrize("bad", ["1", "-0.1", "nan", "x", "1.5"])
def test_a_lora_dropout_outside_a_probability_is_a_usage_error(cli, tmp_path, bad):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_2_7B))
    result = cli("estimate", "--model", tmp_path / "config.json", "--gpus", "2", "--peft", "lora",
                 "--lora-dropout", bad)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "--lora-dropout" in result.stderr and "probability" in result.stderr


def test_a_lora_layer_keeps_less_than_a_full_fine_tune(tmp_path):
    from zeroadvisor.memory.activations import activation_bytes
    from zeroadvisor.model.description import load_description
    from zeroadvisor.model.spec import TrainingShape

    (tmp_path / "config.json").write_text(json.dumps(LLAMA_2_7B))

    def layer(peft: str) -> int:
        (tmp_path / "model.yaml").write_text(f"hf_config: config.json\n{peft}")
        spec, _ = load_description(tmp_path / "model.yaml")
        act = activation_bytes(spec, TrainingShape(sequence_length=1024, flash_attention=True), 1, "bf16")
        return dict(act.parts)["layer"] // 1024

    full = layer("")
    h, f, r, e = 4096, 11008, 8, 2
    # the two frozen LlamaRMSNorms keep no cast for their weight's gradient; lora_B keeps r features per adapter
    assert layer("peft: {method: lora}\n") - full == -2 * e * h + e * r * 7
    # with q and v adapted only, the MLP's input and the down input are kept by none (the frozen base keeps none)
    assert layer("peft: {method: lora, target_modules: [q_proj, v_proj]}\n") - full == \
        -2 * e * h + e * r * 2 - e * (h + f)
