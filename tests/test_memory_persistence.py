"""Stage-3 persistent parameters (zero/parameter_offload.py mark_persistent_parameters).

Numbers are hand calculations from the module shapes of transformers' LlamaForCausalLM
(hidden 256, 4 layers, 8 heads of 32, 4 KV heads, ffn 688, vocab 8000, untied): per layer q and o
are 256·256 = 65,536 elements, k and v 256·128 = 32,768, gate/up/down 256·688 = 176,128, two
RMSNorm weights of 256; plus the final norm and two 8000·256 = 2,048,000 embeddings. Total
4·(2·65,536 + 2·32,768 + 3·176,128 + 2·256) + 256 + 2·2,048,000 = 6,998,272 (what
benchmarks/calibrate.py counts on the live model). Under the 1e5 threshold: q, k, v, o and the
norms, 4·196,608 + 9·256 = 788,736 elements (measured whole on every rank, calibration.md).
"""

from __future__ import annotations

from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.memory.persistence import select
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import ModelSpec

LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256,
         "intermediate_size": 688, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
         "vocab_size": 8000, "tie_word_embeddings": False}
P = 4 * (2 * 65_536 + 2 * 32_768 + 3 * 176_128 + 2 * 256) + 256 + 2 * 2_048_000  # 6,998,272
PERSISTENT = 4 * (2 * 65_536 + 2 * 32_768) + 9 * 256  # q, k, v, o and the norms: 788,736


def z3(precision="bf16", **zero):
    config = {"zero_optimization": {"stage": 3, **zero}, "optimizer": {"type": "AdamW"}}
    if precision != "fp32":
        config[precision] = {"enabled": True}
    return config


def persistent_terms(st):
    return [t for t in st.terms if t.key == "persistent"]


def test_select_follows_deepspeeds_loop():
    # threshold 100, cap 150: 50 kept (50); 200 skipped by the cap check first (250 > 150); 30 kept (80);
    # 100 would make 180 > 150: skipped; 70 kept (150 = cap, not above it)
    assert select([50, 200, 30, 100, 70], threshold=100, model_threshold=150) == [50, 30, 70]
    assert select([50, 200, 30], threshold=0, model_threshold=10**9) == []


def test_hf_config_gives_the_parameter_sizes():
    spec = spec_from_hf_config(LLAMA)
    assert spec.parameters == P
    assert dict(spec.parameter_sizes) == {256: 9, 32_768: 8, 65_536: 8, 176_128: 12, 2_048_000: 2}


def test_stage3_keeps_small_parameters_whole_on_every_rank():
    spec = spec_from_hf_config(LLAMA)
    st = estimate(z3(), spec, cluster=Cluster(gpus=2)).configured
    (term,) = persistent_terms(st)
    assert term.row == "parameters" and term.device == "gpu"
    assert term.nbytes == 2 * PERSISTENT  # every size is even: ceil(n/2)·2 = n
    # parameters row: the bf16 partition ceil(P/2) plus the full copies
    assert st.per_gpu["parameters"] == 2 * (P // 2) + 2 * PERSISTENT
    # gradients and optimizer states stay partitioned (no ds_persist branch in stage3.py)
    assert not [t for t in st.terms if t.key == "persistent" and t.row != "parameters"]


def test_one_rank_keeps_no_copy_unless_the_partition_is_offloaded():
    spec = spec_from_hf_config(LLAMA)
    est = estimate(z3(), spec, cluster=Cluster(gpus=1))
    assert persistent_terms(est.configured) == []
    offloaded = estimate(z3(offload_param={"device": "cpu"}, offload_optimizer={"device": "cpu"}), spec,
                         cluster=Cluster(gpus=1)).configured
    (term,) = persistent_terms(offloaded)
    assert term.nbytes == 2 * PERSISTENT and term.device == "gpu"


def test_copies_are_padded_to_a_multiple_of_the_ranks():
    # 3 ranks: ceil(n/3)·3 per tensor. 256 -> 258, 32,768 -> 32,769, 65,536 -> 65,538
    spec = spec_from_hf_config(LLAMA)
    (term,) = persistent_terms(estimate(z3("fp32"), spec, cluster=Cluster(gpus=3)).configured)
    assert term.nbytes == 4 * (9 * 258 + 8 * 32_769 + 8 * 65_538)


def test_threshold_and_cap():
    spec = spec_from_hf_config(LLAMA)
    # threshold 40,000: only k, v and the norms (8·32,768 + 9·256 = 264,448)
    (term,) = persistent_terms(estimate(z3(stage3_param_persistence_threshold=40_000), spec,
                                        cluster=Cluster(gpus=2)).configured)
    assert term.nbytes == 2 * (8 * 32_768 + 9 * 256)
    assert persistent_terms(estimate(z3(stage3_param_persistence_threshold=0), spec,
                                     cluster=Cluster(gpus=2)).configured) == []
    # a cap below the persistent total, order unknown (sizes only): costed as the cap, and said
    est = estimate(z3(model_persistence_threshold=300_000), spec, cluster=Cluster(gpus=2))
    (term,) = persistent_terms(est.configured)
    assert 2 * 300_000 <= term.nbytes <= 2 * (300_000 + 25)  # + at most N-1 padding per parameter
    assert any("model_persistence_threshold" in n for n in est.assumptions + est.configured.notes)


def test_ordered_list_applies_the_cap_exactly():
    # model.parameters() order of the llama: embed, then per layer q, k, v, o, gate, up, down, 2 norms; final
    # norm, lm_head. Cap 300,000: q 65,536 (65,536), k (98,304), v (131,072), o (196,608); gate/up/down and
    # anything that would pass 300,000 are skipped; the two norms (197,120); layer 2: q (262,656), k (295,424),
    # v would be 328,192: skipped, o too; norms (295,680, 295,936); layers 3 and 4: only their 4 norms fit
    # (296,960), then the final norm (297,216).
    layer = [65_536, 32_768, 32_768, 65_536, 176_128, 176_128, 176_128, 256, 256]
    numels = [2_048_000] + layer * 4 + [256, 2_048_000]
    spec = ModelSpec(parameters=sum(numels), parameter_numels=tuple(numels))
    (term,) = persistent_terms(estimate(z3("fp32", model_persistence_threshold=300_000), spec,
                                        cluster=Cluster(gpus=2)).configured)
    kept = (65_536 + 2 * 32_768 + 65_536 + 2 * 256) + (65_536 + 32_768 + 2 * 256) + 2 * (2 * 256) + 256
    assert sum(select(numels, 100_000, 300_000)) == kept == 297_216
    assert term.nbytes == 4 * kept


def test_without_a_parameter_list_the_norms_are_an_estimate():
    spec = ModelSpec(parameters=7 * 10**9, num_layers=32, hidden_size=4096)
    est = estimate(z3(), spec, cluster=Cluster(gpus=8))
    (term,) = persistent_terms(est.configured)
    assert term.nbytes == 2 * 65 * 4096  # 2 norms per layer + final norm, 4096 divisible by 8
    assert "estimate" in term.what
    assert any("persistent parameters estimated" in n for n in est.assumptions + est.configured.notes)
