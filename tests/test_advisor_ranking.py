"""advisor/ranking.py alone: candidates with their step times ranked in the published order, which a step time
overrules only outside the model's measured error (TIE_BAND)."""

from __future__ import annotations

from zeroadvisor.advisor.change import TP_KEY
from zeroadvisor.advisor.estimates import Estimates
from zeroadvisor.advisor.ranking import LADDER, Considered, faster_rungs, policy_key, rank, steps, tier
from zeroadvisor.advisor.written import Written
from zeroadvisor.memory.estimate import Cluster
from zeroadvisor.memory.options import Option
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import TrainingShape
from zeroadvisor.throughput import NoStepTime, StepTime, Throughput
from zeroadvisor.throughput.validation import TIE_BAND
from zeroadvisor.vocab import Device

LLAMA2_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000}
CONFIG = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
          "zero_optimization": {"stage": 3}}
OPTIONS = (Option(3), Option(1), Option(2, Device.CPU), Option(3, Device.CPU))  # not in the published order


def _seconds(s: float) -> Throughput:
    return Throughput(step_time_s=s, tokens_per_s=8 * 2048 / s, bound="compute", terms=(), accumulation=1,
                      tokens_per_step=8 * 2048)


def _written() -> Written:
    spec, cluster = spec_from_hf_config(LLAMA2_7B), Cluster(gpus=8, gpu_memory=80 * 10**9)
    return Written(CONFIG, spec, TrainingShape(2048, "full"), cluster, Estimates(spec, cluster, "deepspeed"),
                   lambda data, gpus: {})


def _considered(times: dict[Option, StepTime]) -> list[Considered]:
    written = _written()
    out = []
    for option in OPTIONS:
        change = written.change(option)
        stage = written.evaluate(change)
        assert stage is not None
        out.append(Considered(change, stage, times[option]))
    return out


def _options(ranked: tuple[Considered, ...]) -> list[Option]:
    return [c.change.option for c in ranked]


def test_without_step_times_the_published_order():
    timed = _considered(dict.fromkeys(OPTIONS, NoStepTime("no GPU named")))
    ranked = rank(timed)
    assert _options(ranked) == sorted(OPTIONS, key=tier) == [Option(1), Option(2, Device.CPU), Option(3),
                                                             Option(3, Device.CPU)]
    assert sorted(map(id, ranked)) == sorted(map(id, timed))  # the same candidates, reordered


def test_a_step_time_overrules_only_outside_the_error():
    # ZeRO-3 faster than ZeRO-1, but inside the model's error: the published order holds
    close = {Option(1): _seconds(10.0), Option(3): _seconds(10.0 / TIE_BAND * 1.01),
             Option(2, Device.CPU): _seconds(30.0), Option(3, Device.CPU): _seconds(40.0)}
    assert _options(rank(_considered(close)))[0] == Option(1)
    # faster by more than the error: ZeRO-3 leads, the rest keep the published order
    far = {**close, Option(3): _seconds(10.0 / TIE_BAND * 0.9)}
    assert _options(rank(_considered(far))) == [Option(3), Option(1), Option(2, Device.CPU),
                                                            Option(3, Device.CPU)]


def test_one_candidate_without_a_step_time_keeps_the_published_order():
    times = {Option(1): _seconds(10.0), Option(3): _seconds(1.0), Option(2, Device.CPU): _seconds(30.0),
             Option(3, Device.CPU): NoStepTime("no bandwidth")}
    assert _options(rank(_considered(times)))[0] == Option(1)


def test_autotp_competes_only_where_nothing_without_it_fits():
    """An AutoTP run the model puts far faster still ranks after every run without it; alone, it leads."""
    timed = _considered({option: _seconds(10.0 + i) for i, option in enumerate(OPTIONS)})
    written = _written()
    change = written.change(Option(3), layout={TP_KEY: {"autotp_size": 2}})
    stage = written.evaluate(change)
    assert change.tensor_parallel == 2 and stage is not None
    autotp = Considered(change, stage, _seconds(0.1))
    ranked = rank([autotp, *timed])
    assert ranked[0].change.option == Option(1) and ranked[-1] is autotp
    assert rank([autotp]) == (autotp,)


def test_the_ladder_is_one_table_of_every_rung():
    """Every stage/offload DeepSpeed runs has its place; the guide's speed order ("Stage 0 > 1 > 2 > 2 + offload >
    3 > 3 + offloads") holds; partial offload at ZeRO-3 is a rung of its own, the optimizer's before the
    parameters' before both; NVMe after host RAM."""
    devices = (Device.NONE, Device.CPU, Device.NVME)
    every = [Option(0), *(Option(s, o) for s in (1, 2) for o in devices),
             *(Option(3, o, p) for o in devices for p in devices)]
    assert len(LADDER) == len(every) and {rung.option for rung in LADDER} == set(every)
    guide = [Option(0), Option(1), Option(2), Option(2, Device.CPU), Option(3), Option(3, Device.CPU),
             Option(3, Device.NONE, Device.CPU), Option(3, Device.CPU, Device.CPU), Option(3, Device.NVME),
             Option(3, Device.NVME, Device.NVME)]
    places = [tier(option) for option in guide]
    assert places == sorted(places) and len(set(places)) == len(places)
    assert [rung.place for rung in LADDER] == sorted(rung.place for rung in LADDER)  # the table reads fastest first
    assert tier(Option(1, Device.CPU)) == tier(Option(2, Device.CPU))  # the same volume: fewer keys decide
    assert faster_rungs(Option(0)) == ()
    assert faster_rungs(Option(3, Device.CPU, Device.CPU))[-1] == Option(3, Device.NONE, Device.CPU)


def test_a_rung_is_one_change_and_single_changes_come_first():
    """ZeRO-3 with both offloads to ZeRO-2 with the optimizer's is one change (two keys); a faster rung with a
    smaller micro batch is two, and ranks after any single change, even at a slower rung; the configured run and
    the single changes share a class, so a faster rung that fits beats the configured run."""
    spec, cluster = spec_from_hf_config(LLAMA2_7B), Cluster(gpus=8, gpu_memory=80 * 10**9)
    config = {"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": True},
              "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"},
                                    "offload_param": {"device": "cpu"}}}
    written = Written(config, spec, TrainingShape(2048, "full"), cluster, Estimates(spec, cluster, "deepspeed"),
                      lambda data, gpus: {})
    one_rung = written.change(Option(2, Device.CPU))
    assert steps(one_rung) == 1 and one_rung.changes == 2  # the stage and the parameter offload: one rung
    assert steps(written.change(Option(3, Device.CPU, Device.CPU))) == 0
    pair = written.change(Option(1), micro_batch=2)
    assert steps(pair) == 2 and pair.accumulation == 2
    smaller_alone = written.change(Option(3, Device.CPU, Device.CPU), micro_batch=2)
    assert policy_key(smaller_alone) < policy_key(pair) and tier(pair.option) < tier(smaller_alone.option)
    assert policy_key(one_rung) < policy_key(written.change(Option(3, Device.CPU, Device.CPU)))
