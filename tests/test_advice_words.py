"""The fix is the run it priced, and its words match its numbers (issue 36 items 4 and 5): a finding's fix written
alone checks again as the run it promised, buckets included; the headline names every change the fix makes (a
lint fix that changes the stage DeepSpeed runs, the buckets); a recommendation the step-time model puts slower says
so and why it is still recommended, and does not fail a healthy run's CI; the recommendation says why not the
next rung; an "activations not estimated" line names exactly the inputs that are missing."""

from __future__ import annotations

import json

from catalog_models import LLAMA2_7B, OPT_1_3B
from zeroadvisor.advisor.advice import Recommendation
from zeroadvisor.advisor.check import CheckOptions, CheckResult, check_document
from zeroadvisor.config import merge_patch as mp
from zeroadvisor.config.source import parse
from zeroadvisor.hardware.gpus import resolve_gpu
from zeroadvisor.lint.findings import Finding, Severity
from zeroadvisor.memory.cluster import Cluster
from zeroadvisor.memory.estimate import estimate
from zeroadvisor.model.description import spec_from_params
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.report import check_text, overview
from zeroadvisor.vocab import Verdict


def _check(config: dict, model: ModelSpec, shape: TrainingShape, gpus: int, gpu: str,
           cpu_memory: int | None = None) -> tuple[CheckResult, CheckOptions]:
    options = CheckOptions(model=model, shape=shape,
                           cluster=Cluster(gpus=gpus, gpu=resolve_gpu(gpu), cpu_memory=cpu_memory))
    return check_document(parse(json.dumps(config), "ds.json"), options), options


def _finding(result: CheckResult, code: str) -> Finding:
    [found] = [f for f in result.findings if f.code == code]
    return found


def test_a_lower_stage_fix_written_alone_is_the_run_it_priced_buckets_included():
    """OPT-1.3B at ZeRO-3 on 8 x A10G: ZeRO-1 is priced with the smaller buckets large-buckets proposes; its fix,
    written without large-buckets' own, used to write only the stage (11.72 GiB promised, 12.65 GiB written)."""
    config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2, "bf16": {"enabled": True},
              "zero_optimization": {"stage": 3}}
    result, options = _check(config, spec_from_hf_config(OPT_1_3B), TrainingShape(2048, "none"), 8, "A10G",
                             512 * 10**9)
    lower = _finding(result, "ZA802")
    rec = lower.recommends
    assert isinstance(rec, Recommendation) and lower.fix is not None
    assert lower.fix["zero_optimization"]["reduce_bucket_size"] == OPT_1_3B["hidden_size"] ** 2
    assert "reduce/allgather buckets of 4,194,304 elements" in rec.description  # the words name the buckets
    written = estimate(mp.apply(config, lower.fix), options.model, options.shape, options.cluster).configured
    assert written is not None and written.option == rec.option
    assert written.peak_gpu == rec.peak_gpu and written.counted_verdict == Verdict.FITS
    # the same run in the headline, the JSON and SARIF's fix (one object: the finding's Recommendation)
    lead = result.recommendation
    assert lead is not None and lead.patch == lower.fix and lead.change == rec.description
    assert lower.to_dict()["fix"] == lower.fix


def test_the_headline_names_the_stage_a_lint_fix_changes_and_the_lint_fix():
    """A misspelt zero_optimization runs ZeRO-0 as written; the fix renames it and keeps ZeRO-2 with a smaller
    micro batch. The headline used to say only "micro batch 1 with gradient accumulation 16": the stage change
    was in the diff, not in the sentence."""
    config = {"train_batch_size": 128, "train_micro_batch_size_per_gpu": 16, "bf16": {"enabled": True},
              "zero_optimisation": {"stage": 2}}
    result, _ = _check(config, spec_from_hf_config(LLAMA2_7B), TrainingShape(4096, "full"), 8, "A100-SXM4-40GB")
    lead = result.recommendation
    assert lead is not None and lead.code == "ZA801" and lead.change is not None and lead.patch is not None
    assert lead.patch["zero_optimisation"] is None and lead.patch["zero_optimization"]["stage"] == 2
    # the stage and the batch the patch writes, at the same global batch (128 over 8 GPUs)
    micro = lead.patch["train_micro_batch_size_per_gpu"]
    accumulation = lead.patch["gradient_accumulation_steps"]
    assert micro < 16 and micro * accumulation * 8 == 128
    assert lead.change.startswith(f"ZeRO-2, micro batch {micro} with gradient accumulation {accumulation}")
    assert "with this file's lint fixes (renames zero_optimisation to zero_optimization)" in lead.change
    assert f"ZeRO-2, micro batch {micro}" in check_text.recommendation_sentence(lead, "GiB")


def test_a_renamed_key_that_does_not_print_is_shown_as_its_repr_in_one_line():
    """The key a lint fix renames is the user's text: one holding a newline (hjson decodes an escape into it) used
    to break ZA801's message over two lines (found by benchmarks/fuzz.py, seed 7); it is shown as its repr."""
    config = {"train_batch_size": 128, "train_micro_batch_size_per_gpu": 16, "bf16": {"enabled": True},
              "zero_optimisation\n": {"stage": 2}}
    result, _ = _check(config, spec_from_hf_config(LLAMA2_7B), TrainingShape(4096, "full"), 8, "A100-SXM4-40GB")
    lead = result.recommendation
    assert lead is not None and lead.change is not None
    assert "renames 'zero_optimisation\\n' to zero_optimization" in lead.change, lead.change
    assert all("\n" not in f.message for f in result.findings)


def test_a_recommendation_estimated_slower_says_so_and_is_information_on_a_healthy_run():
    """1.3B at ZeRO-3 on 8 x A100-80GB fits with room; the fix (ZeRO-1) is estimated slower than the configured
    run, inside the model's error. The finding says slower and why it is still recommended, and is info: `--fail-on
    warning` does not fail the run on it (it was a warning whose cost said "less communication than ZeRO-3")."""
    config = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}
    result, _ = _check(config, spec_from_params("1.3B"), TrainingShape(2048), 8, "A100-SXM4-80GB")
    lower = _finding(result, "ZA802")
    rec = lower.recommends
    assert isinstance(rec, Recommendation) and rec.step_time_s and rec.configured_step_time_s
    assert rec.step_time_s > rec.configured_step_time_s
    assert lower.severity == Severity.INFO
    assert "slower (estimated" in lower.message and "the published order decides" in lower.message
    assert "less communication" not in rec.cost
    lead = result.recommendation
    assert lead is not None and "slower by the estimate" in lead.speed_short and "slower (estimated" in lead.speed


def test_a_faster_lower_stage_stays_a_warning():
    config = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
              "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}}
    result, _ = _check(config, spec_from_hf_config(LLAMA2_7B), TrainingShape(4096, "full"), 8, "A100-SXM4-80GB")
    lower = _finding(result, "ZA802")
    assert lower.severity == Severity.WARNING and "faster" in lower.message


def test_the_recommendation_says_why_not_the_next_rung():
    """The README's check recommends ZeRO-1; ZeRO-2 fits with more room, and the words say why not it."""
    config = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}
    result, _ = _check(config, spec_from_hf_config(LLAMA2_7B), TrainingShape(4096, "full"), 8, "A100-SXM4-80GB")
    lower = _finding(result, "ZA802")
    rec = lower.recommends
    assert isinstance(rec, Recommendation) and rec.option.stage == 1 and rec.next_rung is not None
    assert rec.next_rung.change.option.stage == 2 and rec.next_rung.stage.peak_gpu < rec.peak_gpu
    assert "not ZeRO-2, though it fits with" in lower.message and "published order" in lower.message
    lead = result.recommendation
    assert lead is not None
    assert "not ZeRO-2, though it fits" in overview.recommendation_words(lead, "GiB")


def test_activations_not_estimated_names_what_is_missing_and_never_what_was_given():
    spec = spec_from_params("7B")
    given = estimate(None, spec, TrainingShape(2048), Cluster(gpus=8)).assumptions
    [line] = [a for a in given if a.startswith("activations not estimated")]
    assert "num_layers or hidden_size" in line and "--seq-len" not in line and "sequence length" not in line
    neither = estimate(None, spec, TrainingShape(), Cluster(gpus=8)).assumptions
    [line] = [a for a in neither if a.startswith("activations not estimated")]
    assert "num_layers or hidden_size" in line and "no sequence length (--seq-len)" in line
    result, _ = _check({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}, spec,
                       TrainingShape(2048), 8, "A100-SXM4-80GB")
    assert "--seq-len" not in overview.verdict_sentence(result.estimate, result.recommendation, "GiB")
