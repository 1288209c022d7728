"""The rollout moment of GRPO and PPO on the training GPUs (memory/generation.py): the policy gathered whole for
generation (TRL at ZeRO-3), the KV cache of the generation batch and the scoring forwards' logits, live instead of
the training step's activations and temporaries (the train peak is the larger, never the sum)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from zeroadvisor.config.launch import parse_launch
from zeroadvisor.config.method import Generation, MethodSetup
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.memory.generation import KEY, OPENRLHF_ROLLOUT_BATCH, SYNC_KEY, generation_batch, kv_cache_bytes
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import TrainingShape
from zeroadvisor.vocab import Method, TrainerFamily

LLAMA2_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000}
SPEC = spec_from_hf_config(LLAMA2_7B)
# Llama-3-8B (GQA, a 128,256-token vocabulary): the scoring forwards' logits outgrow the KV cache
LLAMA3_8B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256}
SPEC3 = spec_from_hf_config(LLAMA3_8B)
V3 = 128256
P = SPEC.parameters
V = 32000
GB = 10**9
CLUSTER = Cluster(gpus=8, gpu_memory=80 * GB)
STEP_KEYS = ("step_temporary", "step_fp32_grad")


def config(stage: int, accumulation: int = 1, micro: int = 1) -> dict:
    return {"train_micro_batch_size_per_gpu": micro, "gradient_accumulation_steps": accumulation,
            "bf16": {"enabled": True}, "zero_optimization": {"stage": stage},
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-5}}}


def grpo(**generation) -> MethodSetup:
    gen = {"max_prompt_length": 512, "max_completion_length": 1536, "use_vllm": False, **generation}
    return MethodSetup(method=Method.GRPO, trainer=TrainerFamily.TRL, trainer_version="1.9.0",
                       generation=Generation(**gen))


def stage_of(setup: MethodSetup, stage: int, accumulation: int = 1, micro: int = 1, seq: int | None = None,
             spec=SPEC):
    return estimate(config(stage, accumulation, micro), spec,
                    TrainingShape(seq, "full", method=setup), CLUSTER).stage(stage)


def moment_term(st):
    return next((t for t in st.terms if t.key == KEY and t.phase == "train"), None)


def step_transient(st, gathered: bool) -> int:
    rows = ("activations", "gathered_parameters") if gathered else ("activations",)
    return sum(t.nbytes for t in st.terms if t.phase == "train" and t.device == "gpu" and t.key not in (KEY, SYNC_KEY)
               and (t.row in rows or t.key in STEP_KEYS))


def test_grpo_at_zero3_without_vllm_gathers_the_whole_policy_for_generation():
    st = stage_of(grpo(), 3)
    term = moment_term(st)
    assert term is not None and "gathered whole" in term.formula
    assert "unwrap_model_for_generation" in term.source and term.kind == "bound"
    # the peak is the larger moment: what the rollout holds, the step's transients (its gathered layers too) apart
    rollout = term.nbytes + step_transient(st, gathered=True)
    kv = kv_cache_bytes(SPEC, 1, 2048, 2)
    assert kv is not None
    assert 2 * P * 0.95 + kv < rollout < 2 * P + kv + 1 * GB  # the non-persistent parameters, bf16, + the cache


def test_ds3_gather_for_generation_false_generates_under_zero3_per_module_gathering():
    gathered = stage_of(grpo(), 3)
    per_module = stage_of(grpo(ds3_gather_for_generation=False), 3)
    term = moment_term(per_module)
    assert term is None or "gathered whole" not in term.formula
    # the whole policy (13.5 GB) less the step's own gathered layers and transients it replaces
    assert gathered.per_gpu["total"] - per_module.per_gpu["total"] > 5 * GB


def test_grpo_below_zero3_and_with_vllm_gathers_nothing():
    term = moment_term(stage_of(grpo(), 2))
    assert term is None or "gathered whole" not in term.formula
    for mode in ("colocate", "server"):
        assert moment_term(stage_of(grpo(use_vllm=True, vllm_mode=mode), 3)) is None


def test_grpo_generation_batch_is_the_micro_batch_times_steps_per_generation():
    assert generation_batch(grpo(), 2, 8, 4) == 16  # the gradient accumulation by default
    assert generation_batch(grpo(steps_per_generation=3), 2, 8, 4) == 6
    assert generation_batch(grpo(generation_batch_size=64), 2, 8, 4) == 16  # 64 / (2 x 4 processes) = 8 steps
    # stage 2 (the weights whole, nothing gathered): the KV cache grows with the generation batch
    one, eight = stage_of(grpo(), 2), stage_of(grpo(), 2, accumulation=8)
    kv8 = kv_cache_bytes(SPEC, 8, 2048, 2)
    assert kv8 is not None and moment_term(eight) is not None
    assert moment_term(eight).nbytes + step_transient(eight, gathered=False) >= kv8
    assert eight.per_gpu["total"] > one.per_gpu["total"]


OPENRLHF = ("deepspeed --module openrlhf.cli.train_ppo --pretrain meta-llama/Llama-2-7b-hf --reward_pretrain "
            "meta-llama/Llama-2-7b-hf --micro_train_batch_size 1 --train_batch_size 128 "
            "--micro_rollout_batch_size {rollout} --rollout_batch_size 1024 --prompt_max_len 1024 "
            "--generate_max_len 1024 --zero_stage 2 --bf16 --gradient_checkpointing")


def test_openrlhf_micro_rollout_batch_size_is_read_not_ignored():
    launch = parse_launch(OPENRLHF.format(rollout=4))
    setup = launch.training.method.setup
    assert setup.generation.rollout_batch_size == 4
    assert not any("micro_rollout_batch_size" in note for note in launch.notes if "ignored" in note)
    dotted = parse_launch("python3 -m openrlhf.cli.train_ppo_ray --pretrain m --rollout.micro_batch_size 2")
    assert dotted.training.method.setup.generation.rollout_batch_size == 2


def openrlhf(rollout: int | None, version: str | None = None, vllm: bool = False) -> MethodSetup:
    return MethodSetup(method=Method.PPO, trainer=TrainerFamily.OPENRLHF, trainer_version=version,
                       colocate_all_models=True,
                       generation=Generation(max_prompt_length=1024, max_completion_length=1024, use_vllm=vllm,
                                             rollout_batch_size=rollout))


def rollout(st) -> int:
    """What the rollout holds (0 where it stays under the step: no term)."""
    term = moment_term(st)
    return term.nbytes + step_transient(st, gathered=False) if term is not None else 0


def test_openrlhf_train_ppo_counts_the_scoring_forwards_logits():
    # micro_rollout_batch_size 4: the actor's (and the reference's) logits over the whole 2,048 tokens: bf16 logits
    # and their fp32 upcast (v0.5.6 on; the release unknown: the newest read)
    st = stage_of(openrlhf(4), 2, spec=SPEC3)
    term = moment_term(st)
    assert term is not None and "experience_maker.py" in term.source
    assert rollout(st) == (2 + 4) * 4 * 2048 * V3
    # v0.5.1: a full log_softmax in bf16 beside the bf16 logits
    assert rollout(stage_of(openrlhf(8, "0.5.1"), 2, spec=SPEC3)) == (2 + 2) * 8 * 2048 * V3
    # with vLLM generating elsewhere the actor still scores on its own cards
    assert rollout(stage_of(openrlhf(4, vllm=True), 2, spec=SPEC3)) == (2 + 4) * 4 * 2048 * V3


def test_openrlhf_generation_holds_the_kv_cache_of_the_micro_rollout_batch():
    # Llama-2-7B (no GQA, 32,000 tokens): the KV cache of 16 sequences outgrows their logits
    st = stage_of(openrlhf(16), 2)
    kv = kv_cache_bytes(SPEC, 16, 2048, 2)
    assert kv is not None
    assert rollout(st) == kv + 2 * 4 * 16 * V + 3 * 16 * 1024 * 11008 * 2  # + fp32 scores + prefill MLP
    assert OPENRLHF_ROLLOUT_BATCH == 8  # the default where the flag is not given
    assert 0 < rollout(stage_of(openrlhf(None), 2)) < rollout(st)


def test_the_rollout_replaces_the_step_it_is_never_added_to_it():
    """A rollout smaller than the step adds nothing; the train peak is the larger of the two."""
    small = stage_of(openrlhf(1), 2, micro=4)
    assert moment_term(small) is None
    under, big = stage_of(openrlhf(1), 2, spec=SPEC3), stage_of(openrlhf(4), 2, spec=SPEC3)
    assert moment_term(under) is None and moment_term(big) is not None
    # the same states and step: the totals (the allocator's allowance apart) differ by what the rollout holds beyond
    # the step, not by the whole rollout
    counted = [st.per_gpu["total"] - st.per_gpu["overhead"] for st in (big, under)]
    assert counted[0] - counted[1] == rollout(big) - step_transient(under, gathered=False)


def test_trl_ppo_at_zero3_gathers_policy_and_value_model():
    setup = MethodSetup(method=Method.PPO, trainer=TrainerFamily.TRL, trainer_version="0.21.0",
                        generation=Generation(max_completion_length=512, use_vllm=False))
    st = stage_of(setup, 3, seq=1024)
    term = moment_term(st)
    assert term is not None and "policy and value model gathered whole" in term.formula
    assert term.nbytes + step_transient(st, gathered=True) > 2 * 2 * P * 0.95


def test_trl_ppo_keeps_the_rollouts_fp32_scores_through_the_update():
    """PPOTrainer.train never deletes ``logitss``: rollout batch x response x V fp32 beside the training step."""
    setup = MethodSetup(method=Method.PPO, trainer=TrainerFamily.TRL, trainer_version="0.21.0",
                        generation=Generation(max_completion_length=512, use_vllm=False))
    st = stage_of(setup, 2, accumulation=4, micro=2, seq=1024)
    [held] = [t for t in st.terms if t.key == "ppo_rollout_scores" and t.phase == "train"]
    assert held.row == "buffers" and held.nbytes == 4 * (2 * 4) * 512 * V
    assert "ppo_trainer.py" in held.source
    # held between steps: the checkpoint save sits on top of it too (the save phase drops only the transients)
    vllm = MethodSetup(method=Method.PPO, trainer=TrainerFamily.TRL,
                       generation=Generation(max_completion_length=512, use_vllm=True))
    assert not [t for t in stage_of(vllm, 2, seq=1024).terms if t.key == "ppo_rollout_scores"]


def test_trl_config_keys_for_the_rollout_are_read():
    from zeroadvisor.config.method_reader import read_mapping

    reading = read_mapping({"num_generations": 8, "ds3_gather_for_generation": False, "steps_per_generation": 4,
                            "generation_batch_size": 64, "local_rollout_forward_batch_size": 16}, "trl",
                           lambda key: f"{key} in grpo.yaml")
    gen = reading.setup.generation
    assert (gen.ds3_gather_for_generation, gen.steps_per_generation, gen.generation_batch_size,
            gen.rollout_batch_size) == (False, 4, 64, 16)


def test_the_rollouts_defaults_are_listed_as_assumed_until_a_file_says_them():
    def assumed(setup: MethodSetup) -> dict[str, object]:
        e = estimate(config(3), SPEC, TrainingShape(None, "full", method=setup), CLUSTER)
        return {a.name: a.value for a in e.assumed}

    assert assumed(grpo())["ds3_gather_for_generation"] is True
    assert "ds3_gather_for_generation" not in assumed(grpo(ds3_gather_for_generation=True))
    assert "ds3_gather_for_generation" not in assumed(grpo(use_vllm=True))  # vLLM generates: no gather
    assert assumed(openrlhf(None))["rollout_batch_size"] == OPENRLHF_ROLLOUT_BATCH
    assert "rollout_batch_size" not in assumed(openrlhf(4))


def test_ms_swift_flags_for_the_rollout_are_read():
    ppo = parse_launch("NPROC_PER_NODE=8 swift rlhf --rlhf_type ppo --model m --local_rollout_forward_batch_size 16 "
                       "--ds3_gather_for_generation false").training.method.setup.generation
    assert (ppo.rollout_batch_size, ppo.ds3_gather_for_generation) == (16, False)
    grpo_gen = parse_launch("NPROC_PER_NODE=8 swift rlhf --rlhf_type grpo --model m --steps_per_generation 4"
                            ).training.method.setup.generation
    assert grpo_gen.steps_per_generation == 4


# --------------------------------------------------------------------------- vLLM asleep while the policy trains


def colocated(version: str | None = "3.9.0", **generation) -> MethodSetup:
    """ms-swift GRPO with vLLM colocated; 3.9.0 syncs a full model to vLLM one parameter at a time (no sync moment)."""
    gen = {"max_prompt_length": 512, "max_completion_length": 1536, "use_vllm": True, "vllm_mode": "colocate",
           "vllm_gpu_memory_utilization": 0.6, **generation}
    return MethodSetup(method=Method.GRPO, trainer=TrainerFamily.MS_SWIFT, trainer_version=version, beta=0.0,
                       generation=Generation(**gen))


def vllm_terms(st, device: str = "gpu"):
    return [t for t in st.terms if t.phase == "train" and t.row == "vllm" and t.device == device]


def test_vllm_asleep_counts_its_share_only_beyond_the_step():
    # ms-swift --sleep_level 1: vLLM sleeps while the policy trains (rollout_mixin.py engine.sleep), so its share and
    # the step's transients are two moments: the peak is the larger, not the sum
    awake = stage_of(colocated(), 3, seq=2048)
    asleep = stage_of(colocated(vllm_sleep_level=1), 3, seq=2048)
    share = int(80 * GB * 0.6)
    [always] = vllm_terms(awake)
    assert always.nbytes == share
    [term] = vllm_terms(asleep, "gpu")
    step = step_transient(asleep, gathered=False)
    assert term.nbytes == max(0, share - step)
    assert asleep.per_gpu["total"] == awake.per_gpu["total"] - min(share, step)
    # level 1 keeps vLLM's weights in host RAM meanwhile (2 B x P); level 2 drops them
    [host] = vllm_terms(asleep, "cpu")
    assert host.nbytes == 2 * P
    assert not vllm_terms(stage_of(colocated(vllm_sleep_level=2), 3, seq=2048), "cpu")


def test_offloading_the_training_model_while_vllm_generates_leaves_the_step_as_the_peak():
    # --offload_model / --offload_optimizer move the engine's parameters and optimizer states to the host while
    # vLLM generates: the awake moment holds the share less them
    st = stage_of(colocated(vllm_sleep_level=1, offload_model=True, offload_optimizer=True), 1, seq=2048)
    moved = sum(t.nbytes for t in st.terms if t.phase == "train" and t.device == "gpu"
                and t.row in ("parameters", "optimizer_states"))
    [term] = vllm_terms(st)
    assert term.nbytes == max(0, int(80 * GB * 0.6) - moved - step_transient(st, gathered=False))


def test_sleep_switches_are_read_from_each_trainers_files():
    from zeroadvisor.config.method_reader import read_mapping

    trl = read_mapping({"use_vllm": True, "vllm_enable_sleep_mode": True}, "trl", lambda key: f"{key} in g.yaml")
    assert trl.setup.generation.vllm_sleep_level == 2  # trl/generation/vllm_generation.py: llm.sleep(level=2)
    swift = parse_launch("NPROC_PER_NODE=8 swift rlhf --rlhf_type grpo --model m --use_vllm true --vllm_mode colocate "
                         "--sleep_level 1 --offload_model true --offload_optimizer true "
                         "--vllm_tensor_parallel_size 2").training.method.setup.generation
    assert (swift.vllm_sleep_level, swift.offload_model, swift.offload_optimizer,
            swift.vllm_tensor_parallel_size) == (1, True, True, 2)
    rlhf = parse_launch("python -m openrlhf.cli.train_ppo_ray --pretrain m --vllm_num_engines 8 --colocate_all_models "
                        "--vllm_enable_sleep --deepspeed_enable_sleep").training.method.setup.generation
    assert (rlhf.vllm_sleep_level, rlhf.offload_model, rlhf.offload_optimizer) == (1, True, True)


def test_vllms_context_is_read_from_each_trainers_files_and_sizes_its_floor():
    from zeroadvisor.config.method_reader import read_mapping
    from zeroadvisor.memory.method import vllm_floor

    where = lambda key: f"{key} in g.yaml"  # noqa: E731
    trl = read_mapping({"use_vllm": True, "vllm_max_model_length": 3000}, "trl", where).setup.generation
    swift = parse_launch("NPROC_PER_NODE=8 swift rlhf --rlhf_type grpo --model m --use_vllm true --vllm_mode colocate "
                         "--vllm_max_model_len 2048").training.method.setup.generation
    axolotl = read_mapping({"rl": "grpo", "trl": {"use_vllm": True}, "vllm": {"max_model_len": 4096}}, "axolotl",
                           where).setup.generation
    assert (trl.vllm_max_model_len, swift.vllm_max_model_len, axolotl.vllm_max_model_len) == (3000, 2048, 4096)
    # the context the trainer starts vLLM with wins over prompt + completion and over the training sequence: one
    # request's KV cache is that many tokens, in whole 16-token blocks (3000 -> 3008)
    spec = spec_from_hf_config({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
                                "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000})
    gen = Generation(use_vllm=True, max_prompt_length=512, max_completion_length=1024, vllm_max_model_len=3000)
    floor = vllm_floor(MethodSetup(method=Method.GRPO, generation=gen), spec, 8192, 80 * 10**9)
    assert floor is not None and floor.tokens == 3000 and floor.kv_cache == 2 * 32 * 32 * 128 * 2 * 3008


def test_a_bad_sleep_level_is_one_line():
    import pytest

    from zeroadvisor.config.method_reader import TrainerInputError, read_mapping

    with pytest.raises(TrainerInputError) as caught:
        read_mapping({"sleep_level": 3}, "trl", lambda key: f"{key} in g.yaml")
    assert "sleep_level in g.yaml" in str(caught.value) and "0, 1 or 2" in str(caught.value)


def test_vllm_asleep_and_the_rollout_are_moments_apart_never_summed():
    # OpenRLHF --colocate_all_models --vllm_enable_sleep: vLLM wakes, generates and sleeps again before the actor's
    # scoring forwards run (experience_maker.py generate_samples @ v0.8.5), so the awake share, the scoring moment and
    # the training step are three moments: the peak holds the largest beyond what persists, not two of them.
    setup = replace(openrlhf(4, vllm=True), generation=replace(openrlhf(4, vllm=True).generation,
                                                               vllm_gpu_memory_utilization=0.2, vllm_sleep_level=1))
    st = stage_of(setup, 2, spec=SPEC3)
    scoring = moment_term(st)
    assert scoring is not None  # the scoring forwards outgrow the step
    step = step_transient(st, gathered=False)
    [awake] = vllm_terms(st)
    assert awake.nbytes == max(0, int(80 * GB * 0.2) - (step + scoring.nbytes))
    counted = step + scoring.nbytes + awake.nbytes
    assert counted == max(step, step + scoring.nbytes, int(80 * GB * 0.2))


def test_openrlhf_colocated_vllm_takes_openrlhfs_own_default_share():
    # --vllm_gpu_memory_utilization defaults to 0.95 in OpenRLHF (cli/train_ppo_ray.py @ v0.6.4 to v0.8.11, and
    # --vllm.gpu_memory_utilization @ v0.11.0), 0.9 before 0.6.4 (v0.6.0 to v0.6.3): not TRL's 0.3
    def share(version: str | None) -> int:
        [term] = vllm_terms(stage_of(openrlhf(4, version, vllm=True), 3, spec=SPEC3))
        return term.nbytes

    assert share(None) == int(80 * GB * 0.95)
    assert share("0.8.5") == int(80 * GB * 0.95)
    assert share("0.6.3") == int(80 * GB * 0.9)


def test_vllm_asleep_between_steps_is_not_held_through_the_checkpoint_save():
    # the save runs between optimizer steps, after vLLM went back to sleep (TRL vllm_generation.py llm.sleep after
    # generating; ms-swift rollout_mixin.py; OpenRLHF before make_experience): its share is not on the GPU then, so
    # the save phase's peak is the same whatever the share (the step's transients are freed as well)
    def save_gpu(share: float) -> int:
        st = stage_of(colocated(vllm_sleep_level=1, vllm_gpu_memory_utilization=share), 3, seq=2048)
        [awake] = vllm_terms(st)
        assert awake.nbytes > 0  # the share outgrows the step: a moment of its own
        return st.phases["save"].gpu

    assert save_gpu(0.6) == save_gpu(0.7)
    # awake throughout (no sleep): the share is held through the save
    always = [stage_of(colocated(vllm_gpu_memory_utilization=share), 3, seq=2048).phases["save"].gpu
              for share in (0.6, 0.7)]
    assert always[1] - always[0] == int(80 * GB * 0.7) - int(80 * GB * 0.6)


def test_openrlhf_grpo_is_its_ppo_loop_and_counts_the_same_rollout():
    """train_ppo_ray --advantage_estimator group_norm runs the same experience maker and actor as PPO (v0.8.5):
    read as --trainer grpo, the actor's scoring forward and its micro_rollout_batch_size are counted as PPO's."""
    grpo_setup = replace(openrlhf(4, vllm=True), method=Method.GRPO)
    ppo_st, grpo_st = stage_of(openrlhf(4, vllm=True), 2, spec=SPEC3), stage_of(grpo_setup, 2, spec=SPEC3)
    assert rollout(grpo_st) == rollout(ppo_st) == (2 + 4) * 4 * 2048 * V3
    assert "experience_maker.py" in moment_term(grpo_st).source
    e = estimate(config(3), SPEC, TrainingShape(None, "full", method=replace(grpo_setup, generation=replace(
        grpo_setup.generation, rollout_batch_size=None))), CLUSTER)
    assumed = {a.name: a.value for a in e.assumed}
    assert assumed["rollout_batch_size"] == OPENRLHF_ROLLOUT_BATCH
    assert "max_completion_length" not in assumed  # no logits_to_keep to bound


def test_openrlhf_grpo_trains_on_the_whole_sequences_logits_not_the_completions():
    """OpenRLHF's Actor.forward upcasts the logits of the whole sequence and slices the actions' log-probs after
    (openrlhf/models/actor.py @ v0.8.5): no TRL logits_to_keep, so its training step's activations are PPO's."""
    from zeroadvisor.memory.method import activation_spec

    setup = replace(openrlhf(4), method=Method.GRPO)
    assert activation_spec(setup, SPEC3).lm_head
    assert activation_spec(replace(setup, trainer=TrainerFamily.TRL), SPEC3).lm_head is False
    st, ppo = stage_of(setup, 2, spec=SPEC3), stage_of(openrlhf(4), 2, spec=SPEC3)
    assert not [t for t in st.terms if t.key == "completion_logits"]
    # the same step (PPO's colocated critic adds a term of its own, 0 here: its step is the actor's)
    assert step_transient(st, gathered=False) == step_transient(ppo, gathered=False)


def test_openrlhf_grpo_loads_a_reference_at_its_default_kl_coefficient():
    """--init_kl_coef defaults to 0.01 (train_ppo_ray.py @ v0.5.1 to v0.8.11): a reference model unless it is <= 0,
    not TRL's beta 0.0."""
    from zeroadvisor.memory.method import has_reference

    setup = MethodSetup(method=Method.GRPO, trainer=TrainerFamily.OPENRLHF)
    assert has_reference(setup, SPEC)
    assert not has_reference(replace(setup, beta=0.0), SPEC)
    e = estimate(config(3), SPEC, TrainingShape(2048, "full", method=setup), CLUSTER)
    [beta] = [a for a in e.assumed if a.name == "beta"]
    assert (beta.value, beta.key) == (0.01, "--init_kl_coef")


def llama_factory_ppo(new_tokens: int | None = None) -> MethodSetup:
    return MethodSetup(method=Method.PPO, trainer=TrainerFamily.LLAMA_FACTORY, trainer_version="0.9.3",
                       use_reference=False, generation=Generation(max_completion_length=new_tokens))


def test_llama_factory_ppo_generates_a_mini_batch_inside_trl_0_9_6s_whole_gather():
    """get_inputs generates per_device_train_batch_size prompts (mini_batch_size, not x accumulation) of up to
    cutoff_len tokens plus max_new_tokens inside unwrap_model_for_generation, which at ZeRO-3 gathers the whole
    value-head model (llamafactory/train/ppo/trainer.py @ v0.9.3, trl/models/utils.py @ v0.9.6)."""
    st = stage_of(llama_factory_ppo(), 3, accumulation=4, micro=2, seq=1024)
    term = moment_term(st)
    assert term is not None and "ppo/trainer.py" in term.source and "v0.9.6" in term.source
    assert "policy gathered whole" in term.formula and "KV cache 2 rows × (1024 + 1024) tokens" in term.formula
    assert term.nbytes + step_transient(st, gathered=True) > 2 * P * 0.95
    # below ZeRO-3 no gather: the KV cache, the next-token scores and the prompt's prefill, which stay under the
    # step that trains on the same query and response (its loss's four fp32 copies of the logits): no term
    st2 = stage_of(llama_factory_ppo(8192), 2, accumulation=4, micro=2, seq=1024)
    kv = kv_cache_bytes(SPEC, 2, 1024 + 8192, 2)
    assert kv is not None
    assert rollout(st2) == 0
    assert step_transient(st2, gathered=False) > kv + 2 * 4 * 2 * V + 3 * 2 * 1024 * 11008 * 2


def test_llama_factory_ppo_scores_with_the_value_head_model_inside_the_same_gather():
    """get_rewards scores the mini batch's query + response with the value-head model inside TRL 0.9.6's
    unwrap_model_for_generation (the policy with its reward adapter swapped in, the default reward_model_type lora):
    the bf16 logits and their fp32 upcast (AutoModelForCausalLMWithValueHead.forward), beside the whole gather at
    ZeRO-3; with a Llama-3 vocabulary they outgrow the generation's KV cache. A reward served by an API runs no
    forward here (llamafactory/train/ppo/trainer.py get_rewards @ v0.9.3)."""
    from zeroadvisor.config.method import Placement
    from zeroadvisor.vocab import ModelRole

    lora = replace(llama_factory_ppo(), placements=(Placement(ModelRole.REWARD, "saves/rm", loaded=False),))
    api = replace(lora, placements=(Placement(ModelRole.REWARD, "http://rm", loaded=False, remote=True),))
    scored, served = (moment_term(stage_of(setup, 3, micro=2, seq=1024, spec=SPEC3)) for setup in (lora, api))
    assert scored is not None and served is not None
    kv = kv_cache_bytes(SPEC3, 2, 1024 + 1024, 2)
    assert kv is not None
    logits = (2 + 4) * 2 * 2048 * V3
    assert logits > kv + 2 * 4 * 2 * V3 + 3 * 2 * 1024 * 14336 * 2
    # the same gather under both; the scoring logits replace the generation's moment where they are larger
    assert scored.nbytes - served.nbytes == logits - (kv + 2 * 4 * 2 * V3 + 3 * 2 * 1024 * 14336 * 2)
    assert "reward scoring logits (2 + 4) B × 2 × 2048 × V" in scored.formula and "get_rewards" in scored.source
    assert "reward scoring" not in served.formula


def test_llama_factory_ppo_reads_max_new_tokens_and_assumes_its_default(tmp_path):
    from zeroadvisor.config.trainer_errors import TrainerInputError
    from zeroadvisor.config.training_args import read_training_args

    def read(text: str) -> MethodSetup:
        path = tmp_path / "ppo.yaml"
        path.write_text("model_name_or_path: m\nstage: ppo\nfinetuning_type: full\nreward_model_type: api\n"
                        "reward_model: http://rm\n" + text)
        reading = read_training_args(path).method
        assert reading is not None
        return reading.setup

    assert read("max_new_tokens: 512\n").generation.max_completion_length == 512
    assert read("").generation.max_completion_length is None
    e = estimate(config(3), SPEC, TrainingShape(1024, "full", method=llama_factory_ppo()), CLUSTER)
    [assumed] = [a for a in e.assumed if a.name == "max_completion_length"]
    assert (assumed.value, assumed.key) == (1024, "max_new_tokens")  # GeneratingArguments' default @ v0.9.3
    with pytest.raises(TrainerInputError, match=r"^max_new_tokens in .*ppo\.yaml: expected a whole number"):
        read("max_new_tokens: many\n")


# --------------------------------------------------------------------------- the vLLM weight sync at ZeRO-3


def sync_term(st):
    return next((t for t in st.terms if t.key == SYNC_KEY and t.phase == "train"), None)


def lora(spec=SPEC, config=LLAMA2_7B):
    from zeroadvisor.model.hf import layout_from_hf_config
    from zeroadvisor.model.peft import PeftSettings, apply

    return apply(spec, layout_from_hf_config(config)[2], PeftSettings(method="lora", r=16))


def test_trl_syncs_a_peft_policy_to_vllm_gathered_whole_at_zero3():
    """trl/generation/vllm_generation.py sync_weights: with PEFT every parameter is gathered at once before
    merge_adapter (trl#4100: "each GPU load one model?"); a full model one parameter at a time; below ZeRO-3
    nothing is gathered. The sync replaces the step's transients: the peak is the larger, never the sum."""
    for mode in ("colocate", "server"):
        st = stage_of(grpo(use_vllm=True, vllm_mode=mode), 3, spec=lora())
        term = sync_term(st)
        assert term is not None and term.row == "gathered_parameters" and term.kind == "bound"
        assert "sync_weights" in term.source and "gathered whole" in term.formula
        moment = term.nbytes + step_transient(st, gathered=True)
        assert 2 * P * 0.95 < moment <= 2 * P  # the non-persistent parameters in bf16
    assert sync_term(stage_of(grpo(use_vllm=True, vllm_mode="colocate"), 3)) is None  # full: per parameter
    # QLoRA: the 4-bit Linear weights are gathered in their packed bytes
    from zeroadvisor.model.hf import layout_from_hf_config
    from zeroadvisor.model.peft import PeftSettings, apply

    qlora = apply(SPEC, layout_from_hf_config(LLAMA2_7B)[2], PeftSettings(method="qlora", r=16))
    packed = stage_of(grpo(use_vllm=True, vllm_mode="server"), 3, spec=qlora)
    term = sync_term(packed)
    moment = (term.nbytes if term else 0) + step_transient(packed, gathered=True)
    assert moment < 2 * P * 0.45 and (term is None or "packing" in term.formula)
    assert sync_term(stage_of(grpo(use_vllm=True, vllm_mode="colocate"), 2, spec=lora())) is None
    assert sync_term(stage_of(grpo(), 3, spec=lora())) is None  # no vLLM: the generation moment's own gather


def test_ms_swift_syncs_by_move_model_batches_and_a_full_model_from_3_10():
    """swift rollout_mixin.py: each --move_model_batches group gathered at once, the whole model by default, for
    LoRA and (from 3.10, _move_full_model_to_vllm) a full model; 3.9 synced a full model one parameter at a time."""
    assert sync_term(stage_of(colocated("3.9.0"), 3, seq=2048)) is None
    full = stage_of(colocated("3.10.0"), 3, seq=2048)
    whole = sync_term(full)
    assert whole is not None and "move_model_batches" in whole.source
    assert 2 * P * 0.95 < whole.nbytes + step_transient(full, gathered=True) <= 2 * P
    # the newest read where unpinned: the same moment, above a step whose completion logits differ (4.1.2 divides them
    # by the temperature in place: completion_logits_terms)
    unpinned = stage_of(colocated(None), 3, seq=2048)
    assert sync_term(unpinned).nbytes + step_transient(unpinned, gathered=True) == \
        whole.nbytes + step_transient(full, gathered=True)
    assert sync_term(stage_of(colocated("3.9.0"), 3, seq=2048, spec=lora())) is not None  # LoRA: by groups always
    batched = stage_of(colocated("3.10.0", move_model_batches=8), 3, seq=2048)
    step = step_transient(batched, gathered=True)
    term = sync_term(batched)
    moment = (term.nbytes if term else 0) + step
    # 4 of 32 layers (1/8 of the layers' 6.48B) or the embeddings and head (0.26B): 0.81B in bf16
    layers = P - 2 * 32000 * 4096
    assert moment <= max(2 * layers // 8, step) + 2 * 10**6
    # 3.12.1 to 3.12.5 gather every parameter once around the groups (ms-swift#7986)
    buggy = stage_of(colocated("3.12.3", move_model_batches=8), 3, seq=2048)
    assert sync_term(buggy).nbytes == whole.nbytes and "notwithstanding" in sync_term(buggy).what
    assert sync_term(stage_of(colocated("3.12.6", move_model_batches=8), 3, seq=2048)) == term


def test_the_sync_wakes_vllm_s_weights_so_sleep_mode_does_not_hide_them():
    """With --sleep_level vLLM sleeps while the policy trains; the weight sync wakes its weights first (its KV cache
    after, once the trainer has offloaded): that moment holds the gather and vLLM's 16-bit weights."""
    weights = 2 * P
    # a fifth of the card: generating (the whole share, the step's transients freed) is the smaller awake moment
    st = stage_of(colocated("3.10.0", vllm_sleep_level=1, vllm_gpu_memory_utilization=0.2), 3, seq=2048)
    [share] = vllm_terms(st)
    assert share.nbytes == weights and "woken for the sync" in share.formula
    assert sync_term(st) is not None  # the gather outgrows the step: vLLM's weights beside it
    # six tenths: generating is the larger; the sync changes nothing there
    [generating] = vllm_terms(stage_of(colocated("3.10.0", vllm_sleep_level=1), 3, seq=2048))
    assert generating.nbytes > weights and "sync" not in generating.formula
    # a long sequence: the step's transients outgrow the gather, which replaces them; only what the gather leaves of
    # the step is taken off vLLM's weights
    long = stage_of(colocated("3.10.0", vllm_sleep_level=1, vllm_gpu_memory_utilization=0.2), 3, seq=32768)
    [share] = vllm_terms(long)
    step = step_transient(long, gathered=True)
    assert sync_term(long) is None and "woken for the sync" in share.formula
    gather = share.nbytes + step - weights  # the sync moment's gather: the non-persistent parameters in bf16
    assert 2 * P * 0.95 < gather <= 2 * P
    # vLLM's tensor parallelism: each worker wakes its shard
    [tp2] = vllm_terms(stage_of(colocated("3.10.0", vllm_sleep_level=1, vllm_tensor_parallel_size=2,
                                          vllm_gpu_memory_utilization=0.1), 3, seq=2048))
    assert tp2.nbytes == weights // 2 and "/ 2" in tp2.formula


def test_ms_swift_move_model_batches_is_read():
    gen = parse_launch("NPROC_PER_NODE=8 swift rlhf --rlhf_type grpo --model m --use_vllm true --move_model_batches 16"
                       ).training.method.setup.generation
    assert gen.move_model_batches == 16
