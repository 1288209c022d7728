"""``check --fix`` is idempotent on the real corpus: after its patch is written, a second check
proposes nothing more (fix(fix(x)) == fix(x)).

Before the search estimated candidates as the fixes write them, 113 of 395 corpus rewrites (7B on
8x A10G, 70B on 8x A100-80GB) were not: the first run said "nothing fits" or chose ZeRO-3 while its
own bucket fix made a lower stage fit, proposed a micro batch whose accumulation broke the batch
assertion, or switched ZeRO on without the zero_allow_untested_optimizer it then needs.
Model shapes are the published Hugging Face config.json values.
"""

from __future__ import annotations

import json

import pytest

from catalog_models import LLAMA2_7B, LLAMA2_70B, OPT_1_3B
from conftest import corpus_manifest
from zeroadvisor.advisor.check import CheckOptions, check_document, combined_patch
from zeroadvisor.config import merge_patch as mp
from zeroadvisor.config.source import ParseError, parse
from zeroadvisor.hardware.gpus import gpu_memory
from zeroadvisor.memory.cluster import Cluster
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import TrainingShape

# meta-llama/Llama-2-7b-hf, Llama-2-70b-hf and facebook/opt-1.3b config.json (the shipped catalog)

# (model, shape, GPUs, GPU): nothing-fits-as-is, fits-after-changes and lower-stage-fits situations.
SETUPS = {
    "7b-8xA10G": (LLAMA2_7B, TrainingShape(4096, "none"), 8, "A10G"),
    "70b-8xA100": (LLAMA2_70B, TrainingShape(4096, "full"), 8, "A100-SXM4-80GB"),
    "opt-1.3b-8xA100": (OPT_1_3B, TrainingShape(2048, "none"), 8, "A100-SXM4-80GB"),
}
# Every STRIDE-th DeepSpeed JSON config (sorted by name), plus the files that showed each root cause.
STRIDE = 4
ALWAYS = {
    "bacalfa__dist-training-deepspeed__deepspeed_config.json",  # bucket fix vs. the chosen stage
    "caoduycp03__Craftman__deepspeed_config.json",  # micro batch vs. train_batch_size
    "chenyinlin1__deepspeed_practice_example__deepspeed_config.json",  # ZeRO switched on: untested optimizer
    "dominodatalab__ODSC-West-2022-MPI-DeepSpeed__ds_config_simple.json",  # legacy zero_optimization: true
    "TheFlash98__BDML-Assignment1__deepspeed_config.json",  # buckets below 5% that still decide the fit
}


def _sample(root):
    rows = sorted((r for r in corpus_manifest(root) if r["kind"] == "ds_json"), key=lambda r: r["file"])
    return [r["file"] for i, r in enumerate(rows) if i % STRIDE == 0 or r["file"] in ALWAYS]


def _check(data_or_doc, options):
    doc = data_or_doc if not isinstance(data_or_doc, dict) else parse(json.dumps(data_or_doc, indent=2), "ds.json")
    return check_document(doc, options)


@pytest.mark.slow  # a check, a fix and a second check of a corpus sample, per setup
@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_a_second_check_after_fix_proposes_nothing(corpus, setup):
    hf, shape, gpus, gpu = SETUPS[setup]
    options = CheckOptions(model=spec_from_hf_config(hf), shape=shape,
                           cluster=Cluster(gpus=gpus, gpu_memory=gpu_memory(gpu)))
    rewritten, not_idempotent = 0, []
    for name in _sample(corpus):
        try:
            doc = parse((corpus / name).read_text("utf-8"), name)
        except ParseError:
            continue
        if not isinstance(doc.data, dict):
            continue
        patch = combined_patch(_check(doc, options).findings)
        if not patch:
            continue
        rewritten += 1
        fixed = mp.apply(doc.data, patch)
        again = combined_patch(_check(fixed, options).findings)
        if again:
            not_idempotent.append(f"{name}: {json.dumps(again)}")
    assert rewritten >= 10, "the sample should exercise the fixes"
    assert not not_idempotent, "\n".join(not_idempotent)
