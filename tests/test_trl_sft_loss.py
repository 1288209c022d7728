"""TRL's SFTTrainer loss by release (memory/trl_sft_loss.py): the full logits before 1.5, chunked_nll offered in
1.5-1.6 and the default in 1.7-1.14 (nll the full logits there), the fused head from 1.15; never for another
trainer or method, with the Liger kernel, or for dft."""

from __future__ import annotations

import json

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config.method import MethodSetup
from zeroadvisor.memory.trl_sft_loss import (
    CHUNK_TOKENS,
    TOKEN_TILE,
    VOCAB_TILE,
    SftLoss,
    chunked_loss_bytes,
    fused_head_bytes,
    sft_loss,
)
from zeroadvisor.vocab import Method, TrainerFamily


def trl(version: str | None, loss: str | None = None, method: Method = Method.SFT,
        trainer: TrainerFamily | None = TrainerFamily.TRL) -> MethodSetup:
    return MethodSetup(method=method, trainer=trainer, trainer_version=version, loss_type=loss)


@pytest.mark.parametrize(("setup", "liger", "path"), [
    (trl("1.4.0"), False, SftLoss.FULL), (trl("1.4.0", "chunked_nll"), False, SftLoss.FULL),
    (trl("1.5.0"), False, SftLoss.FULL), (trl("1.6.0", "chunked_nll"), False, SftLoss.CHUNKED),
    (trl("1.7.0"), False, SftLoss.CHUNKED), (trl("1.14.2"), False, SftLoss.CHUNKED),
    (trl("1.9.0", "nll"), False, SftLoss.FULL), (trl("1.9.0", "dft"), False, SftLoss.FULL),
    (trl("1.9.0"), True, SftLoss.FULL),  # use_liger_kernel: nll through Liger's fused loss
    (trl("1.15.0"), False, SftLoss.FUSED), (trl(None), False, SftLoss.FUSED),  # unpinned: the current release's
    (trl("1.16.0", "dft"), False, SftLoss.FUSED), (trl("1.16.0"), True, SftLoss.FUSED),  # Liger's loss turned off
    (trl("1.9.0", trainer=None), False, SftLoss.FULL),  # a plain Trainer script: the model's own loss
    (trl("1.9.0", trainer=TrainerFamily.LLAMA_FACTORY), False, SftLoss.FULL),
    (trl("1.9.0", method=Method.DPO), False, SftLoss.FULL),
])
def test_the_loss_trl_runs_by_release(setup, liger, path):
    assert sft_loss(setup, liger) is path


def test_chunked_bytes_hold_one_chunk_and_the_upcast_head_not_the_logits():
    v, h, t = 151_936, 4_096, 32_768
    chunk = 4 * CHUNK_TOKENS * v
    # bf16: the matmul's moment: exp and the logits' gradient, the fp32 head copy and gradient, the bf16 sum
    assert chunked_loss_bytes(2, t, h, v) == 2 * chunk + 4 * v * h + 4 * v * h + 2 * v * h + 16 * t
    # fp32: no copy, the fp32 sum
    assert chunked_loss_bytes(4, t, h, v) == 2 * chunk + 4 * v * h + 4 * v * h + 16 * t
    assert chunked_loss_bytes(2, t, h, v) < 12 * t * v / 8  # an eighth of the full logits' loss peak at 32k
    # a frozen head (LoRA): no weight gradient, no sum over the chunks; the upcast copy stays for grad_h
    assert chunked_loss_bytes(2, t, h, v, head_trained=False) == 4 * chunk + 4 * v * h + 16 * t
    # 100 tokens: one chunk of 100; log_softmax's moment (four chunk tensors, the upcast head, the bf16 sum)
    assert chunked_loss_bytes(2, 100, 64, 8192) == 4 * 4 * 100 * 8192 + 4 * 8192 * 64 + 2 * 8192 * 64 + 16 * 100


def test_fused_head_bytes_are_its_fp32_gradients_their_casts_and_one_tile():
    v, h, t = 151_936, 4_096, 32_768
    grads = t * h + v * h
    tile = 2 * TOKEN_TILE * VOCAB_TILE
    # bf16: the backward's end (fp32 grad_hidden and grad_weight, their bf16 casts, the tile, the fp32 incoming
    # gradient), and what the forward saved (int64 targets, fp32 log_z and entropy)
    assert fused_head_bytes(2, t, h, v) == 16 * t + 4 * grads + 2 * grads + tile + 4 * t
    assert fused_head_bytes(4, t, h, v) == 16 * t + 4 * grads + 4 * TOKEN_TILE * VOCAB_TILE + 4 * t  # no casts
    assert fused_head_bytes(2, t, h, v) < 12 * t * v / 8
    assert fused_head_bytes(2, t, h, v, head_trained=False) == 16 * t + 6 * t * h + tile + 4 * t  # no grad_weight
    # a short sequence and a small vocabulary: the tile is no larger than they are
    assert fused_head_bytes(2, 100, 64, 8192) == 16 * 100 + max(7 * 4 * 100 + 2 * 100 * 8192,
                                                                 6 * (100 * 64 + 8192 * 64) + 2 * 100 * 8192 + 400)


def test_trl_sft_from_the_launch_command_and_the_pin(cli, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "vocab_size": 151_936, "hidden_size": 896,
        "intermediate_size": 4_864, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
        "tie_word_embeddings": True}))
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, '
                                      '"zero_optimization": {"stage": 2}}')
    (tmp_path / "sft.yaml").write_text("max_length: 16384\ngradient_checkpointing: true\nbf16: true\n")

    def peak(pin: str) -> tuple[int, str]:
        (tmp_path / "requirements.txt").write_text(f"trl=={pin}\n")
        result = cli("check", tmp_path / "ds.json", "--model", tmp_path / "config.json", "--gpus", "2",
                     "--gpu-memory", "80GiB", "--launch", "trl sft --config sft.yaml", "-f", "json", "--fail-on",
                     "never", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        option = next(s for s in json.loads(result.stdout)["estimate"]["stages"] if s["configured"])
        return option["peak_gpu"], result.stdout

    chunked, text = peak("1.9.0")
    full, old = peak("1.4.0")
    fused, new = peak("1.16.0")
    assert "TRL's chunked cross-entropy" in text and "TRL's chunked cross-entropy" not in old
    assert "TRL's fused LM head" in new and "TRL's fused LM head" not in old
    # 16,384 tokens x 151,936: the full logits' loss peak (12 B each) is about 30 GB
    assert full - chunked > 25 * 10**9 and full - fused > 25 * 10**9


def test_an_unknown_trl_release_is_an_assumed_input_for_its_sft_loss():
    """No pin and no installed TRL: the current release's fused head, said with what sets the release."""
    from zeroadvisor.memory.method import method_assumptions
    from zeroadvisor.model.hf import spec_from_hf_config

    spec = spec_from_hf_config({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 32000,
                                "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                                "num_attention_heads": 32})
    [assumed] = method_assumptions(trl(None), spec)
    assert assumed.name == "trainer_version" and "fused LM head" in assumed.effect
    assert method_assumptions(trl("1.9.0"), spec) == [] and method_assumptions(trl(None, trainer=None), spec) == []


LLAMA_2_7B = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 32000, "hidden_size": 4096,
              "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32}


@pytest.mark.parametrize(("setup", "liger"), [(trl("1.16.0"), False), (trl("1.9.0"), False), (trl(None, trainer=None),
                                                                                              True)],
                         ids=["fused", "chunked", "liger"])
def test_zero3_counts_the_head_gradient_the_loss_makes_once(setup, liger):
    """TRL's fused head casts the head's gradient, its chunked loss sums it, Liger writes it in the forward: the
    tensor ZeRO-3's hook receives as the head's full gradient (stage3.py reduce_partition_and_remove_grads), at
    least as large as any other layer's on Llama-2-7B (the head and the embedding are the largest, 32000 x 4096).
    It is counted in the loss's peak, not again as the stage's gathered gradient; a frozen head (LoRA) makes none,
    and the full logits make it after the loss: there the gathered gradient stays."""
    import dataclasses

    from zeroadvisor.memory.estimate import Cluster, estimate
    from zeroadvisor.model.hf import spec_from_hf_config
    from zeroadvisor.model.spec import TrainingShape

    spec = spec_from_hf_config(LLAMA_2_7B)
    config = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}

    def terms(model, method, liger_kernel):
        shape = TrainingShape(4096, "full", method=method, liger_kernel=liger_kernel)
        stage = estimate(config, model, shape, Cluster(gpus=8, gpu_memory=80 * 2**30)).stage(3)
        return {t.key: t.nbytes for t in stage.terms if t.phase == "train" and t.device == "gpu"}, stage.notes

    made, notes = terms(spec, setup, liger)
    assert "gathered_grad" not in made
    assert any("LM head's (262,144,000 B), which the loss makes itself" in n for n in notes)
    full, _ = terms(spec, trl("1.4.0"), False)
    assert full["gathered_grad"] == 2 * 32000 * 4096
    lora = dataclasses.replace(spec, trainable_parameters=4_194_304, peft="LoRA r=8",
                               largest_trainable_parameter=4096 * 8)
    frozen, _ = terms(lora, setup, liger)
    assert frozen["gathered_grad"] == 2 * 4096 * 8
