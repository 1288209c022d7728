"""Properties of the other models' rows over generated training methods (memory/method.py; issue 35): whatever
the method, trainer, release, PEFT and option, the rows add up, a bound is never below what it bounds, the
reference copy is never larger partitioned than whole, and the SFT method leaves the estimate as it was."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from zeroadvisor.config.method import Generation, MethodSetup
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.memory.terms import METHOD_ROWS, ROWS
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import TrainingShape
from zeroadvisor.vocab import Device, Method, TrainerFamily, VllmMode

pytestmark = pytest.mark.slow
SPEC = spec_from_hf_config({"model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632,
                            "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4,
                            "vocab_size": 32000})
LORA = dataclasses.replace(SPEC, trainable_parameters=2_252_800, peft="LoRA r=8")
GB = 10**9

setups = st.builds(
    MethodSetup,
    method=st.sampled_from(list(Method)),
    trainer=st.none() | st.sampled_from(list(TrainerFamily)),
    trainer_version=st.none() | st.sampled_from(["0.9.3", "0.21.0", "1.9.0", "1.9.1", "1.16.0", "3.8.0", "0.18.0"]),
    precompute_ref_log_probs=st.none() | st.booleans(),
    beta=st.none() | st.sampled_from([0.0, 0.04]),
    loss_type=st.none() | st.sampled_from(["sigmoid", "simpo", "orpo"]),
    generation=st.builds(Generation, max_prompt_length=st.none() | st.just(256),
                         max_completion_length=st.none() | st.just(512), use_vllm=st.none() | st.booleans(),
                         vllm_mode=st.none() | st.sampled_from(list(VllmMode)),
                         vllm_gpu_memory_utilization=st.none() | st.sampled_from([0.2, 0.5])),
    colocate_all_models=st.none() | st.booleans(),
    reference_quantization=st.none() | st.sampled_from(["4bit", "8bit"]),
)
configs = st.builds(lambda stage, opt: {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                                        "zero_optimization": {"stage": stage},
                                        **({"optimizer": {"type": "AdamW"}} if opt else {})},
                    st.sampled_from([1, 2, 3]), st.booleans())


@settings(max_examples=40, deadline=None)
@given(setup=setups, config=configs, peft=st.booleans())
def test_method_rows_add_up_and_bound(setup, config, peft):
    spec = LORA if peft else SPEC
    e = estimate(config, spec, TrainingShape(512, "full", method=setup), Cluster(gpus=8, gpu_memory=80 * GB))
    for stage in e.stages:
        rows = stage.per_gpu
        assert set(ROWS) <= set(rows) and set(rows) - set(ROWS) <= set(METHOD_ROWS)
        assert rows["total"] == sum(rows[r] for r in rows if r not in ("parameters", "gradients", "optimizer_states",
                                                                     "total"))
        for row in set(rows) & set(METHOD_ROWS):
            assert 0 <= rows[row] <= stage.per_gpu_bound[row]
    whole = [st_.per_gpu.get("reference_model", 0) for st_ in e.stages if st_.option.stage < 3]
    parted = [st_.per_gpu.get("reference_model", 0) for st_ in e.stages if st_.option.stage == 3]
    assert max(parted, default=0) <= min(whole, default=max(parted, default=0))


@settings(max_examples=15, deadline=None)
@given(setup=setups, config=configs)
def test_the_sft_method_changes_nothing(setup, config):
    # the trainers whose own SFT loss is counted are the exceptions: TRL's SFTTrainer by release
    # (memory/trl_sft_loss.py) and OpenRLHF's flash-attn cross-entropy (memory/method.py openrlhf_fused_ce), each
    # with its own tests
    own_loss = (TrainerFamily.TRL, TrainerFamily.OPENRLHF)
    sft = dataclasses.replace(setup, method=Method.SFT, trainer=None if setup.trainer in own_loss else setup.trainer)
    shape = TrainingShape(512, "full")
    cluster = Cluster(gpus=8, gpu_memory=80 * GB)
    assert estimate(config, SPEC, dataclasses.replace(shape, method=sft), cluster).to_dict() == \
        estimate(config, SPEC, shape, cluster).to_dict()


@settings(max_examples=30, deadline=None)
@given(setup=setups, config=configs, peft=st.booleans())
def test_the_method_assumes_only_what_nothing_said_and_llama_factory_ppo_has_no_critic_copy(setup, config, peft):
    e = estimate(config, LORA if peft else SPEC, TrainingShape(512, "full", method=setup),
                 Cluster(gpus=8, gpu_memory=80 * GB))
    assumed = {a.name for a in e.assumed}
    gen = setup.generation
    said = {"trainer_version": setup.trainer_version, "precompute_ref_log_probs": setup.precompute_ref_log_probs,
            "beta": setup.beta, "max_completion_length": gen.max_completion_length, "vllm_mode": gen.vllm_mode,
            "vllm_gpu_memory_utilization": gen.vllm_gpu_memory_utilization}
    assert not {name for name, value in said.items() if value is not None} & assumed
    assert "trainer" not in assumed  # nothing was guessed: the method is the setup's own
    # TRL's own SFTTrainer and OpenRLHF's SFT: their loss depends on the release (memory/trl_sft_loss.py,
    # memory/method.py openrlhf_fused_ce), assumed where none is said
    versioned = setup.method is not Method.SFT or setup.trainer in (TrainerFamily.TRL, TrainerFamily.OPENRLHF)
    assert ("trainer_version" in assumed) == (versioned and setup.trainer_version is None)
    if setup.method is Method.PPO and setup.trainer is TrainerFamily.LLAMA_FACTORY:
        assert all("critic" not in stage.per_gpu for stage in e.stages)  # the policy's value head
    if setup.method is not Method.KTO or setup.trainer is not TrainerFamily.LLAMA_FACTORY:
        assert not any(t.key == "kto_kl_forward" for stage in e.stages for t in stage.terms)


# -- the trainers' own refusals (config/trainer_refusals.py) -------------------------------------------------------

_ANY = st.none() | st.booleans() | st.integers(-2, 100) | st.text(max_size=12) | \
    st.lists(st.text(max_size=6), max_size=2) | st.sampled_from(["true", "yes", "ratio", "layer", "muon",
                                                                  "flash_adamw", "q_galore_adamw8bit", "full_shard"])
_TRUTHY = st.sampled_from([True, "true", 50, ["full_shard"], "muon", "flash_adamw", "q_galore_adamw8bit", "ratio"])
_KEYS = st.sampled_from(["optimizer", "relora", "relora_steps", "fsdp", "use_badam", "badam_mode", "use_galore",
                         "use_apollo", "use_unsloth", "pure_bf16", "use_kt", "pissa_init", "predict_with_generate",
                         "deepspeed_enable_sleep"])
refusal_files = st.dictionaries(_KEYS, _TRUTHY | _ANY, max_size=5)
RELEASES = [None, "0.6.0.post1", "0.7.0", "0.8.2", "0.8.3", "0.8.10", "0.9.1", "0.9.5", "0.11.0", "0.12.0", "0.16.1",
            "0.18.0"]
FAMILY_NAMES = {TrainerFamily.LLAMA_FACTORY: "LLaMA-Factory", TrainerFamily.AXOLOTL: "axolotl",
                TrainerFamily.OPENRLHF: "OpenRLHF"}


@settings(max_examples=60, deadline=None)
@given(data=refusal_files, family=st.sampled_from(list(FAMILY_NAMES)),
       release=st.sampled_from(RELEASES), config=configs, deepspeed=st.sampled_from(["0.16.0", "0.17.5", "0.19.8"]))
@example(data={"relora_steps": 50}, family=TrainerFamily.AXOLOTL, release=None, config={"zero_optimization": {}},
         deepspeed="0.19.8")
@example(data={"use_badam": True}, family=TrainerFamily.LLAMA_FACTORY, release=None, config={"zero_optimization": {}},
         deepspeed="0.19.8")
@example(data={"use_badam": "yes", "badam_mode": "ratio"}, family=TrainerFamily.LLAMA_FACTORY, release="0.8.2",
         config={"zero_optimization": {"stage": 3}}, deepspeed="0.19.8")
@example(data={"deepspeed_enable_sleep": True}, family=TrainerFamily.OPENRLHF, release=None,
         config={"zero_optimization": {"stage": 2}}, deepspeed="0.17.5")
def test_an_option_is_refused_exactly_where_a_check_of_the_release_applies(data, family, release, config, deepspeed):
    """Whatever the file's values, reading its refusals never raises, and each option of the estimate carries a
    refusal exactly where one of the file's checks refuses its stage at the pinned release (the newest read where
    none is pinned), worded with the trainer's name."""
    from packaging.version import Version

    from zeroadvisor.config.trainer_refusals import read_refusals

    refusals = read_refusals(data, family)
    name = FAMILY_NAMES[family]
    assert all(r.words.startswith(f"{name} raises") and r.stages and r.stages <= {0, 1, 2, 3} for r in refusals)
    setup = MethodSetup(trainer=family, trainer_version=release, refusals=refusals)
    from zeroadvisor.deepspeed.schema import reading_as

    with reading_as(deepspeed):  # the DeepSpeed release the config is read as (the run's pin)
        e = estimate(config, SPEC, TrainingShape(512, "full", method=setup), Cluster(gpus=8, gpu_memory=80 * GB))
    version = Version(release) if release else None
    for stage in e.stages:
        offloads = stage.option.offload_optimizer != Device.NONE
        applies = [r for r in refusals if stage.option.stage in r.stages
                   and not (r.offload_optimizer_runs and offloads)
                   and (r.deepspeed_through is None or Version(deepspeed) <= Version(r.deepspeed_through))
                   and (r.before is None if version is None else
                        (r.since is None or version >= Version(r.since))
                        and (r.before is None or version < Version(r.before)))]
        assert (stage.trainer_refusal is not None) == bool(applies), (stage.option, refusals)
        assert all(r.words in (stage.trainer_refusal or "") for r in applies)
