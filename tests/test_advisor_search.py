"""The advice search: bounded work on huge batches, patches that keep DeepSpeed's batch assertion.

Numbers are hand arithmetic: 735,134,400 = 2^6·3^3·5^2·7·11·13·17 has 7·4·3·2·2·2·2 = 1,344 divisors;
DeepSpeed asserts train_batch_size == micro · accumulation · world size (runtime/config.py
_batch_assertion), so 64 samples on 8 GPUs at micro batch 2 need 4 accumulation steps.
"""

from __future__ import annotations

import json

import pytest

from conftest import must_finish
from zeroadvisor.advisor.candidates import divisors
from zeroadvisor.advisor.check import CheckOptions, check_document
from zeroadvisor.advisor.search import Searcher
from zeroadvisor.config.source import parse
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import TrainingShape

LLAMA2_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000}
GB = 10**9


def deadline(seconds: int):
    """The old search listed every divisor with range(1, micro_batch)."""
    return must_finish(seconds, "every divisor listed again")


SHAPE = TrainingShape(4096, "none")


def _check(config: dict, gpu_memory: int = 24 * GB, shape=SHAPE):
    options = CheckOptions(model=spec_from_hf_config(LLAMA2_7B), shape=shape,
                           cluster=Cluster(gpus=8, gpu_memory=gpu_memory))
    return check_document(parse(json.dumps(config), "ds.json"), options)


def _searcher(config: dict) -> Searcher:
    spec, shape, cluster = spec_from_hf_config(LLAMA2_7B), TrainingShape(4096), Cluster(gpus=8, gpu_memory=70 * GB)
    return Searcher(config, spec, shape, cluster, "deepspeed", estimate(config, spec, shape, cluster))


def test_divisors_match_brute_force():
    for n in range(1, 300):
        assert divisors(n) == [d for d in range(1, n + 1) if n % d == 0]
    assert len(divisors(735_134_400)) == 1344


@pytest.mark.parametrize("config", [
    {"train_micro_batch_size_per_gpu": 735_134_400, "gradient_accumulation_steps": 1},
    {"train_micro_batch_size_per_gpu": 2**30, "zero_optimization": {"stage": 3}},
    {"train_batch_size": 8 * 1_000_000_007},  # a prime micro batch: only 1 divides it
])
def test_huge_micro_batches_are_searched_in_bounded_time(config):
    with deadline(120):
        result = _check(config)
    assert any(f.code == "ZA801" for f in result.findings)


@pytest.mark.parametrize("config,micro_batch,patch", [
    ({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1}, 2,
     {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4}),
    ({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2}, 2,
     {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 8}),
    # 32 != 8 · 1 · 8 as written: the accumulation is derived from train_batch_size, 32 = 1 · 4 · 8
    ({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 8}, 1,
     {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4}),
    ({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 8}, 3, None),  # 64 is not 3 · k · 8
    ({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": "auto"}, 2, None),
])
def test_micro_batch_patch_keeps_the_global_batch(config, micro_batch, patch):
    assert _searcher(config).as_written.batch.smaller(micro_batch) == patch


def test_activations_dominate_has_no_fix_of_its_own():
    result = _check({"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}},
                    gpu_memory=80 * GB)
    dominate = [f for f in result.findings if f.code == "ZA803"]
    assert dominate and all(f.fix is None for f in dominate)


def test_flash_attention_saving_is_the_score_term():
    config = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}
    spec, cluster = spec_from_hf_config(LLAMA2_7B), Cluster(gpus=8, gpu_memory=70 * GB)
    shape = TrainingShape(4096, "none", flash_attention=False)
    searcher = Searcher(config, spec, shape, cluster, "deepspeed", estimate(config, spec, shape, cluster))
    flash = searcher.flash_attention_outcome()
    plain = searcher.base_estimate.configured
    # Llama's eager attention (llama/modeling_llama.py eager_attention_forward) keeps its softmax in fp32 and the
    # bf16 probabilities the value matmul reads, no dropout mask (attention_dropout 0.0): 6·as²b bytes per layer
    # = 6·32·4096²·1, 32 layers (measured: benchmarks/activations.md); FlashAttention keeps 4 bytes of
    # log-sum-exp per head and token instead.
    scores = 32 * 6 * 32 * 4096 * 4096
    lse = 32 * 4 * 32 * 4096
    assert plain.per_gpu["activations"] - flash.per_gpu["activations"] == scores - lse
    flashed = Searcher(config, spec, TrainingShape(4096, "none"), cluster, "deepspeed",
                       estimate(config, spec, TrainingShape(4096, "none"), cluster))
    assert flashed.flash_attention_outcome() is None
