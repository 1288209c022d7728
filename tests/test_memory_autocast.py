"""torch_autocast (DeepSpeed 0.17+) costed from DeepSpeed 0.19.8 and torch's autocast (memory/autocast.py): fp32
model states, activations in the autocast dtype plus the fp32 residual stream, 16-bit Linear weight copies
where plain F.linear runs, one gradient bucket per comm dtype, a 16-bit ZeRO-3 all-gather buffer. Every expected
number is a hand calculation from those sources, written out here."""

from __future__ import annotations

import pytest

from zeroadvisor.deepspeed.config_model import Rejected
from zeroadvisor.deepspeed.settings import read
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.model.spec import Checkpointing, LoadInputs, ModelSpec, TrainingShape
from zeroadvisor.vocab import Precision

# Llama-2-7B (config.json: hidden 4096, 32 layers, 32 heads, MLP 11008 gated, vocab 32000, untied head)
L, H, A, F, V = 32, 4096, 32, 11008, 32000
P7 = 6_738_415_616
LLAMA = ModelSpec(parameters=P7, num_layers=L, hidden_size=H, num_attention_heads=A, num_key_value_heads=A,
                  intermediate_size=F, vocab_size=V, gated_mlp=True, embedding_parameters=V * H,
                  tied_embeddings=False)
S = 4096
SHAPE = TrainingShape(sequence_length=S)
BASE = {"train_micro_batch_size_per_gpu": 1}
AUTOCAST = {"torch_autocast": {"enabled": True, "dtype": "bfloat16"}}
RBS = 500_000_000  # zero_optimization.reduce_bucket_size default
LINEAR_WEIGHTS = L * (4 * H * H + 3 * H * F) + V * H  # q, k, v, o, gate, up, down of every layer + the LM head


def gpu(st, key: str) -> int:
    return sum(t.nbytes for t in st.terms if t.key == key and t.device == "gpu" and t.phase == "train")


def run(extra: dict, stage: int, shape: TrainingShape = SHAPE):
    config = {**BASE, **extra, "zero_optimization": {"stage": stage}}
    return estimate(config, LLAMA, shape, Cluster(gpus=8)).configured


def test_the_section_is_read_as_runtime_config_reads_it():
    ac = read({"torch_autocast": {"enabled": True, "dtype": "torch.bfloat16",
                                  "lower_precision_safe_modules": ["torch.nn.Linear"]}}).torch_autocast
    assert (ac.enabled, ac.dtype, ac.lower_precision_safe_modules) == (True, "bf16", ("torch.nn.Linear",))
    assert isinstance(read({"torch_autocast": {"enabled": True, "dtype": "bf17"}}).torch_autocast.dtype, Rejected)
    assert read({}).torch_autocast.enabled is False


def test_autocast_runs_only_on_an_fp32_model_in_a_16_bit_dtype():
    from zeroadvisor.memory.autocast import read_autocast  # here: the other tests run on the code before it

    on = read({**AUTOCAST})
    assert read_autocast(on, Precision.FP32) is not None
    # bf16 weights are not cast by autocast: a bf16 model costs as bf16
    assert read_autocast(on, Precision.BF16) is None
    assert read_autocast(read({"torch_autocast": {"enabled": False, "dtype": "bf16"}}), Precision.FP32) is None
    # no dtype: torch.autocast(dtype=None) is CUDA's float16; the comm dtype None makes fp32 buffers
    default = read_autocast(read({"torch_autocast": {"enabled": True}}), Precision.FP32)
    assert default is not None and default.dtype == Precision.FP16 and default.comm_bytes == 4


def test_zero3_autocast_model_states_stay_fp32_and_activations_drop_to_bf16_plus_the_fp32_stream():
    auto, fp32, bf16 = run(AUTOCAST, 3), run({}, 3), run({"bf16": {"enabled": True}}, 3)
    # model states: fp32 training (engine.get_data_types: model dtype fp32): 4 B x P / 8, the master a clone
    for key in ("lp_params", "master", "optimizer_state", "gathered"):
        assert gpu(auto, key) == gpu(fp32, key)
    assert gpu(auto, "lp_params") == 4 * (P7 // 8)
    # activations: the bf16 run's (memory/activations.py at e = 2), plus the two norms' fp32 inputs and outputs,
    # 4 x (4 - 2) B x h per token and layer (ZeRO-3's linear under zero.Init: no weight copies, no cast copy)
    assert gpu(auto, "activations") == gpu(bf16, "activations") < gpu(fp32, "activations")
    assert gpu(auto, "autocast_fp32_residual") == 8 * H * S * L == 4_294_967_296
    assert gpu(auto, "autocast_weight_copies") == 0
    # one IPG buffer per comm dtype, each in its dtype: bf16 (Linear) + fp32 (norms, embeddings)
    assert gpu(auto, "ipg_bucket") == (2 + 4) * RBS
    # the flat all-gather buffer in bf16, as the bf16 run's; the gathered parameters fp32 (.to(ds_tensor.dtype))
    assert gpu(auto, "gathered_flat") == gpu(bf16, "gathered_flat")
    assert gpu(bf16, "activations") + gpu(bf16, "gathered") < gpu(auto, "activations") + gpu(auto, "gathered")
    assert auto.peak_gpu < fp32.peak_gpu


def test_zero3_without_a_dtype_keeps_two_fp32_buckets():
    auto = run({"torch_autocast": {"enabled": True}}, 3)
    assert gpu(auto, "ipg_bucket") == (4 + 4) * RBS


def test_zero3_without_zero_init_saves_the_bf16_weight_copies():
    shape = TrainingShape(sequence_length=S, load=LoadInputs(zero_init=False))
    auto = run(AUTOCAST, 3, shape)
    assert LINEAR_WEIGHTS == 6_607_077_376
    assert gpu(auto, "autocast_weight_copies") == 2 * LINEAR_WEIGHTS == 13_214_154_752
    assert gpu(auto, "autocast_fp32_residual") == (8 + 2) * H * S * L


@pytest.mark.parametrize("stage", [1, 2])
def test_zero12_autocast_doubles_the_reduce_buckets_and_keeps_weight_copies(stage):
    auto, fp32 = run(AUTOCAST, stage), run({}, stage)
    # stage_1_and_2.py setup_buckets: one bucket per comm dtype (bf16-tagged Linear, fp32 rest), each in the
    # fp32 reduction dtype
    assert gpu(auto, "ipg_bucket") == 2 * gpu(fp32, "ipg_bucket") > 0
    # plain F.linear saves each Linear's bf16 weight copy, whole on every GPU, and one more bf16 input copy
    assert gpu(auto, "autocast_weight_copies") == 2 * LINEAR_WEIGHTS
    assert gpu(auto, "autocast_fp32_residual") == (4 * (4 - 2) + 2) * H * S * L


def test_full_checkpointing_keeps_the_fp32_layer_inputs():
    shape = TrainingShape(sequence_length=S, activation_checkpointing=Checkpointing.FULL)
    auto = run(AUTOCAST, 3, shape)
    assert gpu(auto, "autocast_fp32_residual") == (4 - 2) * H * S * L
