"""advisor/candidates.py alone: which candidate runs the search tries and which of them fit, on a real
estimate of Llama-2-7B."""

from __future__ import annotations

from zeroadvisor.advisor.candidates import Candidates, adds_offload, divisors, largest_true, less_offload, offloads
from zeroadvisor.advisor.change import CHECKPOINTING_LEVELS
from zeroadvisor.advisor.estimates import Estimates
from zeroadvisor.advisor.ranking import steps, tier
from zeroadvisor.advisor.written import Written
from zeroadvisor.memory.estimate import Cluster
from zeroadvisor.memory.options import Option
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import Checkpointing, TrainingShape
from zeroadvisor.vocab import Device

LLAMA2_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000}
GB = 10**9
ZERO1 = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 8, "bf16": {"enabled": True},
         "zero_optimization": {"stage": 1}}
ZERO3 = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 8, "bf16": {"enabled": True},
         "zero_optimization": {"stage": 3}}
SHAPE = TrainingShape(2048, "none")


def _candidates(config: dict = ZERO1, cluster: Cluster | None = None, provision: bool = False) -> Candidates:
    spec = spec_from_hf_config(LLAMA2_7B)
    cluster = cluster or Cluster(gpus=8, gpu_memory=40 * GB, cpu_memory=400 * GB)
    written = Written(config, spec, SHAPE, cluster, Estimates(spec, cluster, "deepspeed"), lambda data, gpus: {})
    return Candidates(written, provision)


def test_divisors_and_largest_true():
    assert divisors(12) == [1, 2, 3, 4, 6, 12] and divisors(1) == [1]
    values = divisors(360)
    for limit in (0, 1, 7, 360):
        expected = max((v for v in values if v <= limit), default=None)
        assert largest_true(values, lambda v, limit=limit: v <= limit) == expected
    assert offloads(Option(3, Device.CPU)) and offloads(Option(3, Device.NONE, Device.NVME)) and not offloads(Option(3))


def test_every_fitting_candidate_is_on_the_frontier():
    """Each fits as it will be written, at the largest micro batch that keeps the global batch and fits."""
    c = _candidates()
    w = c.written
    fitting = c.fitting()
    assert fitting and c.fitting() is fitting  # searched once
    for change, stage in fitting:
        assert stage.comfortable and w.fits(change)
        larger = [m for m in divisors(w.micro_batch) if m > change.micro_batch and w.batch.patch(m) is not None]
        if larger:
            assert not w.fits(w.change(change.option, change.shape, larger[0], change.config_patch))
    # no single change at the configured rung (ZeRO-1) or a faster one fits without a layout (ZeRO-1 at 8 samples
    # of 2048 tokens without checkpointing needs more than 40 GB at every micro batch), so layouts are searched
    plain = [change for change, _ in fitting if change.config_patch is None]
    assert plain and not any(steps(change) <= 1 and tier(change.option) <= tier(w.configured) for change in plain)
    assert any(change.sequence_parallel for change, _ in fitting)


def test_nvme_is_a_candidate_only_where_a_drive_is_given_or_provisioned():
    nvme = Option(3, Device.CPU, Device.NVME)
    assert not _candidates().may_recommend(nvme)
    assert _candidates(provision=True).may_recommend(nvme)
    assert _candidates(cluster=Cluster(gpus=8, gpu_memory=40 * GB, nvme=10**12)).may_recommend(nvme)
    assert _candidates().may_recommend(Option(3, Device.CPU))
    assert not any(Device.NVME in (c.option.offload_optimizer, c.option.offload_param)
                   for c, _ in _candidates().fitting())


def test_extremes_are_at_the_least_memory_the_run_allows():
    c = _candidates()
    extremes = c.extremes()
    assert {change.option for change, _ in extremes} >= {Option(0), Option(1), Option(2), Option(3)}
    for change, stage in extremes:
        assert change.shape.activation_checkpointing == Checkpointing.FULL and change.micro_batch == 1
        assert stage is not None


def test_largest_fitting_micro_batch_is_the_limit():
    c = _candidates(ZERO3, Cluster(gpus=8, gpu_memory=80 * GB))
    w = c.written
    largest = c.largest_fitting_micro_batch()
    assert largest is not None and largest > 1

    def fits(micro_batch: int) -> bool:
        return w.fits(w.change(c.configured, micro_batch=micro_batch, free_batch=True))

    assert fits(largest) and not fits(largest + 1)
    assert c.largest_fitting_micro_batch(limit=2) == 2


def test_rule_questions():
    """On 80 GB cards ZeRO-3 is more than the run needs: a lower stage fits; full checkpointing frees the most."""
    config = {**ZERO3, "train_batch_size": 8, "train_micro_batch_size_per_gpu": 1}
    c = _candidates(config, Cluster(gpus=8, gpu_memory=80 * GB))
    lower = c.lowest_fitting_lower_stage()
    # ZeRO-0 keeps the whole optimizer state on each GPU (165 GB); ZeRO-1 partitions it (57 GB of 80)
    assert lower is not None and lower.option == Option(1) and lower.comfortable
    assert c.without_offload() is None  # ZeRO-3 is configured without offload: there is none to drop
    outcomes = c.checkpointing_outcomes()
    assert [change.shape.activation_checkpointing for change, _ in outcomes] == list(CHECKPOINTING_LEVELS[1:])
    peaks = [stage.peak_gpu for _, stage in outcomes]
    assert peaks == sorted(peaks, reverse=True)
    assert c.flash_attention_outcome() is None  # FlashAttention is on in the shape already


def test_nothing_fits_on_small_cards_with_little_host_memory():
    """16 GB cards hold ZeRO-3 only with the optimizer offloaded, which 64 GB of host RAM per node does not hold;
    without host RAM given the offload is not judged there (the verdict says so)."""
    assert _candidates(cluster=Cluster(gpus=8, gpu_memory=16 * GB, cpu_memory=64 * GB)).fitting() == []
    unjudged = _candidates(cluster=Cluster(gpus=8, gpu_memory=16 * GB)).fitting()
    assert unjudged and all(offloads(change.option) and "host" in stage.uncounted for change, stage in unjudged)


def test_less_offload_and_added_offload():
    """The rungs offload-not-needed may name from a configured offload (each device kept or dropped, one dropped,
    the stage no higher), and those a fitting run is never moved to (an offload it keeps on the GPU, or host RAM
    moved to NVMe)."""
    both = Option(3, Device.CPU, Device.CPU)
    assert less_offload(Option(3, Device.CPU), both) and less_offload(Option(2, Device.CPU), both)
    assert less_offload(Option(3, Device.NONE, Device.CPU), both) and less_offload(Option(0), both)
    assert not less_offload(both, both) and not less_offload(Option(3, Device.NVME), both)
    assert not less_offload(Option(3), Option(2, Device.CPU))  # a higher stage is not less offload
    assert adds_offload(Option(2, Device.CPU), Option(3))
    assert adds_offload(Option(3, Device.NVME), Option(3, Device.CPU))
    assert not adds_offload(Option(1, Device.CPU), both) and not adds_offload(Option(0), Option(3))
