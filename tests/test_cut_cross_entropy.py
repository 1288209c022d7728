"""Cut Cross-Entropy (memory/cut_cross_entropy.py) against hand calculations from cut_cross_entropy 25.1.1, and
axolotl's plugin read from its YAML."""

from __future__ import annotations

import json

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config.method import MethodSetup
from zeroadvisor.config.trainer_errors import TrainerInputError
from zeroadvisor.config.training_args import from_mapping
from zeroadvisor.memory import cut_cross_entropy as cce
from zeroadvisor.memory.activations import activation_bytes
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import TrainingShape
from zeroadvisor.vocab import Method, TrainerFamily

LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256, "intermediate_size": 688,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32_000,
         "max_position_embeddings": 8192, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
PLUGIN = "axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin"


def test_loss_peak_is_the_gradients_and_per_token_terms_not_the_logits():
    tokens, vocab, hidden = 4096, 32_000, 256
    # de = zeros_like(e), dc = zeros_like(c, dtype=e.dtype); lse and the loss fp32, targets and valids int64,
    # logit_avg fp32 V
    assert cce.loss_peak(2, tokens, vocab, hidden, True) == \
        2 * tokens * hidden + 2 * vocab * hidden + (4 + 4 + 8 + 8) * tokens + 4 * vocab
    assert cce.loss_peak(2, tokens, vocab, hidden, False) == 2 * tokens * hidden + (4 + 4 + 8 + 8) * tokens + 4 * vocab
    assert cce.head_gradient(2, vocab, hidden, False) == 0


SFT = MethodSetup()


def _act(cut: bool, method: MethodSetup = SFT, seq: int = 4096):
    spec = spec_from_hf_config(LLAMA)
    shape = TrainingShape(sequence_length=seq, activation_checkpointing="full", flash_attention=True,
                          cut_cross_entropy=cut, method=method)
    return activation_bytes(spec, shape, 1, "bf16")


def test_the_supervised_loss_keeps_no_logits_and_a_preference_loss_keeps_them():
    on, off = _act(True), _act(False)
    assert on.logits == cce.loss_peak(2, 4096, 32_000, 256, True)
    assert off.logits > 10 * on.logits  # transformers' fp32 loss over 4096 x 32,000 logits
    assert any("Cut Cross-Entropy: no 4,096 x 32,000 logits" in n for n in on.notes)
    # TRL's DPO (axolotl's rl: dpo) reads the logits: the patched forward computes them whole
    dpo = MethodSetup(method=Method.DPO, trainer=TrainerFamily.AXOLOTL)
    assert _act(True, dpo).logits == _act(False, dpo).logits


@pytest.mark.parametrize("data, expected", [
    ({"base_model": "m", "plugins": [PLUGIN]}, True),
    ({"base_model": "m", "plugins": [PLUGIN], "cut_cross_entropy": False}, False),
    ({"base_model": "m", "plugins": ["axolotl.integrations.liger.LigerPlugin"]}, None),
    ({"base_model": "m", "cut_cross_entropy": True}, None),  # the key alone: no plugin reads it
    ({"plugins": [PLUGIN]}, None),  # not an axolotl file
])
def test_axolotl_plugin_is_read(data, expected):
    args = from_mapping(data, "train.yaml")
    assert args.cut_cross_entropy is expected
    if expected is not None:
        assert "train.yaml" in args.cut_cross_entropy_from


def test_a_bad_switch_is_a_one_line_error():
    with pytest.raises(TrainerInputError, match=r"cut_cross_entropy in train\.yaml"):
        from_mapping({"base_model": "m", "plugins": [PLUGIN], "cut_cross_entropy": "sometimes"}, "train.yaml")


def test_an_axolotl_yaml_with_the_plugin_is_costed_without_logits(cli, tmp_path):
    config = {**LLAMA, "hidden_size": 4096, "intermediate_size": 14_336, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128_256}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "ds.json").write_text(json.dumps({"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"},
                                                  "train_micro_batch_size_per_gpu": "auto"}))
    base = {"base_model": str(tmp_path), "sequence_len": 16_384, "sample_packing": True, "micro_batch_size": 1,
            "gradient_checkpointing": True, "bf16": True, "datasets": []}
    (tmp_path / "plain.yaml").write_text(json.dumps(base))
    (tmp_path / "cce.yaml").write_text(json.dumps({**base, "plugins": [PLUGIN]}))
    args = ("check", str(tmp_path / "ds.json"), "--gpus", "8", "--gpu", "H100-SXM5-80GB", "--format", "json")

    def configured(name: str):
        result = cli(*args, "--training-args", str(tmp_path / name))
        assert result.returncode in (0, 1, 5), result.stderr
        return result, next(st for st in json.loads(result.stdout)["estimate"]["stages"] if st["configured"])

    _, plain = configured("plain.yaml")
    result, cut = configured("cce.yaml")
    assert "Cut Cross-Entropy on from CutCrossEntropyPlugin in plugins" in result.stderr
    # 16,384 x 128,256 logits: transformers' three fp32 copies (24 GiB) against CCE's gradients (under 1.2 GiB)
    assert plain["peak_gpu"] - cut["peak_gpu"] > 20 * 2**30
    flag = cli(*args, "--training-args", str(tmp_path / "plain.yaml"), "--cut-cross-entropy")
    flagged = next(st for st in json.loads(flag.stdout)["estimate"]["stages"] if st["configured"])
    assert flagged["peak_gpu"] == cut["peak_gpu"]


def test_the_model_description_says_it_too(tmp_path):
    from zeroadvisor.model.description import load_model

    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    (tmp_path / "model.yaml").write_text("hf_config: config.json\nsequence_length: 4096\ncut_cross_entropy: true\n")
    _, shape = load_model(tmp_path / "model.yaml")
    assert shape.cut_cross_entropy is True
