"""Issue 36 items 1-2 on real estimates of Llama-2-7B and a 70B model: the whole ladder of stages and offloads
(partial offload as rungs of their own, found from the configured rung in both directions), one change before
several (the smallest combination only where no single change fits), and Ulysses wherever activations bind
(with the Hugging Face Trainer's "auto" batch keys too). Each scenario failed before: the lower-stage and
offload rules looked only at rungs without offload, and the ranking put the rung before the number of changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import zeroadvisor
from zeroadvisor.advisor.advice import Recommendation
from zeroadvisor.advisor.ranking import steps, tier
from zeroadvisor.config import merge_patch
from zeroadvisor.flows import CheckReport
from zeroadvisor.lint.findings import ActionKind, Finding
from zeroadvisor.memory.options import Option
from zeroadvisor.vocab import Device, Verdict

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "sample_configs" / "models" / "llama-2-7b.yaml"
LLAMA = ROOT / "sample_configs" / "models" / "llama-2-7b"
BOTH = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
        "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}}}


def _zero3(micro_batch: int) -> dict[str, Any]:
    return {"train_batch_size": 8 * micro_batch, "train_micro_batch_size_per_gpu": micro_batch,
            "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}


def _finding(report: CheckReport, code: str) -> tuple[Finding, Recommendation]:
    (found,) = [f for f in report.findings if f.code == code]
    assert isinstance(found.recommends, Recommendation)
    return found, found.recommends


def _llama(config: dict[str, Any], gpu_memory: str, **shape: Any) -> CheckReport:
    return zeroadvisor.check(config, model=MODEL, gpus=8, gpu_memory=gpu_memory, seq_len=4096, **shape)


# -- the whole ladder ------------------------------------------------------------------------------------------
def test_from_both_offloads_the_optimizer_offload_alone():
    """70B on 8 x 80 GB: ZeRO-3 without offload is over the card, with the optimizer's alone it fits: the partial
    rung is offered (it was "keep": no rule looked at a rung with offload)."""
    report = zeroadvisor.check(BOTH, params="70B", gpus=8, gpu="A100-SXM4-80GB")
    finding, rec = _finding(report, "ZA804")
    assert rec.option == Option(3, Device.CPU) and rec.stage.comfortable
    assert finding.fix == {"zero_optimization": {"offload_param": None}}
    assert "with less offload, fits" in finding.message and "cross PCIe in every forward" in finding.message
    assert not [f for f in report.findings if f.code == "ZA802"]  # no lower stage fits, with or without offload


def test_from_both_offloads_a_lower_stage_keeping_the_optimizer_offload():
    """Llama-2-7B on 2 x 24 GB: neither ZeRO-3 nor a lower stage fits without offload, ZeRO-2 keeping the
    optimizer offloaded does (by a wide margin over what is configured): lower-stage-fits and offload-not-needed
    name it, and it is the one fix both carry."""
    config = json.loads((ROOT / "sample_configs" / "zero3_offload.json").read_text())
    report = zeroadvisor.check(config, model=MODEL, gpus=2, gpu="RTX-4090")
    lower, rec = _finding(report, "ZA802")
    less, same = _finding(report, "ZA804")
    assert rec.option == same.option == Option(2, Device.CPU) and lower.fix == less.fix
    assert rec.change.micro_batch == rec.change.was_micro_batch and steps(rec.change) == 1  # the rung alone
    assert lower.message.startswith("ZeRO-2 with optimizer offload to CPU fits")
    assert "keeps the optimizer offloaded as configured" in lower.message


def test_a_fitting_run_is_not_given_an_offload():
    """Llama-2-7B ZeRO-3 on 8 x 32 GB fits; ZeRO-2 with the optimizer offloaded fits too and stands higher on the
    guide's ladder, but offload buys capacity with speed: a run that fits keeps ZeRO-3 (the best was ZeRO-2 with
    offload)."""
    report = _llama(_zero3(1), "32GB", activation_checkpointing="full")
    advice = report.result.advice
    assert advice is not None and advice.configured is not None and advice.configured.comfortable
    assert advice.best is not None and advice.best.change.option == Option(3)
    assert all(c.change.option.offload_optimizer == Device.NONE for c in advice.options)
    # the ladder does put ZeRO-2 with optimizer offload ahead of ZeRO-3, and it fits here
    z2_offload = advice.estimate.stage(2, Device.CPU, Device.NONE)
    assert tier(Option(2, Device.CPU)) < tier(Option(3)) and z2_offload.comfortable
    assert not [f for f in report.findings if f.code in ("ZA802", "ZA804", "ZA810")]


# -- one change before several ---------------------------------------------------------------------------------
def test_one_change_before_several():
    """ZeRO-3 at micro batch 16 on 64 GB cards does not fit; micro batch 8 alone does (it was ZeRO-1 with micro
    batch 4: a faster rung, two changes)."""
    report = _llama(_zero3(16), "64GB", activation_checkpointing="full")
    _, rec = _finding(report, "ZA801")
    assert rec.option == Option(3) and rec.change.micro_batch == 8 and steps(rec.change) == 1
    advice = report.result.advice
    assert advice is not None
    faster_pair = [c for c in advice.options if tier(c.change.option) < tier(Option(3)) and steps(c.change) == 2]
    assert faster_pair  # a faster rung with a smaller micro batch fits too: the order, not the search, decides


def test_a_lower_stage_alone_not_with_a_smaller_micro_batch():
    """ZeRO-3 at micro batch 8 on 72 GB cards fits; ZeRO-2 alone fits, ZeRO-1 only with micro batch 4: the
    lower stage is offered alone (it was ZeRO-1 with micro batch 4 while ZeRO-2 fitted as it was)."""
    report = _llama(_zero3(8), "72GB", activation_checkpointing="full")
    finding, rec = _finding(report, "ZA802")
    assert rec.option == Option(2) and rec.change.micro_batch == 8 and steps(rec.change) == 1
    assert finding.fix is not None and "train_micro_batch_size_per_gpu" not in finding.fix
    advice = report.result.advice
    assert advice is not None
    assert any(c.change.option == Option(1) and c.change.micro_batch < 8 for c in advice.options)


def test_the_smallest_combination_where_no_single_change_fits():
    """ZeRO-3 at micro batch 8 with selective checkpointing on 48 GB cards: no single change fits with the
    headroom; the fix is a pair (a rung and full checkpointing), not the three changes it was (ZeRO-2, micro
    batch 2, full checkpointing)."""
    report = _llama(_zero3(8), "48GB", activation_checkpointing="selective")
    _, rec = _finding(report, "ZA801")
    advice = report.result.advice
    assert advice is not None
    assert all(steps(c.change) >= 2 for c in advice.options)  # no single change fits
    assert steps(rec.change) == 2
    assert any(steps(c.change) == 3 and tier(c.change.option) <= tier(rec.option) for c in advice.options)


# -- Ulysses wherever activations bind -------------------------------------------------------------------------
def test_ulysses_alone_for_a_long_sequence():
    """LoRA on Llama-2-7B at 131,072 tokens on one node of 8 x 80 GB: one sample's activations do not fit at
    any stage; Ulysses over 2 GPUs alone does (it was ZeRO-0 with Ulysses 2: two changes)."""
    config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
              "zero_optimization": {"stage": 3}}
    report = zeroadvisor.check(config, model=LLAMA, gpus=8, gpu="A100-SXM4-80GB", cpu_memory="1TB", peft="lora",
                               seq_len=131072, activation_checkpointing="full")
    finding, rec = _finding(report, "ZA801")
    assert rec.option == Option(3) and rec.change.sequence_parallel == 2 and steps(rec.change) == 1
    assert finding.fix == {"sequence_parallel_size": 2, "gradient_accumulation_steps": 2}


def test_ulysses_with_the_trainers_auto_batch_keys():
    """The same long-context LoRA run with the HF Trainer's "auto" batch keys: it was told that no parallel layout
    or cluster fits, while --sequence-parallel fits by the tool's own estimate. Ulysses 2 is the fix, the
    accumulation that keeps the global batch the Trainer's argument, and the fix checks again as it promised."""
    config = json.loads((ROOT / "sample_configs" / "hf_trainer_auto.json").read_text())
    shape = {"peft": "lora", "seq_len": 131072, "activation_checkpointing": "full", "micro_batch": 1}
    hardware = {"model": LLAMA, "gpus": 8, "gpu": "A100-SXM4-80GB", "cpu_memory": "1TB"}
    report = zeroadvisor.check(config, **hardware, **shape)  # type: ignore[arg-type]
    assert report.verdict == Verdict.DOES_NOT_FIT
    finding, rec = _finding(report, "ZA801")
    assert rec.change.sequence_parallel == 2 and steps(rec.change) == 1 and rec.change.trainer_batch
    assert finding.fix == {"sequence_parallel_size": 2}
    (trainer,) = [a for a in rec.actions if a.kind == ActionKind.TRAINER_BATCH]
    assert trainer.values == {"per_device_train_batch_size": 1, "gradient_accumulation_steps": 2}
    again = zeroadvisor.check(merge_patch.apply(config, finding.fix), **hardware, **shape)  # type: ignore[arg-type]
    assert again.verdict == Verdict.FITS
    assert again.estimate is not None and again.estimate.configured is not None
    assert again.estimate.configured.peak_gpu == rec.peak_gpu


def test_ulysses_at_the_degree_the_heads_and_gpus_allow():
    """A million tokens on two nodes of 8 x 80 GB: Ulysses over all 16 GPUs (32 heads divide by 16) fits alone;
    the degrees stopped at 8 before, and nothing was said to fit."""
    config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
              "zero_optimization": {"stage": 3}}
    report = zeroadvisor.check(config, model=LLAMA, gpus=16, gpu="A100-SXM4-80GB", cpu_memory="2TB", peft="lora",
                               seq_len=1048576, activation_checkpointing="full")
    _, rec = _finding(report, "ZA801")
    assert rec.option == Option(3) and rec.change.sequence_parallel == 16 and steps(rec.change) == 1
    advice = report.result.advice
    assert advice is not None
    assert [c.sequence_parallel for c in advice.search.search.sequence_parallel_changes()] == [2, 4, 8, 16]
