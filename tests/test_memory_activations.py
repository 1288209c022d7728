"""Activations (memory/activations.py): hand calculations, and the real transformers measurement.

Without layer details (no hf_config) the estimate keeps Korthikanti et al.'s assumptions (LayerNorm,
GeLU, 1-byte dropout masks, 2-byte activations): per layer sbh·34 + 5·as²b (Eq. 1), plus the two
LayerNorms' fp32 mean and rstd (8 bytes per token each, torch native_layer_norm on CUDA). Outside the
layers, per token: int64 ids 8, embedding dropout mask h, final norm 2h + 8, LM-head input 2h.
"""

from __future__ import annotations

from zeroadvisor.memory.activations import activation_bytes
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import ModelSpec, TrainingShape

P = 7_000_000_000
GPT = dict(num_layers=1, hidden_size=4096, num_attention_heads=32, intermediate_size=4 * 4096, gated_mlp=False)


def act(spec_kw, seq=2048, ckpt="none", flash=False, mbs=1, precision="fp16", target=None):
    spec = ModelSpec(parameters=P, **spec_kw)
    shape = TrainingShape(sequence_length=seq, activation_checkpointing=ckpt, flash_attention=flash,
                          target_length=target)
    return activation_bytes(spec, shape, mbs, precision)


def outside(s, b, h, e=2):
    return s * b * (8 + h + (e * h + 8) + e * h)


def test_korthikanti_eq1_per_layer():
    s, b, h, a = 2048, 1, 4096, 32
    # Eq. 1: sbh(34 + 5as/h) per layer + 2 LayerNorms × 8 B of statistics per token; no vocabulary: no logits
    assert act(GPT).nbytes == s * b * (34 * h + 16) + 5 * a * s * s * b + outside(s, b, h)
    assert act(GPT).per_layer == s * b * (34 * h + 16) + 5 * a * s * s * b
    # fused attention: the 5as²b score term goes; fp32 log-sum-exp 4·asb is kept
    assert act(GPT, flash=True).nbytes == s * b * (34 * h + 16 + 4 * a) + outside(s, b, h)
    # selective recomputation (eager): the scores are recomputed
    assert act(GPT, ckpt="selective").nbytes == s * b * (34 * h + 16) + outside(s, b, h)
    # micro batch scales linearly
    assert act(GPT, flash=True, mbs=4).nbytes == 4 * act(GPT, flash=True).nbytes


def test_full_recompute_and_the_loss_peak():
    s, b, h, a, L, V = 2048, 1, 4096, 32, 24, 50_000
    kw = {**GPT, "num_layers": L, "vocab_size": V}
    # full: 2sbh per layer input + one layer (34sbh + 16sb + 5as²b) during its recompute. Loss (an LM head
    # assumed, upcast to fp32 as transformers' ForCausalLMLoss does): fp32 log-probs, their gradient and the
    # logits' gradient, 3 × 4 B × sbV, + the int64 labels 8sb. The loss and the LM head's input (2sbh) are freed
    # before the last layer is recomputed: the larger of the two peaks counts (here the loss)
    layer = s * b * (34 * h + 16) + 5 * a * s * s * b
    loss = 2 * s * b * h + 12 * s * b * V + 8 * s * b
    assert loss > layer
    expected = L * 2 * s * b * h + outside(s, b, h) - 2 * s * b * h + max(layer, loss)
    result = act(kw, ckpt="full")
    assert result.nbytes == expected
    assert result.logits == 12 * s * b * V + 8 * s * b
    assert any("head unknown" in n for n in result.notes)


def test_gqa_and_gated_mlp_constants():
    s, b, h, a = 1024, 2, 4096, 32
    kv_heads, d, f = 8, 128, 14336  # Llama-3-8B-like
    kw = dict(num_layers=1, hidden_size=h, num_attention_heads=a, num_key_value_heads=kv_heads, head_dim=d,
              intermediate_size=f, gated_mlp=True)
    kv = kv_heads * d
    # fused attention: input 2h, Q 2h, K and V 2kv each, out-proj input 2h, output dropout mask h, LSE 4a;
    # gated MLP: input 2h + (GeLU input, its output, up, product) 4 × 2f + mask h; 2 LayerNorms 2 × (2h + 8)
    attention = 2 * h + 2 * h + 4 * kv + 2 * h + h + 4 * a
    mlp = 2 * h + 8 * f + h
    expected = s * b * (attention + mlp + 2 * (2 * h + 8)) + outside(s, b, h)
    assert act(kw, seq=s, mbs=b, flash=True).nbytes == expected


def test_fp32_activations_double_but_masks_do_not():
    s, b, h, a = 2048, 1, 4096, 32
    # e = 4: attention 5 × 4h + mask h, MLP 4h + 2 × 4 × 4h + mask h, LayerNorms 2 × (4h + 8), LSE 4a
    per_layer = 21 * h + 37 * h + 8 * h + 16 + 4 * a
    assert act(GPT, flash=True, precision="fp32").nbytes == s * b * per_layer + outside(s, b, h, e=4)


# tiny T5 (d_model 128, d_ff 512, 4 heads of 32, 2 + 2 layers, vocab 1000, ReLU, dropout 0.1) as
# benchmarks/calibrate_activations.py builds it
T5 = {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"], "d_model": 128, "d_ff": 512,
      "d_kv": 32, "num_heads": 4, "num_layers": 2, "num_decoder_layers": 2, "vocab_size": 1000}


def t5(precision="bf16", target=32, **extra):
    spec = spec_from_hf_config({**T5, **extra})
    return activation_bytes(spec, TrainingShape(sequence_length=64, target_length=target, flash_attention=False),
                            4, precision)


def test_t5_layers_match_real_transformers():
    # bytes autograd saved per layer in transformers 5.24 (saved_tensors_hooks, b 4, source 64, target 32, bf16,
    # eager; benchmarks/activations.md): encoder layer 1,968,128, decoder layer 1,443,328. By hand, per
    # encoder token (e 2, h 128, f 512): 2 T5LayerNorms 2 × (4h + 2·2h + 4) = 2056; attention input, Q, K, V,
    # out-proj input 5 × 2h + output mask h = 1408; MLP input 2h + ReLU output 2f + dropout mask f + dropped 2f
    # + output mask h = 2944; × 256 tokens, + scores 4 heads × 64² × 4 × (2 + 2 + 1) = 327,680
    parts = dict(t5().parts)
    assert parts["encoder layer"] == 256 * (2056 + 1408 + 2944) + 327_680 == 1_968_128
    # per decoder token: 3 T5LayerNorms 3 × 1028; self-attention 1408 as above; cross-attention input, Q and
    # out-proj input 3 × 2h + mask h = 7h; MLP 2944; × 128 target tokens; + the cross-attention K and V inputs
    # on the encoder's 256 tokens (2 × 2h each) + scores 4 heads × 32 × (32 self + 64 cross) × 4 × 5
    assert parts["decoder layer"] == (128 * (3 * 1028 + 1408 + 7 * 128 + 2944) + 256 * 2 * 2 * 128
                                      + 4 * 32 * (32 + 64) * 4 * 5) == 1_443_328


def test_t5_loss_stays_in_the_model_dtype_and_target_length_is_used():
    # T5ForConditionalGeneration: nn.CrossEntropyLoss on bf16 logits: 3 × 2 B × target tokens × V + labels
    result = t5()
    assert result.logits == 3 * 2 * 4 * 32 * 1000 + 8 * 4 * 32
    same = t5(target=None)  # target unknown: the source length, said
    assert any("target (decoder) length not given" in n for n in same.notes)
    assert same.logits == 3 * 2 * 4 * 64 * 1000 + 8 * 4 * 64


def test_classifier_has_no_vocabulary_logits():
    spec = spec_from_hf_config({"model_type": "bert", "architectures": ["BertForSequenceClassification"],
                                "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                                "intermediate_size": 512, "vocab_size": 30522, "max_position_embeddings": 512,
                                "type_vocab_size": 2})
    assert spec.lm_head is False
    result = activation_bytes(spec, TrainingShape(sequence_length=128), 8, "fp16")
    assert result.logits == 0
    mlm = spec_from_hf_config({"model_type": "bert", "architectures": ["BertForMaskedLM"],
                               "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                               "intermediate_size": 512, "vocab_size": 30522, "max_position_embeddings": 512,
                               "type_vocab_size": 2})
    # BertForMaskedLM: nn.CrossEntropyLoss on fp16 logits, 3 × 2 B
    assert activation_bytes(mlm, TrainingShape(sequence_length=128), 8, "fp16").logits == \
        3 * 2 * 8 * 128 * 30522 + 8 * 8 * 128
    described = ModelSpec(parameters=P, **GPT, vocab_size=1000, lm_head=False)
    assert activation_bytes(described, TrainingShape(sequence_length=128), 1, "fp16").logits == 0


def test_no_dropout_no_masks():
    # Llama: attention_dropout 0.0 and no residual dropout: no masks; RMSNorm keeps an fp32 copy
    llama = spec_from_hf_config({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 128,
                                 "intermediate_size": 344, "num_hidden_layers": 2, "num_attention_heads": 4,
                                 "num_key_value_heads": 2, "vocab_size": 1000})
    s, b, h, f, kv, a = 64, 4, 128, 344, 64, 4
    # SDPA, bf16: 2 RMSNorms 2 × (4h + 2h + 4); input, Q, K, V (kv), out-proj input; LSE 4a; MLP input 2h +
    # 4 × 2f (SiLU input, its output, up, product)
    per_token = 2 * (6 * h + 4) + (2 * h + 2 * h + 4 * kv + 2 * h + 4 * a) + (2 * h + 8 * f)
    assert activation_bytes(llama, TrainingShape(sequence_length=s), b, "bf16").per_layer == s * b * per_token


def test_estimate_counts_the_activation_term():
    spec = ModelSpec(parameters=P, **GPT)
    result = estimate({"fp16": {"enabled": True}}, spec, TrainingShape(sequence_length=2048), Cluster(gpus=1))
    assert result.stage(1).per_gpu["activations"] == act(GPT, flash=True).nbytes


def test_t5_under_sdpa_keeps_a_position_bias_per_attention():
    # sdpa_attention.py create_position_bias_mask: torch.where(padding mask, position_bias, min) is a new
    # (b, a, q, k) tensor per attention; the fused kernel keeps it for the bias gradient (a bound). Per encoder
    # layer a·s²·b·e, per decoder layer a·t²·b·e (self) + a·t·s·b·e (cross); 2 + 2 layers, 4 heads, bf16
    spec = spec_from_hf_config(T5)
    fused = activation_bytes(spec, TrainingShape(sequence_length=64, target_length=32), 4, "bf16")
    enc, dec = dict(fused.parts)["encoder layer"], dict(fused.parts)["decoder layer"]
    no_bias = dict(activation_bytes(spec_from_hf_config({**T5, "model_type": "t5"}),
                                    TrainingShape(sequence_length=64, target_length=32,
                                                  activation_checkpointing="selective"), 4, "bf16").parts)
    assert enc - no_bias["encoder layer"] == 4 * 64 * 64 * 4 * 2
    assert dec - no_bias["decoder layer"] == 4 * 32 * 32 * 4 * 2 + 4 * 32 * 64 * 4 * 2


def _llama_like(model_type: str, **extra: object) -> dict:
    return {"model_type": model_type, "hidden_size": 4096, "num_hidden_layers": 2, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288, "vocab_size": 151936, **extra}


def _per_layer(config: dict, seq: int = 1024, flash: bool = True) -> int:
    spec = spec_from_hf_config(config)
    shape = TrainingShape(sequence_length=seq, activation_checkpointing="none", flash_attention=flash)
    return activation_bytes(spec, shape, 1, "bf16").per_layer


def test_qwen3_q_and_k_norms_keep_what_an_rms_norm_keeps_per_head():
    # Qwen3Attention's q_norm / k_norm (LlamaRMSNorm's code over head_dim): per token the fp32 input, the cast
    # input and one fp32 rstd per head, at 32 query heads (4096 wide) and 8 kv heads (1024 wide)
    s = 1024
    qk = (4 * 4096 + 2 * 4096 + 4 * 32) + (4 * 1024 + 2 * 1024 + 4 * 8)
    assert _per_layer(_llama_like("qwen3")) - _per_layer(_llama_like("qwen2")) == s * qk


def test_gemma2_four_norms_and_soft_caps_gemma3_its_q_k_norms():
    g2 = _llama_like("gemma2", architectures=["Gemma2ForCausalLM"])
    g3 = _llama_like("gemma3_text", architectures=["Gemma3ForCausalLM"])
    gemma = _llama_like("gemma", architectures=["GemmaForCausalLM"])
    s, a, norm = 1024, 32, 2 * 4 * 4096 + 4  # GemmaRMSNorm over h = 4096: two fp32 tensors and the rstd
    # two more norms per layer than Gemma (pre- and post-feedforward, post-attention)
    assert _per_layer(g2) - _per_layer(gemma) == s * 2 * norm
    # eager: Gemma 2's attn_logit_softcapping keeps the tanh output, one bf16 score tensor more
    assert _per_layer(g2, flash=False) - _per_layer(g2) - (_per_layer(gemma, flash=False) - _per_layer(gemma)) == \
        a * s * s * 2
    # a null cap turns it off, as `if config.attn_logit_softcapping is not None`
    off = dict(g2, attn_logit_softcapping=None)
    assert _per_layer(off, flash=False) - _per_layer(g2, flash=False) == -a * s * s * 2
    # Gemma 3: q/k GemmaRMSNorm per head, no caps by default
    assert _per_layer(g3) - _per_layer(g2) == s * ((2 * 4 * 4096 + 4 * 32) + (2 * 4 * 1024 + 4 * 8))
    assert _per_layer(g3, flash=False) - _per_layer(g3) < _per_layer(g2, flash=False) - _per_layer(g2)
    # the logits' soft-cap: its tanh output (bf16, vocabulary-wide) is kept with the head's input
    spec2, spec_off = spec_from_hf_config(g2), spec_from_hf_config(dict(g2, final_logit_softcapping=None))
    shape = TrainingShape(sequence_length=s, activation_checkpointing="none", flash_attention=True)
    capped, plain = activation_bytes(spec2, shape, 1, "bf16"), activation_bytes(spec_off, shape, 1, "bf16")
    assert capped.nbytes - plain.nbytes == 2 * s * 151936


def test_moe_layers_keep_the_router_and_dispatch_tensors():
    s, h, e = 1024, 4096, 2
    dense = _llama_like("qwen3", intermediate_size=768)
    moe = _llama_like("qwen3_moe", moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8,
                      decoder_sparse_step=1)
    k, E, f = 8, 128, 768
    # routed: k experts' gated MLPs (4 × 2f each) instead of one; the router's fp32 probabilities over E, four
    # int64 index tensors of k per token, and per routed copy its gathered input, its down output and its weight
    extra = (k - 1) * 4 * e * f + 4 * E + 4 * 8 * k + k * (2 * e * h + e)
    assert _per_layer(moe) - _per_layer(dense) == s * extra
    # Qwen2-MoE's shared expert: a gated MLP of its own width (4 tensors of it; its gate's sigmoid output and the
    # shared output the product keeps are the same at any width: the oracle measures them)
    q2 = _llama_like("qwen2_moe", moe_intermediate_size=768, num_experts=64, num_experts_per_tok=8,
                     shared_expert_intermediate_size=2048, decoder_sparse_step=1)
    narrower = dict(q2, shared_expert_intermediate_size=1024)
    assert _per_layer(q2) - _per_layer(narrower) == s * 4 * e * 1024


def test_deepseek_latent_attention_norms_value_width_and_fp32_router_input():
    base = {"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 2048,
            "num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 8192,
            "vocab_size": 1000, "n_routed_experts": 64, "num_experts_per_tok": 6, "moe_intermediate_size": 1408,
            "n_shared_experts": 2, "first_k_dense_replace": 0, "kv_lora_rank": 512, "q_lora_rank": 1536,
            "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "n_group": 1, "topk_group": 1}
    spec = spec_from_hf_config(base)
    assert spec.latent_ranks == (1536, 512) and spec.value_head_dim == 128 and spec.head_dim == 192
    s, e = 1024, 2
    no_q_rank = dict(base, q_lora_rank=None)
    # q_a_layernorm over the 1536-wide latent: an RMSNorm's fp32 input, cast input and rstd, and q_b_proj's input
    assert _per_layer(base) - _per_layer(no_q_rank) == s * (4 * 1536 + e * 1536 + 4 + e * 1536)
    # values and the out-projection input are v_head_dim wide, not the 192-wide query/key head: a narrower value
    # head keeps less
    wider_v = dict(base, v_head_dim=192)
    assert _per_layer(wider_v) - _per_layer(base) == s * e * 16 * (192 - 128) * 2
    # the router's input kept in fp32 (DeepseekV3TopkRouter: F.linear(hidden_states.type(torch.float32), ...))
    facts = spec_from_hf_config(base).layer_facts
    assert facts is not None and facts.router_fp32_input


def _per_layer_at(config: dict, transformers: str | None, seq: int = 1024) -> int:
    spec = spec_from_hf_config(config, transformers=transformers)
    shape = TrainingShape(sequence_length=seq, activation_checkpointing="none", flash_attention=True)
    return activation_bytes(spec, shape, 1, "bf16").per_layer


def test_transformers_4x_moe_loop_and_sdpa_repeat_kv():
    s, e, h = 1024, 2, 4096
    moe = _llama_like("qwen3_moe", moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8,
                      decoder_sparse_step=1)
    k = 8
    # SDPA before 4.54 repeats K/V to every query head (32 x 128 wide, not 8 x 128): two 3072-wide tensors more
    dense = _llama_like("qwen3")
    assert _per_layer_at(dense, "4.53.3") - _per_layer_at(dense, "4.54.1") == s * 2 * e * (4096 - 1024)
    assert _per_layer_at(dense, "4.54.1") == _per_layer_at(dense, None)
    # 4.x's loop over nn.Linear experts keeps one more h-wide tensor per routed copy and two int64 fewer
    assert _per_layer_at(moe, "4.57.1") - _per_layer_at(moe, "5.0.0") == s * k * (e * h - 2 * 8)
    facts = spec_from_hf_config(moe, transformers="4.57.1").layer_facts
    assert facts is not None and facts.expert_loop and not facts.sdpa_repeat_kv


def test_the_sdpa_repeat_kv_note_names_the_release():
    spec = spec_from_hf_config(_llama_like("qwen3"), transformers="4.51.3")
    shape = TrainingShape(sequence_length=1024, activation_checkpointing="none", flash_attention=True)
    notes = activation_bytes(spec, shape, 1, "bf16").notes
    assert any("transformers 4.51.3's SDPA repeats K/V" in n and "a bound" in n for n in notes)
    current = activation_bytes(spec_from_hf_config(_llama_like("qwen3")), shape, 1, "bf16").notes
    assert not any("repeats K/V" in n for n in current)


def test_liger_patches_qwen3_q_and_k_norms_too():
    # liger_kernel monkey_patch.py apply_liger_kernel_to_qwen3 (0.8.5) patches self_attn.q_norm and k_norm:
    # LigerRMSNorm keeps its input and one fp32 RSTD per head
    spec_q3, spec_q2 = spec_from_hf_config(_llama_like("qwen3")), spec_from_hf_config(_llama_like("qwen2"))
    shape = TrainingShape(sequence_length=1024, activation_checkpointing="none", flash_attention=True,
                          liger_kernel=True)
    s, e = 1024, 2
    q3 = activation_bytes(spec_q3, shape, 1, "bf16").per_layer
    q2 = activation_bytes(spec_q2, shape, 1, "bf16").per_layer
    assert q3 - q2 == s * ((e * 4096 + 4 * 32) + (e * 1024 + 4 * 8))


def test_openrlhf_s_loss_matches_its_own_code_measured_on_cpu():
    """benchmarks/openrlhf_loss.json: OpenRLHF 0.8.5's own Actor.forward, log_probs_from_logits, SFTLoss and
    DPOTrainer.concatenated_forward with a CPU replica of flash-attn's cross-entropy kernel's allocations
    (benchmarks/calibrate_openrlhf_loss.py): 2.51 fp32 copies of the logits, the held fp32 logits, the kernel's one
    gradient tensor and its bf16 cast. The estimate is within 1% of each; before 0.7.0 (SFT's GPTLMLoss, DPO's own
    log-softmax) the plain loss's three copies are kept."""
    import dataclasses
    import json
    from pathlib import Path

    from zeroadvisor.config.method import MethodSetup
    from zeroadvisor.memory.method import activation_spec, kto_kl_terms
    from zeroadvisor.memory.parallel import Parallel
    from zeroadvisor.model.spec import Checkpointing
    from zeroadvisor.vocab import Method, TrainerFamily

    data = json.loads((Path(__file__).resolve().parent.parent / "benchmarks" / "openrlhf_loss.json").read_text())
    spec = spec_from_hf_config(data["model"])
    assert {row["method"] for row in data["rows"]} == {"sft", "dpo", "ppo", "kto"}
    for row in data["rows"]:
        setup = MethodSetup(method=Method(row["method"]), trainer=TrainerFamily.OPENRLHF, trainer_version="0.8.5",
                            entropy_coef=row["entropy_coef"])
        shape = TrainingShape(row["tokens"], Checkpointing.FULL, True, method=setup)
        view = activation_spec(setup, spec)
        act = activation_bytes(view, shape, row["rows"], "bf16")
        if setup.method == Method.KTO:  # the KL half held with its graph: 4 copies of the matched half's logits
            held = kto_kl_terms(shape, spec, row["rows"], Parallel(), act.backward_kept)
            assert abs((act.nbytes + sum(t.nbytes for t in held)) / row["peak"] - 1) < 0.01, row
            assert act.nbytes / row["peak"] < 0.8 and row["measured_copies"] > 3.9, row  # the plain count: 3
            continue
        assert abs(act.nbytes / row["peak"] - 1) < 0.01, row
        if row["entropy_coef"]:  # the entropy's gradient beside the kernel's and their sum: 1.5 copies more
            assert row["measured_copies"] > 3.9, row
            continue
        assert row["measured_copies"] < 2.6, row  # no entropy in the loss: its graph never runs backward
        older = dataclasses.replace(setup, trainer_version="0.6.4")
        plain = activation_bytes(activation_spec(older, spec), dataclasses.replace(shape, method=older), row["rows"],
                                 "bf16").nbytes
        assert plain / row["peak"] > 1.15, row
