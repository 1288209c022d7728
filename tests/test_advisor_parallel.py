"""Advice on parallel layouts: Ulysses sequence parallelism when one sample's activations do not fit, and
offload advice on AutoTP configs costed over the data-parallel degree (GPUs / tensor).

Hand arithmetic (Llama-2-7B, h 4096, f 11008, 32 layers, 32 heads, vocab 32000, 6,738,415,616 parameters):
one block's linears are 4·4096² = 67,108,864 (q, k, v, o) + 3·4096·11008 = 135,266,304 (gate, up, down);
AutoTP 2 keeps half of them, 32·202,375,168 / 2 = 3,238,002,688, plus the 262,410,240 it leaves whole
(embeddings, head, norms) = 3,500,412,928 parameters per GPU. ZeRO partitions them over the data-parallel
degree 8 / 2 = 4 (runtime/engine.py: the data-parallel group of the (world/tp, tp) mesh).
DeepSpeed's batch assertion divides the world by sequence_parallel_size (runtime/config.py
DeepSpeedConfig.__init__): train_batch_size 16 at micro batch 1 on 8 GPUs with sp 4 needs 16 / (1·8/4) = 8
accumulation steps.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from zeroadvisor.advisor.candidates import offloads
from zeroadvisor.advisor.check import CheckOptions, check_document
from zeroadvisor.advisor.search import Searcher
from zeroadvisor.config import merge_patch as mp
from zeroadvisor.config.source import parse
from zeroadvisor.hardware.table import GpuSpec
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import TrainingShape

LLAMA2_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000}
GB = 10**9
HEADS = 32
GPUS = 8
ZERO3 = {"train_batch_size": 16, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2,
         "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}


def _options(shape: TrainingShape, gpu_memory: int = 80 * GB, model: dict = LLAMA2_7B) -> CheckOptions:
    return CheckOptions(model=spec_from_hf_config(model), shape=shape,
                        cluster=Cluster(gpus=GPUS, gpu_memory=gpu_memory))


def _check(config: dict, options: CheckOptions):
    return check_document(parse(json.dumps(config), "ds.json"), options)


def _codes(result, code: str):
    return [f for f in result.findings if f.code == code]


def _sp_degree(message: str) -> int:
    words = message.split("Ulysses sequence parallel ", 1)[1].split()
    return int(words[0])


def test_long_sequence_without_checkpointing_names_sequence_parallel():
    """seq 32768, micro batch 1, no checkpointing: activations dominate and even one sample does not fit."""
    result = _check(ZERO3, _options(TrainingShape(32768, "none")))
    [dominate] = _codes(result, "ZA803")
    assert "even micro batch 1 does not fit" in dominate.message
    sp = _sp_degree(dominate.message)
    assert sp in (2, 4, 8) and HEADS % sp == 0 and GPUS % sp == 0
    assert _codes(result, "ZA801")  # it does not fit as configured


@pytest.mark.parametrize("sequence", [98304, 131072, 262144])  # 65536 fits an 80 GB card with checkpointing
def test_sequence_parallel_is_the_cheapest_fit_once_checkpointing_is_on(sequence):
    """With full checkpointing already on, one sample's activations grow with the sequence: Ulysses splits them.
    The degree offered is the smallest of 2, 4, 8 that fits (half of it does not), and the accumulation keeps
    train_batch_size 16 under DeepSpeed's batch rule: 16 / (micro batch 1 · 8 GPUs / sp)."""
    options = _options(TrainingShape(sequence, "full"))
    result = _check(ZERO3, options)
    [does_not_fit] = _codes(result, "ZA801")
    assert "Cheapest change that fits: Ulysses sequence parallel" in does_not_fit.message \
        or "Ulysses sequence parallel" in does_not_fit.message.split("Cheapest change that fits: ZeRO-", 1)[1]
    assert "DistributedAttention" in does_not_fit.message  # the training-script action is stated
    degree = does_not_fit.fix["sequence_parallel_size"]
    assert degree in (2, 4, 8) and HEADS % degree == 0 and GPUS % degree == 0
    # ZeRO-0/1/2 move 1x the data-parallel volume against ZeRO-3's 1.5x: a lower stage is part of the fix if it fits
    assert {k: v for k, v in does_not_fit.fix.items() if k != "zero_optimization"} == {
        "sequence_parallel_size": degree, "gradient_accumulation_steps": 16 // (GPUS // degree)}
    assert does_not_fit.fix.get("zero_optimization", {"stage": 3})["stage"] in (0, 1, 2, 3)
    if degree > 2:  # the smallest degree that fits
        half = mp.apply(ZERO3, {"sequence_parallel_size": degree // 2,
                                "gradient_accumulation_steps": 16 // (GPUS // (degree // 2))})
        assert not estimate(half, options.model, options.shape, options.cluster).configured.comfortable
    fixed = mp.apply(ZERO3, does_not_fit.fix)
    again = _check(fixed, options)
    assert not _codes(again, "ZA801") and not _codes(again, "ZA401")
    assert estimate(fixed, options.model, options.shape, options.cluster).parallel.sequence == degree


def test_sequence_parallel_patch_without_train_batch_size_keeps_the_global_batch():
    """Without train_batch_size DeepSpeed derives it as micro batch 1 x accumulation 2 x 8 GPUs = 16; at sp 4 the
    world is 8 / 4 = 2, so accumulation 8 keeps 16 samples per step."""
    config = {k: v for k, v in ZERO3.items() if k != "train_batch_size"}
    options = _options(TrainingShape(262144, "full"))  # 131072 tokens now fit at sp 2
    [does_not_fit] = _codes(_check(config, options), "ZA801")
    assert does_not_fit.fix["sequence_parallel_size"] == 4
    assert does_not_fit.fix["gradient_accumulation_steps"] == 8
    assert not _codes(_check(mp.apply(config, does_not_fit.fix), options), "ZA401")


def test_no_sequence_parallel_when_the_batch_keys_are_auto():
    """The HF integration fills "auto" from its own world size; a written sp would break its arithmetic."""
    config = {**ZERO3, "train_batch_size": "auto", "gradient_accumulation_steps": "auto"}
    [does_not_fit] = _codes(_check(config, _options(TrainingShape(131072, "full"))), "ZA801")
    assert "sequence parallel" not in does_not_fit.message


def test_degree_divides_the_kv_heads():
    """A model with 2 kv heads (grouped-query attention) can only be split 2 ways by Ulysses."""
    gqa = {**LLAMA2_7B, "num_key_value_heads": 2}
    options = _options(TrainingShape(262144, "full"), model=gqa)
    spec, shape, cluster = options.model, options.shape, options.cluster
    searcher = Searcher(ZERO3, spec, shape, cluster, "deepspeed", estimate(ZERO3, spec, shape, cluster))
    assert [change.sequence_parallel for change in searcher.search.sequence_parallel_changes()] == [2]


def test_short_sequence_gets_no_sequence_parallel():
    """seq 4096: micro batch 4 without checkpointing lets activations dominate, but one sample fits, so a smaller
    micro batch (no communication) is the answer, not Ulysses."""
    config = {"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}
    result = _check(config, _options(TrainingShape(4096, "none")))
    [dominate] = _codes(result, "ZA803")
    assert "sequence parallel" not in dominate.message
    assert all("sequence parallel" not in f.message and "sequence_parallel_size" not in json.dumps(f.fix)
               for f in result.findings)


def test_offload_advice_on_autotp_uses_the_data_parallel_degree():
    """ZeRO-2 on AutoTP 2 does not fit 24 GB; the optimizer offload that fits keeps a master partition of
    4 B x 3,500,412,928 / 4 (data degree 8 / 2), not / 8."""
    config = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {"stage": 2},
              "tensor_parallel": {"autotp_size": 2}}
    spec, shape = spec_from_hf_config(LLAMA2_7B), TrainingShape(4096, "full")
    cluster = Cluster(gpus=GPUS, gpu_memory=24 * GB)
    written = estimate(config, spec, shape, cluster)
    assert written.parallel.data == 4
    found = Searcher(config, spec, shape, cluster, "deepspeed", written).cheapest_fit()
    assert found is not None and found.change.option.offload_optimizer == "cpu"
    local = 32 * (4 * 4096**2 + 3 * 4096 * 11008) // 2 + (6_738_415_616 - 32 * (4 * 4096**2 + 3 * 4096 * 11008))
    assert local == 3_500_412_928
    terms = {t.key: t.nbytes for t in found.stage.terms if t.phase == "train"}
    assert terms["master"] == 4 * local // 4
    assert terms["optimizer_state"] == 8 * local // 4
    assert found.stage.per_gpu["parameters"] == 2 * local  # bf16 parameters, not partitioned below stage 3


# One block of h 4096 and a 64x MLP (f 262144): each MLP projection is h·f = 1,073,741,824 parameters, which
# ZeRO-3 gathers whole (2 B each) and whose full gradient it holds before the reduce: 4.29 GB at t = 1 whatever
# the offload, against 7 GB GPUs. AutoTP t shards it to h·f/t (module_inject/auto_tp.py LinearLayer).
WIDE_MLP = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 4096 * 64, "num_hidden_layers": 1,
            "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000}
WIDE_GPUS = 64
# No prefetch and no reuse window: ZeRO-3 then keeps only the module it computes gathered (memory/buffers.py
# gathered_terms: L_p), so what decides these tests is the projection itself, not the working set's bound.
WIDE_ZERO3 = {"train_batch_size": 128, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2,
              "bf16": {"enabled": True}, "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 0,
                                                               "stage3_max_reuse_distance": 0}}


def _tp_degree(message: str) -> int:
    return int(message.split("AutoTP tensor parallel ", 1)[1].split(maxsplit=1)[0])


# A 7.5 GB card with NVLink-class links (faster GPU-to-GPU than to the host): AutoTP's per-layer all-reduces stay
# on them, so the search may offer it (advisor/search.py tensor_parallel_changes); the same card over PCIe only
# may not.
# (7.5 GB: since ZeRO-3 counts its optimizer step's fp32 gradient one sub-group at a time after the activations are
# freed (memory/step_temporaries.py), ZeRO-3 with both offloads fits an 8 GB card without a layout change)
_7_5GB = 15 * GB // 2 // 2**20
NVLINK_7_5GB = GpuSpec("test-7.5GB-nvlink", _7_5GB, 100.0, 300.0, 32.0, "test card")
PCIE_7_5GB = GpuSpec("test-7.5GB-pcie", _7_5GB, 100.0, 32.0, 32.0, "test card")


def test_tensor_parallel_fits_where_one_layer_does_not_but_offload_is_recommended_first():
    """At micro batch 1 with full checkpointing, no stage or offload fits without a layout change (the gathered
    MLP projection stays on the GPU under every offload), and no Ulysses degree without offload; AutoTP does
    without offload. AutoTP is a script change offered only where nothing else fits (advisor/ranking.py), so
    the fix is a Ulysses run with offload; the AutoTP candidate, written, is a layout DeepSpeed accepts."""
    options = CheckOptions(model=spec_from_hf_config(WIDE_MLP), shape=TrainingShape(512, "full"),
                           cluster=Cluster(gpus=WIDE_GPUS, gpu=NVLINK_7_5GB))
    spec, shape, cluster = options.model, options.shape, options.cluster
    written = estimate(WIDE_ZERO3, spec, shape, cluster)
    searcher = Searcher(WIDE_ZERO3, spec, shape, cluster, "deepspeed", written)
    candidates = searcher.candidates()  # every stage x offload x checkpointing x micro batch x layout that fits
    assert candidates and all(change.config_patch for change, _ in candidates)  # none without a layout change
    assert all(change.tensor_parallel or offloads(change.option) for change, _ in candidates)  # only AutoTP w/o offload
    assert spec.largest_layer_parameters == 4096 * 262144
    result = _check(WIDE_ZERO3, options)
    [does_not_fit] = _codes(result, "ZA801")
    assert "AutoTP" not in does_not_fit.message.split("Cheapest change that fits:")[1]
    assert does_not_fit.fix is not None and "tensor_parallel" not in does_not_fit.fix
    autotp = min((change for change, _ in searcher.candidates() if change.tensor_parallel),
                 key=lambda change: change.tensor_parallel)  # the smallest degree that fits
    tp = autotp.tensor_parallel
    outcome = searcher.outcome(autotp)
    assert outcome is not None and outcome.patch is not None and outcome.patch["tensor_parallel"] == {"autotp_size": tp}
    assert 32 % tp == 0 and 8 % tp == 0 and cluster.gpus_per_node % tp == 0 and 262144 % tp == 0
    fixed = mp.apply(WIDE_ZERO3, outcome.patch)
    again = _check(fixed, options)
    assert not _codes(again, "ZA801") and not _codes(again, "ZA401")
    # written, the AutoTP run is the one priced: its option at the peak the candidate states (issue 36 item 4)
    assert again.estimate is not None and again.estimate.configured is not None
    assert again.estimate.configured.option == outcome.stage.option
    assert again.estimate.configured.peak_gpu == outcome.stage.peak_gpu
    written = _check(WIDE_ZERO3, options)
    [fix] = _codes(written, "ZA801")
    rec = fix.recommends
    assert fix.fix is not None and rec is not None
    rewritten = _check(mp.apply(WIDE_ZERO3, fix.fix), replace(options, shape=rec.change.shape))
    assert rewritten.estimate is not None and rewritten.estimate.configured is not None
    assert rewritten.estimate.configured.peak_gpu == rec.peak_gpu  # the recommended fix too, written alone
    layout = estimate(fixed, spec, shape, cluster).parallel
    assert (layout.tensor, layout.data) == (tp, WIDE_GPUS // tp)
    terms = {t.key: t.nbytes for t in estimate(fixed, spec, shape, cluster).stage(3, "none", "none").terms
             if t.phase == "train"}
    assert terms["gathered_grad"] == 2 * 4096 * 262144 // tp  # the tensor rank's shard of the projection


@pytest.mark.parametrize("cluster", [Cluster(gpus=WIDE_GPUS, gpu=PCIE_7_5GB),
                                     Cluster(gpus=WIDE_GPUS, gpu_memory=8 * GB)],
                         ids=["pcie-only", "links-unknown"])
def test_tensor_parallel_is_not_offered_without_links_for_it(cluster):
    """The same run on cards whose GPU-to-GPU link is no faster than PCIe, or whose links nobody named: AutoTP
    is never a candidate (its all-reduces per layer would cross PCIe; the issue's RTX 4090 case)."""
    spec, shape = spec_from_hf_config(WIDE_MLP), TrainingShape(512, "full")
    searcher = Searcher(WIDE_ZERO3, spec, shape, cluster, "deepspeed", estimate(WIDE_ZERO3, spec, shape, cluster))
    assert list(searcher.search.tensor_parallel_changes()) == []
    assert not any(change.tensor_parallel for change, _ in searcher.candidates())


def test_no_tensor_parallel_for_7b_on_a100_80gb():
    """Llama-2-7B fits 8 x A100-80GB at ZeRO-3 with room: no AutoTP candidate, no TP in any finding."""
    options = _options(TrainingShape(4096, "full"))
    spec, shape, cluster = options.model, options.shape, options.cluster
    searcher = Searcher(ZERO3, spec, shape, cluster, "deepspeed", estimate(ZERO3, spec, shape, cluster))
    assert not any(change.tensor_parallel for change, _ in searcher.candidates())
    result = _check(ZERO3, options)
    assert all("tensor_parallel" not in json.dumps(f.fix) and "AutoTP" not in f.message for f in result.findings)


def test_no_tensor_parallel_when_a_smaller_micro_batch_fits():
    """Micro batch 4 at seq 4096 without checkpointing does not fit 80 GB; checkpointing or a smaller micro batch
    does, with no communication: AutoTP is not offered."""
    config = {"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}
    result = _check(config, _options(TrainingShape(4096, "none")))
    assert all("tensor_parallel" not in json.dumps(f.fix) and "AutoTP" not in f.message for f in result.findings)
