"""accounting="deepspeed" against hand calculations from DeepSpeed 0.19.8's source and its own estimators.

Every expected number below is written out from DeepSpeed's allocations (file/function named
next to it) or copied from the estimator output in reference memory-model.md §4; none comes
from this package's output.
"""

from __future__ import annotations

import json

import pytest

from zeroadvisor.deepspeed import schema
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.memory.settings import read_settings
from zeroadvisor.model.spec import ModelSpec, TrainingShape

P = 7_500_000_000
N = 8
PART = P // N  # 937_500_000: divisible, so stage-1/2 alignment (2·N) and stage-3 ceil add nothing
LP = 200_000_000  # largest layer, as in the estimator runs of reference §4
FP16_ADAM = {"fp16": {"enabled": True}, "optimizer": {"type": "Adam"}}


def cfg(stage, **zero):
    return {**FP16_ADAM, "zero_optimization": {"stage": stage, **zero}}


def run(config, parameters=P, gpus=N, largest=LP, **kw):
    spec = ModelSpec(parameters=parameters, largest_layer_parameters=largest)
    # DeepSpeed's own allocations: a fused client optimizer, whose step builds no temporaries
    # (tests/test_memory_step_temporaries.py tests the foreach step's)
    return estimate(config, spec, TrainingShape(optim="adamw_torch_fused"), Cluster(gpus=gpus, **kw))


# ------------------------------------------------------------------ DeepSpeed's estimators (reference §4)


# stage_1_and_2.py step() builds the fp32 gradient partition from a flattened fp16 copy
# (flatten(averaged_gradients).to(fp32), then del the copy): while it is cast both exist, 2 B/param / G that
# DeepSpeed's estimator leaves out. With no activations to free before the step (no sequence length here) the step's
# gradient share is all of it (memory/step_temporaries.py).
STEP_CAT_COPY = 2


def test_zero2_estimator_no_offload():
    # estimate_zero2_model_states_mem_needs(7.5e9, 8 GPUs, cpu_offload=False): gpu 31875000000
    # = 2P + int(18P/G): 2 fp16 params + (2 grads16 + 4 grads32 + 4 params32 + 8 Adam) / G; + the step's cat copy
    assert 2 * P + 18 * P // N == 31_875_000_000
    assert run(cfg(2)).stage(2).per_gpu["model_states"] == 2 * P + (18 + STEP_CAT_COPY) * P // N


def test_zero2_estimator_offload():
    # cpu_offload=True: gpu 15000000000 = 2P (fp16 params only; grads stream to the host)
    assert run(cfg(2)).stage(2, "cpu").per_gpu["model_states"] == 2 * P == 15_000_000_000


def test_zero2_estimator_one_gpu():
    # 1 node x 1 GPU, no offload: 139.70 GiB = 150e9 B = 2P + 18P
    assert run(cfg(2), gpus=1).stage(2).per_gpu["model_states"] == 2 * P + (18 + STEP_CAT_COPY) * P
    assert 2 * P + 18 * P == 150_000_000_000
    assert abs(150_000_000_000 / 2**30 - 139.70) < 0.005


# no prefetch and no reuse window: only the module being computed stays gathered (DeepSpeed's estimator's view)
NO_PREFETCH = {"stage3_prefetch_bucket_size": 0, "stage3_param_persistence_threshold": 0,
               "stage3_max_reuse_distance": 0}


def test_zero3_estimator_offload_params_and_optimizer():
    # offload_param=cpu, offload_optimizer=cpu: gpu 800000000 = 4·L_p (16-bit largest layer: params + grads).
    # With no prefetch bucket the gathered row is exactly the estimator's 4·L_p.
    st = run(cfg(3, **NO_PREFETCH)).stage(3, "cpu", "cpu")
    assert st.per_gpu["model_states"] == 0
    assert st.per_gpu["gathered_parameters"] == 4 * LP == 800_000_000


def test_zero3_estimator_offload_optimizer():
    # offload_param=none, offload_optimizer=cpu: gpu 2675000000 = 4·L_p + 2P/G
    st = run(cfg(3, **NO_PREFETCH)).stage(3, "cpu")
    assert st.per_gpu["model_states"] + st.per_gpu["gathered_parameters"] == 4 * LP + 2 * P // N == 2_675_000_000


def test_zero3_estimator_no_offload_plus_the_flat_gradient_buffer():
    # Estimator: 17675000000 = 4·L_p + 18P/G. DeepSpeed 0.19.8 also allocates
    # grad_partitions_flat_buffer (stage3.py _setup_for_real_optimizer) of P/G elements in the
    # gradient-accumulation dtype (= fp16 here): +2P/G, which the estimator omits. The "18"
    # (2 fp16 params + 4 fp32 params + 4 fp32 grads + 8 Adam) is otherwise the same, except that the step
    # builds the fp32 gradient beside its fp16 cat copy (stage3.py _prepare_fp32_grad_for_sub_group): +2P/G more
    # with no activations freed before it (memory/step_temporaries.py sub_group_gradient).
    st = run(cfg(3, **NO_PREFETCH)).stage(3)
    assert st.per_gpu["model_states"] + st.per_gpu["gathered_parameters"] == 4 * LP + 18 * P // N + 4 * PART
    assert 4 * LP + 18 * P // N == 17_675_000_000  # the estimator's number


# ------------------------------------------------------------------ hand calculations per stage


def test_stage0_fp16_adam():
    # FP16_Optimizer: fp16 flat params 2P; gradients: fp16 param.grad 2P after backward, replaced at the step
    # by one fp32 flat copy 4P (FP16_Optimizer.step sets p.grad = None): row = max = 4P; fp32 master 4P, Adam 8P
    st = run(cfg(0)).stage(0)
    assert (st.per_gpu["parameters"], st.per_gpu["gradients"], st.per_gpu["optimizer_states"]) == (2 * P, 4 * P, 12 * P)
    # engine.py buffered_allreduce_fallback flattens up to MEMORY_OPT_ALLREDUCE_SIZE = 5e8 fp16 elements
    assert st.per_gpu["buffers"] == 2 * 500_000_000


def test_stage0_fp32_sgd_without_and_with_momentum():
    base = {"optimizer": {"type": "SGD", "params": {"lr": 0.1}}, "zero_optimization": {"stage": 0}}
    st = run(base).stage(0)
    assert (st.per_gpu["parameters"], st.per_gpu["gradients"], st.per_gpu["optimizer_states"]) == (4 * P, 4 * P, 0)
    base["optimizer"]["params"]["momentum"] = 0.9
    assert run(base).stage(0).per_gpu["optimizer_states"] == 4 * P  # momentum_buffer


def test_stage1_fp16():
    # gradient row = the full fp16 grads after backward (2P; the partition's 2P/N kept to the step, the rest freed
    # before it) + what step() builds beyond what was freed before it: the fp16 cat copy 2P/N and the fp32
    # single_grad_partition 4P/N (benchmarks/zero2_step.md, stage 1). No activations here. N = 8: 6P/N < 2P·7/8
    # freed, so 2P params + 2P grads + (4 master + 8 Adam) P/N
    st = run(cfg(1)).stage(1)
    assert st.per_gpu["model_states"] == 4 * P + 12 * PART
    # N = 1: nothing freed, the step builds 2P + 4P beside the 2P kept: 2P + (2P + 6P) + 12P
    assert run(cfg(1), gpus=1).stage(1).per_gpu["model_states"] == 22 * P
    # one reduce bucket (overlap_comm is False below stage 3): reduce_bucket_size × 2 B, and the reduction's flat
    # copy of a full bucket (average_tensor -> allreduce_and_scatter -> allreduce_bucket flatten), a moment before
    # the step: expected beyond the step's excess, which is none here (the step reuses the gradients freed before it)
    (copy,) = [t for t in st.terms if t.key == "allreduce_bucket"]
    assert copy.nbytes == copy.upper == 500_000_000 * 2
    assert st.per_gpu["buffers"] == 500_000_000 * 2 + copy.nbytes


def test_stage1_bf16_optimizer_path():
    # bf16 + stage 1 + grad_accum_dtype fp32 + no offload -> BF16_Optimizer (engine._do_optimizer_sanity_check):
    # bf16 params 2P, full fp32 grad buffer 4P, bf16 grads 2P until backward_epilogue, fp32 master + Adam 12P/N
    config = {"bf16": {"enabled": True}, "data_types": {"grad_accum_dtype": "fp32"},
              "optimizer": {"type": "AdamW"}, "zero_optimization": {"stage": 1}}
    st = run(config).stage(1)
    assert st.per_gpu["parameters"] == 2 * P
    assert st.per_gpu["gradients"] == 4 * P + 2 * P
    assert st.per_gpu["optimizer_states"] == 12 * PART
    config["bf16"]["immediate_grad_update"] = True  # bf16 grads folded in as produced
    assert run(config).stage(1).per_gpu["gradients"] == 4 * P
    # the same config at stage 0 raises NotImplementedError in DeepSpeed: skipped
    result = run(config)
    assert all(st.option.stage != 0 for st in result.stages)
    assert any(k.option.stage == 0 and "NotImplementedError" in k.reason for k in result.skipped)


def test_stage2_bf16_fp32_accumulation_compact_partition():
    # stage_1_and_2.py _build_compact_grad_partition_buffer: one fp32 partition buffer receives the reduced
    # grads and is the step's fp32 gradient: 2P + (4 + 4 master + 8 Adam) P/N
    config = {"bf16": {"enabled": True}, "data_types": {"grad_accum_dtype": "fp32"},
              "zero_optimization": {"stage": 2}}
    assert run(config).stage(2).per_gpu["model_states"] == 2 * P + 16 * PART


def test_stage2_bf16_master_weights_and_optimizer_states_on_gpu():
    # bf16 master (2) + bf16 Adam moments (2 + 2); grads_in_partition (2) + the step's flattened copy in
    # the master dtype (2): 2P + (2 + 2 + 2 + 4) P/N. (reference §2.1 derives 2Ψ + 8Ψ/N; the step's
    # flatten() in stage_1_and_2.py step() is a second 2-byte partition)
    config = {"bf16": {"enabled": True, "bf16_master_weights_and_grads": True, "bf16_optimizer_states": True},
              "zero_optimization": {"stage": 2}}
    assert run(config).stage(2).per_gpu["model_states"] == 2 * P + 10 * PART


def test_bf16_master_without_states_needs_offload():
    config = {"bf16": {"enabled": True, "bf16_master_weights_and_grads": True},
              "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    result = run(config)
    labels = {st.option.label for st in result.stages}
    assert "Z2" not in labels and "Z1" not in labels and "Z0" not in labels and "Z2 +opt:cpu" in labels
    st = result.stage(2, "cpu")
    # host: bf16 master 2 + bf16 grad partition 2 + fp32 CPU-Adam moments 8 + bf16 upload staging 2 (per P/N)
    # + host gradient staging buffer 2·L_p (stage_1_and_2.py temp_grad_buffer_for_cpu_offload)
    assert st.per_gpu_cpu == (2 + 2 + 8 + 2) * PART + 2 * LP
    assert st.per_node_cpu == st.per_gpu_cpu * 8


def test_fp16_master_weights_offload():
    config = {"fp16": {"enabled": True, "fp16_master_weights_and_grads": True},
              "zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}}}
    st = run(config).stage(1, "cpu")
    assert st.per_gpu_cpu == (2 + 2 + 8 + 2) * PART + 2 * LP
    assert st.per_gpu["model_states"] == 2 * P + 2 * P  # fp16 params + full fp16 grads after backward (stage 1)


def test_stage3_fp16_adam_hand():
    # params 2P/N; grads: flat buffer 2P/N (grad accum = fp16) + the step's fp32 gradient of one sub-group
    # (sub_group_size 1e9 > P/N, so the whole partition), built beside its fp16 cat copy: (2 + 4) P/N with no
    # activations to absorb it (memory/step_temporaries.py sub_group_gradient); master + Adam 12P/N
    st = run(cfg(3)).stage(3)
    assert st.per_gpu["parameters"] == 2 * PART
    assert st.per_gpu["gradients"] == 2 * PART + 6 * PART
    assert st.per_gpu["optimizer_states"] == 12 * PART
    # small sub-groups bound the step's fp32 gradient: (2 + 4) B × sub_group_size
    st = run(cfg(3, sub_group_size=100_000_000)).stage(3)
    assert st.per_gpu["gradients"] == 2 * PART + 6 * 100_000_000


def test_stage3_buffers_and_gathered():
    # IPG buffer allocated at init: reduce_bucket_size × 2 B (stage3.py _setup_for_real_optimizer),
    # plus reduce_scatter_coalesced's flat copy of a full bucket (coalesced_collectives.py): 2 × 5e8 × 2
    st = run(cfg(3)).stage(3)
    assert st.per_gpu["buffers"] == 2 * 500_000_000 * 2
    # gathered: the prefetch keeps up to max(max_live_parameters, max_reuse_distance) (defaults 1e9) gathered and
    # one more module overshoots it: 2 B × (1e9 + L_p); + 2 B × L_p gradient; + one prefetch's flat all-gather
    # buffer, 2 B × (min(bucket 5e7, max_live) + L_p); persistence not estimated (no layers given)
    flat = 2 * (50_000_000 + LP)
    assert st.per_gpu["gathered_parameters"] == 2 * (1_000_000_000 + LP) + 2 * LP + flat
    # max_live_parameters caps the prefetch, never the module being computed (nor the one that overshoots)
    st = run(cfg(3, stage3_max_live_parameters=1000, stage3_max_reuse_distance=0)).stage(3)
    assert st.per_gpu["gathered_parameters"] == 2 * (LP + 1000) + 2 * LP + 2 * (1000 + LP)


def test_stage3_offload_host_and_nvme():
    st = run(cfg(3, offload_optimizer={"device": "cpu"})).stage(3, "cpu")
    # host per GPU: fp16 grad flat buffer 2 + fp32 sub-group grad buffer 4 + master 4 + Adam 8 (× P/N)
    assert st.per_gpu_cpu == 18 * PART
    assert st.per_node_cpu == 18 * PART * 8
    st = run(cfg(3, offload_optimizer={"device": "nvme", "nvme_path": "/x"})).stage(3, "nvme")
    # NVMe: master 4 + Adam 8 + fp32 grads 4 (× P/N); host: grad flat 2·P/N + gradient_buffer 4·sub +
    # buffer_count 4 × sub × 4 B pinned swap buffers (optimizer_utils.py SwapBufferManager), sub = P/N
    assert st.per_gpu_nvme == 16 * PART
    assert st.per_gpu_cpu == 2 * PART + 4 * PART + 4 * 4 * PART
    assert st.per_node_nvme == 16 * PART * 8


def test_stage3_param_nvme_buffers_and_max_in_cpu():
    config = cfg(3, offload_param={"device": "nvme", "nvme_path": "/x", "max_in_cpu": 100_000_000})
    st = run(config).stage(3, "none", "nvme")
    # params: max_in_cpu elements pinned on the host, the rest on NVMe; swap buffers 5 × 1e8 × 2 B
    assert st.per_gpu_nvme == 2 * (PART - 100_000_000)
    assert st.per_gpu_cpu == 2 * 100_000_000 + 5 * 100_000_000 * 2


def test_stage3_partial_offload_ratio():
    # 4 sub-groups of 2.5e8 (sub_group_size) in the 9.375e8 partition; ratio 0.5 keeps int(0.5·4) = 2 on
    # the GPU (stage3.py _create_fp32_partitions): half of master + Adam + fp32 sub-group grads stay.
    config = cfg(3, sub_group_size=250_000_000, offload_optimizer={"device": "cpu", "ratio": 0.5})
    st = run(config).stage(3, "cpu")
    assert st.per_gpu["optimizer_states"] == 12 * PART // 2
    assert st.per_gpu_cpu == 2 * PART + 4 * PART // 2 + 12 * PART // 2


def test_stage12_offload_staging():
    st = run(cfg(2, offload_optimizer={"device": "cpu"})).stage(2, "cpu")
    # GPU: fp16 params only; buffers: one reduce bucket 5e8 × 2, the reduction's flat copy of it, GPU staging 2·L_p,
    # and the boundary's fp64 norm copy of the largest parameter (8·L_p) beside its fp16 gradient (2·L_p), beyond
    # the flat copy freed before it (no activations here)
    assert st.per_gpu["model_states"] == 2 * P
    assert st.per_gpu["buffers"] == 500_000_000 * 2 * 2 + 2 * LP + (8 + 2) * LP - 500_000_000 * 2
    # host: fp32 grad partition 4 + master 4 + Adam 8 + fp16 upload copy 2 (× P/N) + host staging 2·L_p
    assert st.per_gpu_cpu == 18 * PART + 2 * LP


def test_overlap_comm_doubles_stage12_buckets():
    # the reduction's flat copy (the bucket, or a parameter larger than it, reduced alone) is absorbed by the
    # step's excess here (no activations): a moment apart
    assert run(cfg(2, overlap_comm=True)).stage(2).per_gpu["buffers"] == 2 * 500_000_000 * 2
    assert run(cfg(2, overlap_comm=True, reduce_bucket_size=1000)).stage(2).per_gpu["buffers"] == 2 * 1000 * 2


def test_stage1_nvme_runs_as_cpu():
    result = run(cfg(1, offload_optimizer={"device": "nvme", "nvme_path": "/x"}))
    st = result.configured
    assert st.option.label == "Z1 +opt:nvme" and st.per_gpu_nvme == 0
    assert st.per_gpu_cpu == result.stage(1, "cpu").per_gpu_cpu
    assert any("runs as cpu" in n for n in st.notes)


def test_offload_param_ignored_below_stage3():
    result = run(cfg(2, offload_param={"device": "cpu"}))
    assert result.configured.option.label == "Z2"
    assert any("offload_param is ignored at stage 2" in a for a in result.assumptions)


def test_optimizer_states_table():
    def states(kind, **params):
        config = {"fp16": {"enabled": True}, "optimizer": {"type": kind, "params": params},
                  "zero_optimization": {"stage": 1}}
        return run(config, gpus=1).stage(1).per_gpu["optimizer_states"]
    # fp32 master (4) + states (4 each), stage 1 on one GPU
    assert states("Adam") == states("AdamW") == states("Lamb") == 12 * P
    assert states("Lion") == states("Adagrad") == 8 * P
    assert states("SGD") == 4 * P and states("SGD", momentum=0.9) == 8 * P
    assert states("Adam", amsgrad=True) == 16 * P
    unknown = run({"optimizer": {"type": "Shampoo9000"}, "fp16": {"enabled": True}}, gpus=1)
    assert unknown.stage(0).per_gpu["optimizer_states"] == 12 * P
    (assumed,) = [a for a in unknown.assumed if a.name == "optimizer"]
    assert assumed.value == "Adam" and assumed.pointer == "/optimizer/type" and "Shampoo9000" in assumed.effect


def test_without_an_optimizer_block_the_trainers_optim_sets_the_states():
    # no optimizer block: DeepSpeed steps the Trainer's optimizer (transformers integrations/deepspeed.py
    # deepspeed_optim_sched -> trainer.create_optimizer; trainer_optimizer.py picks the class); fp32 master (4)
    # + that class's fp32 states, stage 1 on one GPU
    def states(optim):
        config = {"fp16": {"enabled": True}, "zero_optimization": {"stage": 1}}
        est = estimate(config, ModelSpec(parameters=P, largest_layer_parameters=LP), TrainingShape(optim=optim),
                       Cluster(gpus=1))
        return est.stage(1).per_gpu["optimizer_states"], est
    assert states("adamw_torch")[0] == states("adamw_torch_fused")[0] == states("paged_adamw_32bit")[0] == 12 * P
    assert states("rmsprop")[0] == states("adagrad")[0] == states("lion_32bit")[0] == 8 * P  # square_avg, sum, m
    assert states("sgd")[0] == states("adafactor")[0] == 4 * P  # momentum 0; Adafactor's factored moments
    assert states("ademamix")[0] == states("grokadamw")[0] == 16 * P  # three states: more than AdamW's bound
    # the table names only optim values the Trainer accepts (a misspelt key would never be looked up)
    from zeroadvisor.memory import bytes as B
    from zeroadvisor.model.spec import CLIENT_OPTIMIZER_NAMES
    assert set(B.CLIENT_OPTIMIZER_STATES) <= set(CLIENT_OPTIMIZER_NAMES)
    _, est = states("rmsprop")
    assert not [a for a in est.assumed if a.name == "optimizer"]  # given, not assumed
    assert "RMSprop" in est.settings.optimizer_label
    # 8-bit states are not modelled: AdamW's two fp32 states, an upper bound, and said
    bound, est = states("adamw_bnb_8bit")
    assert bound == 12 * P and any("adamw_bnb_8bit are not modelled" in a for a in est.assumptions)
    # the config's block wins over the Trainer's optim (the Trainer builds none then)
    config = {"fp16": {"enabled": True}, "optimizer": {"type": "AdamW"}, "zero_optimization": {"stage": 1}}
    block = estimate(config, ModelSpec(parameters=P, largest_layer_parameters=LP), TrainingShape(optim="sgd"),
                     Cluster(gpus=1))
    assert block.stage(1).per_gpu["optimizer_states"] == 12 * P


def test_muon_split_uses_embeddings():
    # embeddings + untied head use the auxiliary Adam (2 states), the rest Muon's momentum (1)
    spec = ModelSpec(parameters=1_000_000, embedding_parameters=100_000, vocab_size=100, hidden_size=1000,
                     tied_embeddings=False)
    config = {"fp16": {"enabled": True}, "optimizer": {"type": "Muon"}, "zero_optimization": {"stage": 1}}
    st = estimate(config, spec, cluster=Cluster(gpus=1)).stage(1)
    assert st.per_gpu["optimizer_states"] == 4 * 1_000_000 + 4 * (2 * 200_000 + 1 * 800_000)


def test_hf_auto_fills():
    spec = ModelSpec(parameters=P, hidden_size=4096)
    config = {"zero_optimization": {"stage": 3, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
                                    "stage3_param_persistence_threshold": "auto"}}
    s = read_settings(config, spec, 8)
    assert (s.reduce_bucket_size, s.prefetch_bucket_size, s.param_persistence_threshold) == (
        4096 * 4096, int(0.9 * 4096 * 4096), 10 * 4096)
    # without a hidden size: DeepSpeed's defaults, with an assumption line each
    s = read_settings(config, ModelSpec(parameters=P), 8)
    assert s.reduce_bucket_size == schema.default("zero_optimization", "reduce_bucket_size")
    assert s.prefetch_bucket_size == schema.default("zero_optimization", "stage3_prefetch_bucket_size")
    assert sum("auto" in a for a in s.assumptions) == 3
    # HF fills only the stage3_* spelling
    s = read_settings({"zero_optimization": {"prefetch_bucket_size": "auto"}}, spec, 8)
    assert s.prefetch_bucket_size == schema.default("zero_optimization", "prefetch_bucket_size")


def test_overlap_comm_default_by_stage():
    s = read_settings({"zero_optimization": {"stage": 2}}, ModelSpec(parameters=P), 8)
    assert s.overlap_comm is None and s.overlap_comm_at(3) and not s.overlap_comm_at(2)


def test_micro_batch():
    spec = ModelSpec(parameters=P)
    assert read_settings({"train_micro_batch_size_per_gpu": 4}, spec, 8).micro_batch == 4
    s = read_settings({"train_batch_size": 64, "gradient_accumulation_steps": 2}, spec, 8)
    assert s.micro_batch == 4 and any("derived" in a for a in s.assumptions)
    assert "micro_batch_size" not in {a.name for a in s.assumed}  # DeepSpeed's arithmetic on given counts
    s = read_settings({"train_micro_batch_size_per_gpu": "auto"}, spec, 8)
    assert s.micro_batch == 1
    assert [(a.name, a.value, a.pointer) for a in s.assumed if a.name == "micro_batch_size"] == [
        ("micro_batch_size", 1, "/train_micro_batch_size_per_gpu")]


def test_configured_exactly_once_and_json_contract():
    result = run(cfg(2, offload_optimizer={"device": "cpu"}), gpu_memory=80 * 10**9)
    data = json.loads(json.dumps(result.to_dict()))
    assert set(data) >= {"model", "accounting", "cluster", "stages"}
    assert isinstance(data["model"]["parameters"], int) and isinstance(data["model"]["assumptions"], list)
    assert data["accounting"] == "deepspeed"
    assert sum(st["configured"] for st in data["stages"]) == 1
    rows = {"parameters", "gradients", "optimizer_states", "model_states", "gathered_parameters", "buffers",
            "activations", "overhead", "total"}
    for st in data["stages"]:
        assert st["offload_optimizer"] in ("none", "cpu", "nvme") and st["offload_param"] in ("none", "cpu", "nvme")
        assert set(st["per_gpu"]) == rows and all(type(v) is int for v in st["per_gpu"].values())
        assert type(st["per_node_cpu"]) is int and type(st["per_node_nvme"]) is int
        # --params alone: no architecture, so activations are not counted and a fit is "unknown" (fits null)
        assert (st["fits"], st["verdict"]) == (None, "unknown") if st["counted_verdict"] != "does-not-fit" \
            else st["fits"] is False
        assert st["per_gpu"]["model_states"] == sum(st["per_gpu"][r] for r in ("parameters", "gradients",
                                                                              "optimizer_states"))
        assert st["per_gpu"]["total"] == sum(st["per_gpu"][r] for r in rows - {"total", "parameters", "gradients",
                                                                              "optimizer_states"})
    # every combination DeepSpeed runs: Z0, Z1, Z1+cpu, Z2, Z2+cpu, and 9 at stage 3
    assert len(data["stages"]) == 14
    none_configured = run(None).to_dict()
    assert not any(st["configured"] for st in none_configured["stages"])
    assert all(st["fits"] is None for st in none_configured["stages"])


def test_fits():
    result = run(cfg(3), gpu_memory=80 * 10**9, cpu_memory=10**9)
    # 1 GB of host RAM cannot hold even the runtime of 8 GPU processes (memory/host.py): every option
    # is bound by the host, in some phase
    assert all(st.verdict == "does-not-fit" and st.binding_resource == "host" for st in result.stages)
    result = run(cfg(3), gpu_memory=80 * 10**9, cpu_memory=1000 * 10**9)
    # 7.5B by count alone: no architecture, so activations are not counted; what is counted fits, the verdict is
    # unknown (memory/verdict.py stated), and a does-not-fit stays one
    assert (result.stage(3).counted_verdict, result.stage(3).verdict, result.stage(3).fits) == ("fits", "unknown", None)
    assert result.stage(3, "cpu").counted_verdict == "fits"  # 18 B/param / N × 8 GPUs = 135 GB + runtime < 1 TB
    assert result.stage(0).fits is False  # 16 B/param × 7.5B = 120 GB of model states alone > 80 GB


def test_overhead_allowance():
    # no activations counted (no sequence length) and nothing gathered at stage 2: only the step's fp32 gradient
    # partition (6 B/param / G while its fp16 copy is cast) is re-allocated every step, so the expected fragmentation
    # is 10% of it (memory/allocator.py); its bound keeps 10% of every GPU row
    st = run(cfg(2)).stage(2)
    other = st.per_gpu["model_states"] + st.per_gpu["buffers"] + st.per_gpu["gathered_parameters"]
    # (the reduction's flat copy, built in every reduction, is absorbed by the step's excess here: none expected)
    assert st.per_gpu["overhead"] == 2**30 + (4 + STEP_CAT_COPY) * PART // 10
    assert st.per_gpu_bound["overhead"] == 2**30 + (other + 5) // 10


def test_invalid_inputs():
    with pytest.raises(ValueError):
        estimate(None, ModelSpec(parameters=P), accounting="zero")
    with pytest.raises(ValueError):
        Cluster(gpus=0)
    assert Cluster(gpus=16).gpus_per_node == 8 and Cluster(gpus=4).gpus_per_node == 4


# ------------------------------------------------------------------ activations: tests/test_memory_activations.py

GPT = dict(num_layers=1, hidden_size=4096, num_attention_heads=32, intermediate_size=4 * 4096, gated_mlp=False)


def test_activations_unknown_without_shape():
    result = estimate(None, ModelSpec(parameters=P), TrainingShape(sequence_length=2048), Cluster(gpus=1))
    assert result.stage(1).per_gpu["activations"] == 0
    assert any(a.startswith("activations not estimated") for a in result.assumptions)
    assert [a.name for a in result.assumed if a.name in ("sequence_length", "architecture")] == ["architecture"]
    result = estimate(None, ModelSpec(parameters=P, **GPT), TrainingShape(), Cluster(gpus=1))
    assert result.stage(1).per_gpu["activations"] == 0
    assert any("no sequence length" in a for a in result.assumptions)
    assert [a.name for a in result.assumed if a.name in ("sequence_length", "architecture")] == ["sequence_length"]


def test_refused_configured_option_is_still_the_configured_entry():
    # bf16 + fp32 grad accumulation without ZeRO: DeepSpeed raises NotImplementedError, but the
    # configured entry is still estimated and says so
    config = {"bf16": {"enabled": True}, "data_types": {"grad_accum_dtype": "fp32"}, "zero_optimization": {"stage": 0}}
    result = run(config)
    data = result.to_dict()
    assert sum(st["configured"] for st in data["stages"]) == 1
    assert result.configured.option.stage == 0
    assert any("does not run" in n and "NotImplementedError" in n for n in result.configured.notes)
    assert all(k["stage"] != 0 for k in data["skipped"])


def test_legacy_and_deprecated_forms():
    spec = ModelSpec(parameters=P)
    assert read_settings({"zero_optimization": True}, spec, 8).stage == 1
    s = read_settings({"zero_optimization": {"stage": 2, "cpu_offload": True}}, spec, 8)
    assert s.offload_optimizer == "cpu"
    s = read_settings({"zero_optimization": {"stage": 3, "cpu_offload_param": True}}, spec, 8)
    assert s.offload_param == "cpu"
    s = read_settings({"zero_optimization": {"stage": "auto"}}, spec, 8)
    assert s.stage == schema.default("zero_optimization", "stage")
    assert [(a.name, a.value, a.flag) for a in s.assumed if a.name == "zero_stage"] == [("zero_stage", 0, "--stage")]
    s = read_settings({"bfloat16": {"enabled": True}}, spec, 8)
    assert s.precision == "bf16"
    s = read_settings({"fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"}}, spec, 8)
    assert s.precision == "fp16" and [(a.name, a.pointer) for a in s.assumed if a.name == "precision"] == [
        ("precision", "/fp16/enabled")]
    # offload sections written as null by a patch mean "no offload"
    s = read_settings({"zero_optimization": {"stage": 3, "offload_optimizer": None}}, spec, 8)
    assert s.offload_optimizer == "none"
