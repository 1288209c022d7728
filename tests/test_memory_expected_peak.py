"""The expected peak and its bound (memory/terms.py Term.bound, memory/verdict.py): the verdict compares the expected
peak with the card, the span up to the bound is what "tight" means, and the JSON keeps peak_gpu/per_gpu/fits (the
expected peak and its verdict) with the bound added beside them."""

from __future__ import annotations

import json

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.memory.verdict import DOES_NOT_FIT, FITS, TIGHT, PhasePeak, judge, judge_one
from zeroadvisor.model.spec import ModelSpec, TrainingShape

GB = 10**9
SPEC = ModelSpec(parameters=6_738_415_616, largest_layer_parameters=131_072_000, num_layers=32, hidden_size=4096,
                 num_attention_heads=32, intermediate_size=11008, vocab_size=32000)
CONFIG = {"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}
SHAPE = TrainingShape(sequence_length=4096)


def _configured(gpu_memory=None):
    est = estimate(CONFIG, SPEC, SHAPE, Cluster(gpus=8, gpu_memory=gpu_memory))
    st = est.configured
    assert st is not None
    return est, st


def test_judge_one_says_tight_where_only_the_bound_crosses_the_card():
    # expected 80 GB on a 100 GB card with 10% headroom fits; its bound at 105 GB makes it tight, never does-not-fit
    assert judge_one(80 * GB, 100 * GB, 0.10, bound=105 * GB) == TIGHT
    assert judge_one(80 * GB, 100 * GB, 0.10, bound=89 * GB) == FITS
    assert judge_one(101 * GB, 100 * GB, 0.10, bound=101 * GB) == DOES_NOT_FIT
    peaks = [PhasePeak("train", 80 * GB, 0, 0, gpu_bound=105 * GB)]
    assert judge(peaks, {"gpu": 100 * GB, "host": None, "nvme": None}, 0.10).verdict == TIGHT


def test_the_peak_is_the_sum_of_expected_terms_and_the_bound_the_sum_of_bounds():
    _, st = _configured()
    train = [t for t in st.terms if t.phase == "train" and t.device == "gpu"]
    assert st.per_gpu["total"] == sum(t.nbytes for t in train)
    assert st.per_gpu_bound["total"] == sum(t.upper for t in train)
    # the allocator's allowance leaves room above its expected bytes: the bound is above the expected peak
    assert st.peak_gpu_bound > st.peak_gpu


def test_a_run_whose_bound_exceeds_the_card_but_expected_does_not_is_tight():
    _, free = _configured()
    card = (free.peak_gpu + free.peak_gpu_bound) // 2  # expected below it, bound above it
    est, st = _configured(card)
    assert st.peak_gpu < card < st.peak_gpu_bound
    assert st.counted_verdict == TIGHT and st.fits is True
    assert est.to_dict()["stages"][[s.configured for s in est.stages].index(True)]["verdict"] == TIGHT


def test_json_keeps_its_fields_and_adds_the_bound(cli, tmp_path):
    config = tmp_path / "ds.json"
    config.write_text(json.dumps(CONFIG))
    result = cli("estimate", str(config), "--model", "sample_configs/models/llama-2-7b.yaml", "--gpus", "8",
                 "--gpu-memory", "80GiB", "--seq-len", "4096", "--format", "json")
    assert result.returncode == 0, result.stderr
    (st,) = [s for s in json.loads(result.stdout)["stages"] if s["configured"]]
    assert {"peak_gpu", "per_gpu", "fits", "verdict"} <= st.keys()
    assert st["peak_gpu_bound"] > st["peak_gpu"] == max(p["gpu"] for p in st["phases"].values())
    assert st["per_gpu_bound"]["total"] >= st["per_gpu"]["total"]
    assert st["phases"]["train"]["gpu_bound"] == st["per_gpu_bound"]["total"]
    (frag,) = [t for t in st["terms"] if t["key"] == "fragmentation"]
    assert frag["bound"] > frag["bytes"]
    assert all(t["bound"] >= t["bytes"] for t in st["terms"])


def test_the_text_report_says_the_expected_peak_and_its_bound(cli, tmp_path):
    config = tmp_path / "ds.json"
    config.write_text(json.dumps(CONFIG))
    result = cli("estimate", str(config), "--model", "sample_configs/models/llama-2-7b.yaml", "--gpus", "8",
                 "--gpu-memory", "80GiB", "--seq-len", "4096", "--explain")
    assert result.returncode == 0, result.stderr
    assert "expected, up to" in result.stdout
    assert "(up to " in result.stdout  # the fragmentation term's bound beside its expected bytes
