"""The Liger kernel (memory/liger.py), against hand calculations from Liger's code (0.5.3-0.8.5).

fused_linear_cross_entropy_forward: inc_factor = cdiv(V, H), chunk_size = next_power_of_2(cdiv(BT, inc_factor));
grad_input = zeros_like(_input) (e·BT·H), loss_1d fp32 BT, target_mask bool BT, the labels padded by one and
shifted (int64), two chunks of logits (e·chunk·V each) while the loop rebinds logits_chunk, and for a trainable
head grad_weight (e·V·H) with 0.6.2-0.8.3's torch.mm(...).float() temporary ((e + 4)·V·H).
"""

from __future__ import annotations

import dataclasses
import json

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config.training_args import from_mapping
from zeroadvisor.memory import liger
from zeroadvisor.memory.activations import activation_bytes
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import TrainingShape

QWEN2 = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 128,
         "intermediate_size": 352, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "vocab_size": 1000, "max_position_embeddings": 4096, "tie_word_embeddings": False,
         "torch_dtype": "bfloat16", "attention_dropout": 0.0}


def test_chunk_size_is_liger_own_example_and_the_field_cases():
    # the comment in fused_linear_cross_entropy_forward: BT = 4096*4, V = 32000, H = 4096 -> chunk_size = 2048
    assert liger.chunk_size(4096 * 4, 32000, 4096) == 2048
    # Qwen2.5-14B, 4 x 12800 tokens: cdiv(152064, 5120) = 30, cdiv(51200, 30) = 1707 -> 2048
    assert liger.chunk_size(4 * 12800, 152064, 5120) == 2048
    # Qwen2.5-7B, 8192 tokens: cdiv(152064, 3584) = 43, cdiv(8192, 43) = 191 -> 256
    assert liger.chunk_size(8192, 152064, 3584) == 256
    # fewer tokens than the power of two: the one slice is BT rows (0.8.4+: min(chunk_size, BT))
    assert liger.chunk_size(3, 100, 100) == 3


def test_the_frozen_head_peak_of_the_14b_lora_case():
    peak = liger.loss_peak(2, 4, 12800, 152064, 5120, head_trainable=False)
    bt = 4 * 12800
    assert peak.grad_input == 2 * bt * 5120 == 524_288_000
    assert peak.logits == 2 * 152064 * (2048 + 2048) == 1_245_708_288  # two chunks of 2048 rows
    assert peak.loss == 4 * bt + bt
    assert peak.labels == 8 * 4 * 12801 + 8 * bt  # pad(labels, (0, 1)), then [..., 1:].contiguous()
    assert peak.grad_weight == 0
    assert peak.extra == 2 * 4 * 12799 * 5120  # <= 0.5.5: hidden_states[..., :-1, :].contiguous()
    assert peak.nbytes == 524_288_000 + 1_245_708_288 + 256_000 + 819_232 + 0 + 524_247_040
    # against the 12·BT·V + 8·BT fp32 loss peak of transformers' ForCausalLMLoss: 93.4e9 bytes
    assert 12 * bt * 152064 + 8 * bt > 40 * peak.nbytes


def test_a_trainable_head_adds_its_gradient_and_the_fp32_temporary():
    peak = liger.loss_peak(2, 2, 64, 1000, 128, head_trainable=True)
    # BT 128: cdiv(1000, 128) = 8, cdiv(128, 8) = 16 -> 8 chunks of 16; two coexist (2·1000·32) > one chunk and
    # its grad_input product (2·16·(1000 + 128))
    assert peak.chunk == 16 and peak.logits == 2 * 1000 * 32
    assert peak.grad_weight == 2 * 1000 * 128
    assert peak.extra == (2 + 4) * 1000 * 128  # > the shifted copy 2·2·63·128
    assert peak.nbytes == 2 * 128 * 128 + 5 * 128 + (8 * 2 * 65 + 8 * 128) + 64_000 + 256_000 + 768_000


def test_one_chunk_with_its_grad_input_product():
    # BT 8, V 100, H 64: cdiv(100, 64) = 2, cdiv(8, 2) = 4 -> two chunks of 4; 2·100·8 = 1600 > 2·4·164 = 1312
    assert liger.loss_peak(2, 1, 8, 100, 64, False).logits == 1600
    # V 64 <= H 100: inc_factor 1, one chunk of all 2 rows; its logits and the grad_logits_chunk @ weight product
    assert liger.loss_peak(2, 1, 2, 64, 100, False).logits == 2 * 2 * (64 + 100)


def _act(spec, liger_on, ckpt="none", seq=64, mbs=2):
    shape = TrainingShape(sequence_length=seq, activation_checkpointing=ckpt, flash_attention=True,
                          liger_kernel=liger_on)
    return activation_bytes(spec, shape, mbs, "bf16")


def test_liger_replaces_the_loss_and_the_norms_and_mlp_term_by_term():
    spec = spec_from_hf_config(QWEN2)
    off, on = _act(spec, False), _act(spec, True)
    bt, h, f, v, e = 128, 128, 352, 1000, 2
    # the logits and loss: transformers' 12·BT·V + 8·BT for Liger's peak (full fine-tune: a trainable head)
    assert off.logits == 12 * bt * v + 8 * bt
    assert on.logits == liger.loss_peak(e, 2, 64, v, h, True).nbytes == 1_123_472
    # per layer, two norms keep 4h less each (no fp32 copy: LigerRMSNorm saves X and RSTD) and the MLP e·f less
    # (LigerSiLUMulFunction saves a, b: no separate activation output)
    assert off.per_layer - on.per_layer == bt * (2 * 4 * h + e * f)
    # the final norm outside the layers: 4h per token less
    assert off.nbytes - on.nbytes == 2 * bt * (8 * h + e * f) + bt * 4 * h + off.logits - on.logits
    assert any("Liger fused linear cross-entropy" in n for n in on.notes)


def test_peft_leaves_the_head_frozen():
    # model/peft.py sets trainable_parameters (the adapters) for LoRA/QLoRA: the base, the head too, is frozen
    spec = dataclasses.replace(spec_from_hf_config(QWEN2), trainable_parameters=1_000)
    assert _act(spec, True).logits == liger.loss_peak(2, 2, 64, 1000, 128, False).nbytes


def test_a_model_type_liger_does_not_patch_is_costed_as_transformers_keeps_it():
    gpt2 = spec_from_hf_config({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 128,
                                "n_layer": 2, "n_head": 4, "vocab_size": 1000, "n_positions": 1024})
    off, on = _act(gpt2, False), _act(gpt2, True)
    assert on.nbytes == off.nbytes
    assert any("no Liger kernels for model type gpt2" in n for n in on.notes)


def test_a_family_outside_the_layer_families_gets_the_loss_only():
    phi3 = spec_from_hf_config({**QWEN2, "model_type": "phi3", "architectures": ["Phi3ForCausalLM"]})
    off, on = _act(phi3, False), _act(phi3, True)
    assert on.per_layer == off.per_layer and on.logits < off.logits
    assert any("the layers as transformers keeps them" in n for n in on.notes)


def test_the_trainer_arguments_of_each_project_turn_it_on():
    assert from_mapping({"use_liger_kernel": "true"}, "args.json").get("use_liger_kernel") is True
    assert from_mapping({"per_device_train_batch_size": 1}, "args.json").get("use_liger_kernel") is False
    factory = from_mapping({"cutoff_len": 1024, "enable_liger_kernel": True}, "train.yaml")
    assert factory.project == "llama-factory" and factory.get("use_liger_kernel") is True
    assert factory.label("use_liger_kernel") == "enable_liger_kernel in train.yaml"
    axolotl = from_mapping({"base_model": "x", "liger_fused_linear_cross_entropy": True, "liger_rms_norm": True},
                           "axolotl.yaml")
    assert axolotl.get("use_liger_kernel") is True
    assert any("liger_glu_activation not on" in n for n in axolotl.notes)


def _peak(data):
    (configured,) = [s for s in data["estimate"]["stages"] if s["configured"]]
    return configured["peak_gpu"]


def test_the_flag_and_the_trainer_arguments_reach_the_estimate(tmp_path, cli):
    (tmp_path / "config.json").write_text(json.dumps(QWEN2))
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": True},
                              "zero_optimization": {"stage": 2}}))
    base = ["check", str(ds), "--model", str(tmp_path / "config.json"), "--gpus", "1", "--gpu-memory", "80GiB",
            "--seq-len", "4096", "--format", "json", "--fail-on", "never"]
    off = json.loads(cli(*base).stdout)
    on = json.loads(cli(*base, "--liger-kernel").stdout)
    assert _peak(off) - _peak(on) > 12 * 2 * 4096 * 1000 // 2  # most of the fp32 logits peak goes
    args = tmp_path / "train.json"
    args.write_text(json.dumps({"use_liger_kernel": True}))
    given = cli(*base, "--training-args", str(args))
    assert _peak(json.loads(given.stdout)) == _peak(on)
    assert "Liger kernel on from use_liger_kernel in" in given.stderr  # the notes on what was read
    # the flag is given over the Trainer's arguments, and says so
    over = cli(*base, "--training-args", str(args), "--no-liger-kernel")
    assert _peak(json.loads(over.stdout)) == _peak(off)
    assert "the Trainer's arguments turn it on" in over.stderr


def test_llama_factory_keeps_the_full_logits_outside_sft_and_liger_s_other_kernels():
    from zeroadvisor.config.method import MethodSetup
    from zeroadvisor.vocab import Method, TrainerFamily

    spec = spec_from_hf_config(QWEN2)

    def run(liger_on: bool, setup: MethodSetup):
        shape = TrainingShape(sequence_length=2048, activation_checkpointing="full", flash_attention=True,
                              liger_kernel=liger_on, method=setup)
        return activation_bytes(spec, shape, 1, "bf16")

    lf_dpo = MethodSetup(method=Method.DPO, trainer=TrainerFamily.LLAMA_FACTORY)
    trl_dpo = MethodSetup(method=Method.DPO, trainer=TrainerFamily.TRL)
    lf_sft = MethodSetup(method=Method.SFT, trainer=TrainerFamily.LLAMA_FACTORY)
    # LLaMA-Factory's dpo stage: require_logits turns the fused loss off, the full logits are counted as without
    # Liger, and a note says why
    with_liger, without = run(True, lf_dpo), run(False, lf_dpo)
    assert with_liger.logits == without.logits > 0
    assert any("require_logits" in note for note in with_liger.notes)
    # its sft stage runs the fused loss: no vocabulary-wide logits; TRL's DPO calls the model without labels too
    # (its own Liger preference loss is another switch: test_trl_runs_liger_s_preference_loss_by_its_switch)
    assert liger.fused_loss_off(lf_sft) is None and liger.fused_loss_off(trl_dpo) is not None
    assert run(True, lf_sft).logits < run(False, lf_sft).logits


def test_a_preference_loss_without_labels_keeps_the_full_logits_under_liger():
    """Liger's patched forward fuses the head and the loss only where it is given labels: ms-swift's DPO pops them
    (swift/rlhf_trainers/dpo_trainer.py concatenated_forward @ v4.5.2), TRL's ORPO and CPO have no Liger loss, and
    TRL's DPO and KTO call the model without labels unless their own Liger preference loss runs (use_liger_loss
    0.19-0.27, use_liger_kernel 0.25-1.14); axolotl's are TRL's at the TRL it pins, its liger plugin patching the
    model only (0.13.0 pins trl==0.25.0, 0.14.0 trl==0.27.1)."""
    from zeroadvisor.config.method import MethodSetup
    from zeroadvisor.vocab import Method, TrainerFamily

    spec = spec_from_hf_config(QWEN2)

    def logits(setup: MethodSetup) -> int:
        shape = TrainingShape(sequence_length=2048, activation_checkpointing="full", flash_attention=True,
                              liger_kernel=True, method=setup)
        return activation_bytes(spec, shape, 1, "bf16").logits

    sft = logits(MethodSetup(method=Method.SFT, trainer=TrainerFamily.LLAMA_FACTORY))
    whole = [MethodSetup(method=Method.DPO, trainer=TrainerFamily.MS_SWIFT, trainer_version="3.8.0"),
             MethodSetup(method=Method.ORPO, trainer=TrainerFamily.TRL, trainer_version="0.21.0"),
             MethodSetup(method=Method.CPO),
             MethodSetup(method=Method.DPO, trainer=TrainerFamily.TRL, trainer_version="0.24.0"),
             MethodSetup(method=Method.KTO, trainer=TrainerFamily.TRL, trainer_version="0.21.0"),
             MethodSetup(method=Method.DPO, trainer=TrainerFamily.AXOLOTL, trainer_version="0.13.0"),
             MethodSetup(method=Method.DPO, trainer=TrainerFamily.AXOLOTL, trainer_version="0.14.0")]
    for setup in whole:
        assert not liger.trl_loss_runs(setup, liger_kernel=True), setup
        assert liger.fused_loss_off(setup) is not None, setup
        assert logits(setup) > 5 * sft, setup


def test_trl_runs_liger_s_preference_loss_by_its_switch():
    """TRL's DPO/KTO run _compute_loss_liger for use_liger_loss (DPO from 0.19, KTO from 0.17; an alias of
    use_liger_kernel 0.25-0.27, gone in 0.28) or use_liger_kernel (0.25 to 1.13: ``if self.args.use_liger_kernel`` @
    v0.25.0 dpo_trainer.py, kto_trainer.py); 1.14 runs TRL's own chunked log-probs under that switch, 1.15 its fused
    LM head for every run. axolotl's
    dpo_use_liger_kernel is DPO's use_liger_kernel from axolotl 0.14 (core/trainers/dpo/__init__.py)."""
    from zeroadvisor.config.method import MethodSetup
    from zeroadvisor.vocab import Method, TrainerFamily

    def setup(method: Method, release: str, loss: bool | None = None,
              trainer: TrainerFamily = TrainerFamily.TRL) -> MethodSetup:
        return MethodSetup(method=method, trainer=trainer, trainer_version=release, liger_loss=loss)

    runs = [(setup(Method.DPO, "0.19.0", True), False), (setup(Method.DPO, "0.24.0", True), False),
            (setup(Method.DPO, "0.25.0"), True), (setup(Method.DPO, "0.27.0", True), False),
            (setup(Method.DPO, "0.26.0"), True), (setup(Method.DPO, "1.9.0"), True),
            (setup(Method.DPO, "1.13.0"), True), (setup(Method.KTO, "0.17.0", True), False),
            (setup(Method.KTO, "1.7.0"), True), (setup(Method.DPO, "0.14.0", True, TrainerFamily.AXOLOTL), False)]
    for found, kernel in runs:
        assert liger.trl_loss_runs(found, liger_kernel=kernel), found
    off = [(setup(Method.DPO, "0.18.0", True), True),  # no use_liger_loss field yet
           (setup(Method.DPO, "0.24.0"), True),  # use_liger_kernel alone patches the model only
           (setup(Method.KTO, "0.16.0", True), True),
           (setup(Method.DPO, "0.28.0", True), False),  # the alias is gone
           (setup(Method.DPO, "1.14.0"), True),  # TRL's own chunked log-probs under the same switch
           (setup(Method.DPO, "1.15.0"), True),  # the fused LM head
           (MethodSetup(method=Method.DPO), True),  # unknown: the newest read, its fused head
           (setup(Method.ORPO, "0.24.0", True), True),
           (setup(Method.DPO, "3.8.0", True, TrainerFamily.MS_SWIFT), True),
           (setup(Method.DPO, "0.13.0", True, TrainerFamily.AXOLOTL), True),  # no dpo_use_liger_kernel, trl 0.25
           (setup(Method.DPO, "0.14.0", None, TrainerFamily.AXOLOTL), True)]  # its plugin only
    for found, kernel in off:
        assert not liger.trl_loss_runs(found, liger_kernel=kernel), found


def test_liger_s_preference_loss_is_counted_by_its_chunk_not_as_no_logits():
    """Liger's chunked DPO loss computes one chosen/rejected pair's logits at a time, in fp32 for the log-softmax:
    4 copies of that pair's logits under torch.compile (TRL keeps compiled=True), 8 eager. Where it runs, the
    activations count its chunk instead of the whole logits, and nothing for the reference pass's held logits
    (the loss side's moment of _compute_loss does not exist there)."""
    from zeroadvisor.config.method import MethodSetup
    from zeroadvisor.memory.method import dpo_reference_pass_terms
    from zeroadvisor.memory.parallel import Parallel
    from zeroadvisor.vocab import Method, TrainerFamily

    spec = spec_from_hf_config(QWEN2)
    trl19 = MethodSetup(method=Method.DPO, trainer=TrainerFamily.TRL, trainer_version="1.9.0")
    tokens, pairs = 2048, 2

    def run(liger_on: bool) -> tuple[int, list[str], int]:
        shape = TrainingShape(sequence_length=tokens, activation_checkpointing="full", flash_attention=True,
                              liger_kernel=liger_on, method=trl19)
        act = activation_bytes(spec, shape, 2 * pairs, "bf16")
        side = sum(t.nbytes for t in dpo_reference_pass_terms(shape, spec, pairs, Parallel(), 2))
        return act.logits, list(act.notes), side

    logits, notes, side = run(True)
    v, h = QWEN2["vocab_size"], QWEN2["hidden_size"]
    rows = 2 * pairs
    pair = 2 * 2 * tokens * v  # one chunk: a chosen and a rejected row of bf16 logits
    # the chunk, the two hidden-state copies, the input gradient, the head gradient, the labels
    expected = 4 * pair + 2 * 2 * rows * tokens * h + 2 * rows * tokens * h + 2 * v * h + 8 * rows * tokens
    assert logits == expected
    assert any("Liger's fused DPO loss" in note and "8 eager" in note for note in notes)
    assert side == 0
    whole, _, held = run(False)  # the logits and the loss side of _compute_loss at 1.9: 4 copies live at once
    assert whole > 2 * logits and held > 0


def test_liger_s_preference_chunk_matches_its_measurement_on_cpu():
    """benchmarks/liger_preference.json: Liger 0.8.5's own LigerFusedLinearDPOLoss/KTOLoss measured on CPU
    (benchmarks/calibrate_liger_preference.py); preference_peak's chunk, input and head gradients against each
    measured peak: within 1% compiled (what TRL runs); eager at or under the bound."""
    from pathlib import Path

    from zeroadvisor.vocab import Method

    data = json.loads((Path(__file__).resolve().parent.parent / "benchmarks" / "liger_preference.json").read_text())
    rows = [row for row in data["rows"] if row["method"] in ("dpo", "kto") and "hidden" not in row]
    assert len(rows) >= 8
    # a head as wide as a 7-8B model's over short chunks: the moment a chunk's head gradient is added is the peak
    wide = [row for row in data["rows"] if "hidden" in row]
    assert len(wide) >= 3
    for row in wide:
        peak = liger.preference_peak(Method.DPO, 2, row["rows"], row["tokens"], 32768, row["hidden"], True)
        assert peak.chunk > 4 * row["chunk_logits"]  # not the chunk's copies
        assert abs((peak.chunk + peak.grad_input + peak.grad_weight) / row["compiled"]["peak"] - 1) < 0.02, row
    for row in rows:
        peak = liger.preference_peak(Method(row["method"]), 2, row["rows"], row["tokens"], 32768, 64, True)
        compiled = peak.chunk + peak.grad_input + peak.grad_weight
        assert abs(compiled / row["compiled"]["peak"] - 1) < 0.01, row
        assert peak.chunk_bound + peak.grad_input + peak.grad_weight >= row["eager"]["peak"] * 0.99, row


def test_liger_s_grpo_loss_matches_its_measurement_on_cpu_at_both_release_lines():
    """benchmarks/liger_preference.json, GRPO: Liger 0.8.5's tiles within 1% of its measured peak (the expected
    count), and the bound (one completion's logits x 7, Liger before 0.8, eager) at or over every measured peak of
    both releases, compiled or eager."""
    from pathlib import Path

    data = json.loads((Path(__file__).resolve().parent.parent / "benchmarks" / "liger_preference.json").read_text())
    rows = [row for row in data["rows"] if row["method"] == "grpo"]
    assert {row["liger"] for row in rows} >= {"0.7.0", "0.8.5"}
    for row in rows:
        peak = liger.grpo_peak(2, row["rows"], row["tokens"], 32768, 64, True)
        if row["liger"] == "0.8.5":
            assert abs(peak.nbytes / row["compiled"]["peak"] - 1) < 0.01, row
        for mode in ("compiled", "eager"):
            assert peak.bound >= row[mode]["peak"], (row, mode)


def test_grpo_with_liger_s_loss_counts_its_tiles_not_the_completion_logits():
    """TRL's GRPO with Liger's loss (use_liger_loss at 0.17-0.27, use_liger_kernel at 0.25-1.14) scores the completion
    without its logits: the completion term is Liger's tiles and the head's gradient, with the older releases'
    one-completion logits as its bound; without the switch, the micro batch's logits by TRL 0.24's parts
    (memory/method.py trl_grpo_out_of_place: 2 copies and the entropy's 128-position chunk at 8 rows)."""
    from zeroadvisor.config.method import Generation, MethodSetup
    from zeroadvisor.memory.method import completion_head_gradient, completion_logits_terms
    from zeroadvisor.memory.settings import read_settings
    from zeroadvisor.vocab import Method, TrainerFamily

    spec = spec_from_hf_config({**QWEN2, "vocab_size": 151936, "hidden_size": 1024})
    setup = MethodSetup(method=Method.GRPO, trainer=TrainerFamily.TRL, trainer_version="0.24.0", liger_loss=True,
                        generation=Generation(num_generations=8, max_completion_length=1024))
    s = read_settings({"train_micro_batch_size_per_gpu": 8, "bf16": {"enabled": True}}, spec, 1)
    [liger_term] = completion_logits_terms(setup, spec, s)
    [whole] = completion_logits_terms(dataclasses.replace(setup, liger_loss=None), spec, s)
    v, h = 151936, 1024
    assert whole.nbytes == 2 * v * (2 * 8 * 1024 + 3 * 128)
    assert liger_term.nbytes == 5 * 1024 * 4096 * 4 + 6 * v * h + 4 * 8 * 1024 * h
    assert liger_term.bound == 7 * 2 * 1024 * v + 6 * v * h + 4 * 8 * 1024 * h
    assert liger_term.bound < whole.nbytes  # even the bound: one completion, not the micro batch
    assert completion_head_gradient(setup, spec, s) == 2 * v * h  # the head gradient the loss makes
    # use_liger_kernel switches it from 0.25; at 0.24 it patches the model only
    kernel = dataclasses.replace(setup, liger_loss=None, trainer_version="0.26.0")
    assert completion_logits_terms(kernel, spec, s, liger_kernel=True)[0].nbytes == liger_term.nbytes
    older = dataclasses.replace(setup, liger_loss=None)
    assert completion_logits_terms(older, spec, s, liger_kernel=True)[0].nbytes == whole.nbytes
    # ms-swift's GRPO: --use_liger_kernel runs it from 3.5.0 (its own GRPOTrainer's use_liger_loss)
    swift = MethodSetup(method=Method.GRPO, trainer=TrainerFamily.MS_SWIFT, trainer_version="3.8.0",
                        generation=setup.generation)
    assert completion_logits_terms(swift, spec, s, liger_kernel=True)[0].nbytes == liger_term.nbytes
    # without it TRL's out-of-place method, which ms-swift calls without the entropy: 2 copies at 8 rows
    assert completion_logits_terms(swift, spec, s)[0].nbytes == 2 * 2 * 8 * 1024 * v
    old_swift = dataclasses.replace(swift, trainer_version="3.4.0")
    assert completion_logits_terms(old_swift, spec, s, liger_kernel=True)[0].nbytes == 2 * 2 * 8 * 1024 * v


def test_trl_1_14_s_liger_switch_runs_its_own_chunked_log_probs_counted_as_its_fused_head():
    """TRL 1.14 (DPO, KTO) and 1.13 (GRPO) keep use_liger_kernel but score through TRL's own _ChunkedLogProbFunction
    (trl/trainer/utils.py @ v1.14.0: tiles of the vocabulary, as 1.15's fused head), not Liger's loss: counted as the
    fused head, no logits, no loss-side moment; without the switch the logits stay."""
    from zeroadvisor.config.method import Generation, MethodSetup
    from zeroadvisor.memory.method import completion_logits_terms, dpo_reference_pass_terms
    from zeroadvisor.memory.parallel import Parallel
    from zeroadvisor.memory.settings import read_settings
    from zeroadvisor.vocab import Method, TrainerFamily

    spec = spec_from_hf_config(QWEN2)
    dpo = MethodSetup(method=Method.DPO, trainer=TrainerFamily.TRL, trainer_version="1.14.0")
    assert liger.chunked_logprob_runs(dpo, True) and not liger.trl_loss_runs(dpo, True)
    assert not liger.chunked_logprob_runs(dpo, False)

    def run(liger_on: bool) -> tuple[int, list[str], int]:
        shape = TrainingShape(sequence_length=2048, activation_checkpointing="full", flash_attention=True,
                              liger_kernel=liger_on, method=dpo)
        act = activation_bytes(spec, shape, 2, "bf16")
        return act.logits, list(act.notes), sum(t.nbytes for t in dpo_reference_pass_terms(shape, spec, 1,
                                                                                           Parallel(), 2))

    logits, notes, side = run(True)
    assert any("TRL's fused LM head" in note for note in notes) and side == 0
    whole, _, held = run(False)
    assert whole > 3 * logits and held > 0
    grpo = MethodSetup(method=Method.GRPO, trainer=TrainerFamily.TRL, trainer_version="1.13.0",
                       generation=Generation(num_generations=8, max_completion_length=1024))
    s = read_settings({"train_micro_batch_size_per_gpu": 8, "bf16": {"enabled": True}}, spec, 1)
    assert "fused LM head" in completion_logits_terms(grpo, spec, s, liger_kernel=True)[0].what
    assert "logits_to_keep" in completion_logits_terms(grpo, spec, s)[0].what
    assert "Liger" in completion_logits_terms(dataclasses.replace(grpo, trainer_version="1.12.0"), spec, s,
                                              liger_kernel=True)[0].what


def test_trl_refuses_precompute_ref_log_probs_beside_its_liger_loss():
    """DPOTrainer (0.29 to 1.13) and KTOTrainer (1.8 to 1.13) raise "Liger DPO loss does not support precomputing
    reference log probabilities." at every stage; 1.14 computes them with its chunked log-probs; a run without the
    switch precomputes as usual."""
    from zeroadvisor.config.method import MethodSetup
    from zeroadvisor.memory.method import trainer_refusal
    from zeroadvisor.memory.options import Option
    from zeroadvisor.vocab import Method, TrainerFamily

    spec = spec_from_hf_config(QWEN2)

    def refused(release: str, liger_on: bool, method: Method = Method.DPO) -> str | None:
        setup = MethodSetup(method=method, trainer=TrainerFamily.TRL, trainer_version=release,
                            precompute_ref_log_probs=True)
        return trainer_refusal(setup, spec, Option(stage=2), liger_kernel=liger_on)

    words = refused("1.9.0", True)
    assert words is not None and "Liger DPO loss does not support precomputing" in words
    assert "Liger KTO loss" in (refused("1.8.0", True, Method.KTO) or "")
    assert refused("1.9.0", False) is None and refused("1.14.0", True) is None
    assert refused("1.7.0", True, Method.KTO) is None  # the experimental KTOTrainer makes no such check
