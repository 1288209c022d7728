"""No silent guess (issue 8, item 4): every input that changes the verdict is given by a flag and a
model-description field, or reported as an assumed input (ZA808) naming the value and the flag.

Numbers are hand calculations: bytes per parameter from the dtypes (fp32 4, fp16/bf16 2; Adam keeps
an fp32 master copy and two fp32 moments in mixed precision, the two moments alone in fp32), and
activations from Korthikanti et al. 2022 (per layer 34·sbh + 5·as²b in 16 bits).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from sarif_validate import validate_sarif
from zeroadvisor import api
from zeroadvisor.cli import options
from zeroadvisor.cli.request import to_request
from zeroadvisor.inputs.command import Command
from zeroadvisor.inputs.request import Request
from zeroadvisor.inputs.run import build
from zeroadvisor.memory.assumed import INPUTS, activations_unknown
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.memory.options import Option
from zeroadvisor.memory.phases import load_phase
from zeroadvisor.memory.settings import given_conflicts, read_settings
from zeroadvisor.model.description import FIELDS, apply_overrides, load_description
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import LoadInputs, ModelSpec, TrainingShape

P = 10**6
# A small dense model for hand-calculated activations: L 2, h 64, a 4 heads, MLP 4h, vocab 100.
TINY = ModelSpec(parameters=P, num_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=256,
                 vocab_size=100, gated_mlp=False)
S = 128
# Korthikanti, 16-bit, b = 1, explicit attention, no recomputation: per layer 34·sbh + 5·as²b, plus
# what torch keeps beyond it (memory/activations.py, measured in benchmarks/activations.md): the fp32
# mean and rstd of each of the two LayerNorms per token (native_layer_norm, 8 B).
PER_LAYER = 34 * S * 64 + 5 * 4 * S * S + 2 * 8 * S
# Outside the layers, per token: int64 token ids (8), the embedding dropout mask (h), the final
# LayerNorm (input 2h + stats 8) and the LM-head input (2h).
OUTSIDE = S * (8 + 64 + 2 * 64 + 8) + 2 * S * 64
# The loss (ForCausalLMLoss upcasts): fp32 log-probs, their gradient and the logits' gradient, 12·sV,
# plus the int64 labels.
LOSS = 12 * S * 100 + 8 * S
ACTIVATIONS_B1 = 2 * PER_LAYER + OUTSIDE + LOSS  # = 1,414,144
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256, "intermediate_size": 512,
         "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000}
T5 = {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"], "vocab_size": 32128, "d_model": 512,
      "d_kv": 64, "d_ff": 2048, "num_layers": 6, "num_heads": 8}
GB = 10**9


def shape(**kw) -> TrainingShape:
    return TrainingShape(sequence_length=S, flash_attention=False, **kw)


def names(result) -> list[str]:
    return [a.name for a in result.assumed]


def describe(tmp_path: Path, **fields) -> tuple[ModelSpec, TrainingShape]:
    (tmp_path / "model.yaml").write_text(json.dumps({"parameters": "1M", "num_layers": 2, "hidden_size": 64,
                                                     "num_attention_heads": 4, "intermediate_size": 256,
                                                     "vocab_size": 100, **fields}))
    return load_description(tmp_path / "model.yaml")


# -- the table: every input names a real flag (on both commands) and a real description field ------

def test_every_input_names_a_flag_of_estimate_and_check_and_a_description_field():
    fields = {f.name for f in FIELDS}
    for name, source in INPUTS.items():
        for command in (options.ESTIMATE, options.CHECK):
            flags = {flag for p in command.params for flag in p.flags}
            if source.flag:
                assert source.flag in flags, (name, command.name)
        for field in filter(None, (part.strip() for part in source.field.split(","))):
            assert field in fields, name
    # only the optimizer (config-only), the stage (a config key, not a model fact), the machine facts of the
    # step time, the DeepSpeed release and the allocator's PYTORCH_CUDA_ALLOC_CONF (facts of the environment) lack a
    # field; and the preference/RL method's inputs, which --trainer or the trainer's own file keys set
    method = {"trainer", "trainer_version", "precompute_ref_log_probs", "beta", "vllm_mode",
              "vllm_gpu_memory_utilization", "max_completion_length", "ds3_gather_for_generation", "rollout_batch_size",
              "reward_model_path", "teacher_model", "jsd_beta", "lmbda"}
    assert {n for n, s in INPUTS.items() if not s.field} == {"optimizer", "zero_stage", "efficiency", "cpu_cores",
                                                             "inter_node_bandwidth", "nvme_bandwidth", "launcher",
                                                             "gpu_variant", "deepspeed_version", "alloc_conf",
                                                             *method}
    assert all(INPUTS[n].flag or INPUTS[n].key for n in method)


# -- sequence length -------------------------------------------------------------------------------

def test_without_sequence_length_activations_are_not_counted_and_said_so():
    result = estimate({"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": True}}, TINY, TrainingShape(),
                      Cluster(gpus=1))
    assert result.stage(0).per_gpu["activations"] == 0
    (seq,) = [a for a in result.assumed if a.name == "sequence_length"]
    assert seq.value is None and seq.flag == "--seq-len" and seq.field == "sequence_length"
    assert "NOT counted" in seq.message() and "--seq-len" in seq.message()
    assert activations_unknown(result.assumed)
    assert result.to_dict()["assumed"][names(result).index("sequence_length")] == seq.to_dict()


def test_sequence_length_by_flag_and_by_field_counts_korthikanti_activations(tmp_path):
    config = {"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": True}}
    by_flag = apply_overrides(TrainingShape(flash_attention=False), seq_len=S)
    spec, by_field = describe(tmp_path, sequence_length=S, flash_attention=False)
    for model, given in ((TINY, by_flag), (spec, by_field)):
        result = estimate(config, model, given, Cluster(gpus=1))
        assert result.stage(0).per_gpu["activations"] == ACTIVATIONS_B1 == 1_414_144
        assert "sequence_length" not in names(result) and not activations_unknown(result.assumed)


def test_sequence_length_without_architecture_is_still_activations_unknown():
    result = estimate(None, ModelSpec(parameters=P), TrainingShape(sequence_length=S), Cluster(gpus=1))
    assert "architecture" in names(result) and activations_unknown(result.assumed)


# -- micro batch -------------------------------------------------------------------------------------

@pytest.mark.parametrize("config", [
    {"train_micro_batch_size_per_gpu": "auto", "fp16": {"enabled": True}},
    {"fp16": {"enabled": True}},  # absent: DeepSpeed would assert; HF fills it
    {"train_batch_size": "auto", "fp16": {"enabled": True}},
])
def test_micro_batch_assumed_then_given_by_flag_and_field(tmp_path, config):
    assumed = estimate(config, TINY, shape(), Cluster(gpus=1))
    (mb,) = [a for a in assumed.assumed if a.name == "micro_batch_size"]
    assert (mb.value, mb.flag, mb.field) == (1, "--micro-batch", "micro_batch_size")
    assert assumed.stage(0).per_gpu["activations"] == ACTIVATIONS_B1
    spec, by_field = describe(tmp_path, sequence_length=S, flash_attention=False, micro_batch_size=3)
    for model, given in ((TINY, apply_overrides(shape(), micro_batch=3)), (spec, by_field)):
        result = estimate(config, model, given, Cluster(gpus=1))
        assert result.settings.micro_batch == 3 and "micro_batch_size" not in names(result)
        assert result.stage(0).per_gpu["activations"] == 3 * ACTIVATIONS_B1  # every term is linear in b


def test_micro_batch_auto_pointer_and_derived_value():
    s = read_settings({"train_batch_size": 64, "train_micro_batch_size_per_gpu": "auto",
                       "gradient_accumulation_steps": "auto"}, TINY, 8)
    (mb,) = [a for a in s.assumed if a.name == "micro_batch_size"]
    # DeepSpeed's arithmetic with the "auto" values unfilled: 64 // 8 GPUs // 1 step = 8
    assert (mb.value, mb.pointer) == (8, "/train_micro_batch_size_per_gpu")
    # all counts given: decided by the config, no assumption
    s = read_settings({"train_batch_size": 64, "gradient_accumulation_steps": 2}, TINY, 8)
    assert s.micro_batch == 4 and "micro_batch_size" not in [a.name for a in s.assumed]


def test_a_given_micro_batch_never_overrides_the_config():
    config = {"train_micro_batch_size_per_gpu": 4, "fp16": {"enabled": True}}
    given = TrainingShape(micro_batch_size=2)
    assert read_settings(config, TINY, 1, given).micro_batch == 4  # DeepSpeed reads the config
    (line,) = given_conflicts(config, TINY, 1, given)
    assert "--micro-batch" in line and "micro_batch_size" in line and " 2," in line and "runs 4" in line
    assert given_conflicts(config, TINY, 1, TrainingShape(micro_batch_size=4)) == []


# -- precision ---------------------------------------------------------------------------------------

def test_precision_auto_is_assumed_and_fp32_by_flag_or_field_doubles_the_parameters(tmp_path):
    config = {"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"}}
    assumed = estimate(config, TINY, shape(), Cluster(gpus=1))
    (prec,) = [a for a in assumed.assumed if a.name == "precision"]
    assert (prec.value, prec.flag, prec.field, prec.pointer) == ("fp16", "--precision", "precision", "/fp16/enabled")
    st = assumed.stage(0).per_gpu
    # mixed precision: 2-byte parameters; Adam: fp32 master 4 + moments 8 = 12 B/param
    assert (st["parameters"], st["optimizer_states"]) == (2 * P, 12 * P)
    spec, by_field = describe(tmp_path, sequence_length=S, flash_attention=False, precision="fp32")
    for model, given in ((TINY, apply_overrides(shape(), precision="fp32")), (spec, by_field)):
        result = estimate(config, model, given, Cluster(gpus=1))
        st = result.stage(0).per_gpu
        assert result.settings.precision == "fp32" and "precision" not in names(result)
        assert (st["parameters"], st["optimizer_states"]) == (4 * P, 8 * P)  # fp32 weights; moments only
    bf16 = estimate(config, TINY, apply_overrides(shape(), precision="bf16"), Cluster(gpus=1))
    assert bf16.settings.precision == "bf16" and "precision" not in names(bf16)


def test_only_bf16_auto_assumes_bf16_and_the_given_precision_fills_it():
    config = {"bf16": {"enabled": "auto"}}
    s = read_settings(config, TINY, 1)
    assert s.precision == "bf16" and [a.pointer for a in s.assumed if a.name == "precision"] == ["/bf16/enabled"]
    # --fp16 under the Trainer: Accelerate adds fp16: {enabled: true} (no fp16 section here) and fills bf16's
    # "auto" with false (DeepSpeedPlugin.set_mixed_precision): the run is fp16, no conflict
    assert read_settings(config, TINY, 1, TrainingShape(precision="fp16")).precision == "fp16"
    assert not given_conflicts(config, TINY, 1, TrainingShape(precision="fp16"))
    assert not given_conflicts(config, TINY, 1, TrainingShape(precision="fp32"))


@pytest.mark.parametrize("config, given", [({"fp16": {"enabled": "auto"}}, "bf16"),
                                           ({"fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"}}, "bf16"),
                                           ({"bf16": {"enabled": "auto"}}, "fp16"),
                                           ({"fp16": {"enabled": "auto"}}, "fp32")])
def test_a_given_precision_fills_an_auto_precision(config, given):
    # issue 32: `check --precision bf16` on fp16.enabled "auto" was refused ("only fills what the config leaves
    # 'auto'"): the Trainer's --bf16 makes that config a bf16 run
    s = read_settings(config, TINY, 1, TrainingShape(precision=given))
    assert s.precision == given and "precision" not in [a.name for a in s.assumed]
    assert given_conflicts(config, TINY, 1, TrainingShape(precision=given)) == []


@pytest.mark.parametrize("config, given, written", [
    ({"fp16": {"enabled": "auto"}, "bf16": {"enabled": False}}, "bf16", "bf16.enabled to false"),
    ({"fp16": {"enabled": True}, "bf16": {"enabled": "auto"}}, "bf16", "runs fp16"),
    ({"fp16": {"enabled": True}}, "fp32", "runs fp16"),
])
def test_a_given_precision_against_an_explicit_value_is_a_conflict(config, given, written):
    (line,) = given_conflicts(config, TINY, 1, TrainingShape(precision=given))
    assert f"precision {given}" in line and written in line


@pytest.mark.parametrize("text", ["true", "True", "1", "yes", "on"])
def test_enabled_as_a_string_is_read_as_deepspeed_does(text):
    # pydantic lax bool (DeepSpeed's config models): "true" is True, so this is bf16, not fp32
    s = read_settings({"bf16": {"enabled": text}}, TINY, 1)
    assert s.precision == "bf16" and "precision" not in [a.name for a in s.assumed]
    result = estimate({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": text}}, TINY, shape(),
                      Cluster(gpus=1))
    assert result.stage(0).per_gpu["parameters"] == 2 * P
    assert read_settings({"fp16": {"enabled": "false"}}, TINY, 1).precision == "fp32"


def test_no_config_assumes_fp16_unless_given():
    result = estimate(None, TINY, shape(), Cluster(gpus=1))
    assert [a.value for a in result.assumed if a.name == "precision"] == ["fp16"]
    result = estimate(None, TINY, shape(precision="fp32"), Cluster(gpus=1))
    assert result.settings.precision == "fp32" and "precision" not in names(result)


# -- stage -------------------------------------------------------------------------------------------

def test_stage_auto_is_stage_0_assumed_and_set_by_flag():
    config = {"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": True}, "zero_optimization": {"stage": "auto"}}
    assumed = estimate(config, TINY, shape(), Cluster(gpus=4))
    (st,) = [a for a in assumed.assumed if a.name == "zero_stage"]
    assert (st.value, st.flag, st.pointer) == (0, "--stage", "/zero_optimization/stage")
    assert assumed.configured.option == Option(0)
    given = estimate(config, TINY, apply_overrides(shape(), stage=3), Cluster(gpus=4))
    assert given.configured.option == Option(3) and "zero_stage" not in names(given)
    # stage 3 over 4 ranks: 2-byte parameters partitioned, P * 2 / 4, plus a whole 2-byte copy of the
    # parameters under stage3_param_persistence_threshold on every rank: without a parameter list, the
    # norm weights (2 layers × 2 norms + the final norm, 64 each; memory/persistence.py)
    assert given.configured.per_gpu["parameters"] == 2 * P // 4 + 2 * (2 * 2 * 64 + 64)
    assert given_conflicts({"zero_optimization": {"stage": 2}}, TINY, 4, TrainingShape(zero_stage=3))


# -- optimizer ---------------------------------------------------------------------------------------

def test_missing_or_unknown_optimizer_is_assumed_with_its_config_key():
    missing = read_settings({"fp16": {"enabled": True}}, TINY, 1)
    (opt,) = [a for a in missing.assumed if a.name == "optimizer"]
    assert (opt.value, opt.pointer, opt.flag) == ("AdamW", "", "")
    assert "set it in the DeepSpeed config" in opt.message()
    typeless = read_settings({"optimizer": {"params": {"lr": 1e-4}}}, TINY, 1)
    assert [a.pointer for a in typeless.assumed if a.name == "optimizer"] == ["/optimizer"]
    given = read_settings({"optimizer": {"type": "SGD"}}, TINY, 1)
    assert "optimizer" not in [a.name for a in given.assumed]


# -- encoder-decoder target length -----------------------------------------------------------------

def test_encoder_decoder_target_length_assumed_then_given_by_flag_and_field(tmp_path):
    t5 = spec_from_hf_config(T5)
    assert t5.encoder_decoder and not spec_from_hf_config(LLAMA).encoder_decoder
    config = {"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": True}}
    assumed = estimate(config, t5, TrainingShape(sequence_length=512), Cluster(gpus=1))
    (target,) = [a for a in assumed.assumed if a.name == "target_length"]
    assert (target.value, target.flag, target.field) == (512, "--target-len", "target_length")
    assert "sequence length" in target.effect
    by_flag = apply_overrides(TrainingShape(sequence_length=512), target_len=128)
    assert by_flag.target_length == 128
    (tmp_path / "config.json").write_text(json.dumps(T5))
    (tmp_path / "model.yaml").write_text("hf_config: config.json\nsequence_length: 512\ntarget_length: 128\n")
    _, by_field = load_description(tmp_path / "model.yaml")
    assert by_field.target_length == 128
    for given in (by_flag, by_field):
        assert "target_length" not in names(estimate(config, t5, given, Cluster(gpus=1)))
    # a decoder-only model has no target length to assume
    assert "target_length" not in names(estimate(config, spec_from_hf_config(LLAMA), by_flag, Cluster(gpus=1)))


# -- load inputs -------------------------------------------------------------------------------------

def test_load_defaults_follow_the_hf_trainer():
    config = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}
    checkpoint = spec_from_hf_config({**LLAMA, "torch_dtype": "bfloat16"})
    assert checkpoint.checkpoint_dtype == "bf16"
    assert spec_from_hf_config({**LLAMA, "torch_dtype": "float32", "dtype": "float16"}).checkpoint_dtype == "fp16"
    result = estimate(config, checkpoint, TrainingShape(sequence_length=S), Cluster(gpus=8))
    found = {a.name: a.value for a in result.assumed}
    assert found["load_dtype"] == "bf16" and found["zero_init"] is True
    assert "meta_device" not in found  # under zero.Init no rank builds the whole model
    stage2 = estimate({**config, "zero_optimization": {"stage": 2}}, spec_from_hf_config(LLAMA),
                      TrainingShape(sequence_length=S), Cluster(gpus=8))
    found = {a.name: a for a in stage2.assumed}
    assert found["load_dtype"].value == "fp32" and "zero_init" not in found  # zero.Init is stage 3 only
    assert (found["meta_device"].value, found["meta_device"].flag) == (False, "--meta-load/--no-meta-load")


def test_load_inputs_by_flag_and_field_reach_the_load_phase(tmp_path):
    # stage 2, 8 GPUs on a node, bf16 training of 1M parameters: loaded in bf16 every rank holds 2 B/param in
    # host RAM (8 ranks: 16 MB per node); built on the meta device and materialised on the GPU, none.
    config = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {"stage": 2}}
    by_flag = apply_overrides(TrainingShape(), load_dtype="bf16", meta_load=False, zero_init=False)
    _spec, by_field = describe(tmp_path, load_dtype="bf16", meta_load=False, zero_init=False)
    assert by_flag.load == by_field.load == LoadInputs(load_dtype="bf16", zero_init=False, meta_device=False)
    s = read_settings(config, TINY, 8)
    cluster = Cluster(gpus=8, gpus_per_node=8)
    host = load_phase(TINY, s, Option(2), cluster, by_flag.load)
    built = next(m for m in host.moments if m.name == "built")
    assert built.node_bytes("cpu", 8) == 8 * 2 * P
    meta = load_phase(TINY, s, Option(2), cluster, apply_overrides(TrainingShape(), load_dtype="bf16",
                                                                   meta_load=True).load)
    assert next(m for m in meta.moments if m.name == "built").node_bytes("cpu", 8) == 0
    fp32 = load_phase(TINY, s, Option(2), cluster, replace(by_flag.load, load_dtype="fp32"))
    assert next(m for m in fp32.moments if m.name == "built").node_bytes("cpu", 8) == 8 * 4 * P
    for given in (by_flag, by_field):
        result = estimate(config, TINY, given, Cluster(gpus=8))
        assert not {"load_dtype", "zero_init", "meta_device"} & set(names(result))


def test_bad_flag_values_are_one_line_errors():
    from zeroadvisor.model.errors import ModelError

    for kw in ({"stage": 4}, {"precision": "fp8"}, {"load_dtype": "int8"}, {"micro_batch": 0}, {"target_len": -1}):
        with pytest.raises(ModelError):
            apply_overrides(TrainingShape(), **kw)


# -- the command line: flags on both commands, a contradiction is exit 2 --------------------------

AUTO = '{"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "auto"}, "zero_optimization": {"stage": "auto"}}'


def test_estimate_json_and_text_show_the_assumptions(cli, tmp_path):
    (tmp_path / "ds.json").write_text(AUTO)
    result = cli("estimate", tmp_path / "ds.json", "--params", "1B", "--gpus", "8", "-f", "json")
    assert result.returncode == 0, result.stderr
    assumed = {a["name"]: a for a in json.loads(result.stdout)["assumed"]}
    assert {"micro_batch_size", "precision", "zero_stage", "sequence_length", "optimizer"} <= set(assumed)
    assert set(assumed["micro_batch_size"]) == {"name", "value", "flag", "field", "pointer", "effect"}
    assert (assumed["micro_batch_size"]["value"], assumed["micro_batch_size"]["flag"]) == (1, "--micro-batch")
    text = cli("estimate", tmp_path / "ds.json", "--params", "1B", "--gpus", "8").stdout
    assert "Assumed (not given" in text and "--micro-batch" in text
    given = cli("estimate", tmp_path / "ds.json", "--params", "1B", "--gpus", "8", "-f", "json",
                "--micro-batch", "4", "--precision", "fp32", "--stage", "2", "--seq-len", "512",
                "--load-dtype", "bf16", "--no-meta-load", "--no-zero-init")
    data = json.loads(given.stdout)
    # --params: no layers to count; no optimizer block: the client optimizer and its implementation (--optim)
    assert [a["name"] for a in data["assumed"]] == ["optimizer", "architecture", "optim"]
    assert (data["model"]["micro_batch_size"], data["model"]["precision"]) == (4, "fp32")
    assert [st["stage"] for st in data["stages"] if st["configured"]] == [2]


@pytest.mark.parametrize("command", ["estimate", "check"])
def test_a_flag_the_config_contradicts_is_a_usage_error(cli, tmp_path, command):
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true}}')
    config = [tmp_path / "ds.json"]
    for flag in (["--micro-batch", "2"], ["--precision", "fp16"]):
        result = cli(command, *config, "--params", "1B", "--gpus", "8", "--gpu", "A100-SXM4-80GB", *flag)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr.count("\n") == 1 and flag[0] in result.stderr
    agreeing = cli(command, *config, "--params", "1B", "--gpus", "8", "--gpu", "A100-SXM4-80GB", "--micro-batch", "4",
                   "--precision", "bf16", "--fail-on", "never") if command == "check" else \
        cli(command, *config, "--params", "1B", "--gpus", "8", "--micro-batch", "4", "--precision", "bf16")
    assert agreeing.returncode == 0, agreeing.stderr


def test_simple_parse_and_typer_agree_on_the_new_flags():
    argv = ["ds.json", "--params", "1B", "--gpus", "8", "--gpu", "H100-SXM5-80GB", "--micro-batch", "2",
            "--precision", "bf16",
            "--stage", "3", "--target-len", "64", "--load-dtype", "fp16", "--zero-init", "--meta-load",
            "--tensor-parallel", "2", "--pipeline-parallel", "1", "--sequence-parallel", "4"]
    values = options.parse_simple(options.CHECK, argv)
    names = ("target_len", "micro_batch", "precision", "stage", "load_dtype", "zero_init", "meta_load",
             "tensor_parallel", "pipeline_parallel", "sequence_parallel", "expert_parallel", "peft", "lora_r",
             "lora_target_modules", "quantization")
    assert {name: values[name] for name in names} == {
        "target_len": 64, "micro_batch": 2, "precision": "bf16", "stage": "3", "load_dtype": "fp16", "zero_init": True,
        "meta_load": True, "tensor_parallel": 2, "pipeline_parallel": 1, "sequence_parallel": 4,
        "expert_parallel": None,
        "peft": None, "lora_r": None, "lora_target_modules": None, "quantization": None}
    # --stage's choice text becomes its int
    shape = build(to_request(options.CHECK, values), spelling=options.CHECK.spelling()).shape
    assert (shape.target_length, shape.micro_batch_size, shape.precision, shape.zero_stage) == (64, 2, "bf16", 3)
    assert (shape.load.load_dtype, shape.load.zero_init, shape.load.meta_device) == ("fp16", True, True)
    assert (shape.tensor_parallel, shape.pipeline_parallel, shape.sequence_parallel) == (2, 1, 4)


# -- assumed-input findings first in every format --------------------------------------------------

# An error on line 1 (an unknown key) and assumed inputs: the ZA808 findings (no line) come first.
BROKEN = '{"zero_optimisation": {"stage": 2},\n "train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": true}}'


def _codes_in_order(fmt: str, out: str) -> list[str]:
    if fmt == "json":
        return [f["code"] for f in json.loads(out)["findings"]]
    if fmt == "sarif":
        validate_sarif(json.loads(out))
        return [r["ruleId"] for r in json.loads(out)["runs"][0]["results"]]
    head = out.split("ZeRO memory estimate", maxsplit=1)[0].rsplit("| GB per GPU", maxsplit=1)[-1]
    return re.findall(r"\b(ZA\d{3})\b", head)


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "markdown", "github"])
def test_assumed_input_findings_come_first_in_every_format(cli, tmp_path, fmt):
    (tmp_path / "ds.json").write_text(BROKEN)
    result = cli("check", tmp_path / "ds.json", "--params", "1B", "--gpus", "8", "--gpu", "A100-SXM4-80GB", "-f", fmt)
    assert result.returncode == 1, result.stderr
    codes = _codes_in_order(fmt, result.stdout)
    assumed = codes.count("ZA808")
    # micro batch and optimizer; the sequence length is verdict-unknown's (ZA811), the load inputs only where the
    # load phase binds
    assert assumed >= 2
    assert codes[:assumed] == ["ZA808"] * assumed and "ZA102" in codes[assumed:], codes
    if fmt == "json":
        first = json.loads(result.stdout)["findings"][0]
        assert first["line"] is None and first["severity"] == "warning"
        pointers = {f["pointer"] for f in json.loads(result.stdout)["findings"] if f["code"] == "ZA808"}
        assert "/train_micro_batch_size_per_gpu" in pointers


def test_estimate_and_check_list_the_same_assumptions(tmp_path):
    from zeroadvisor.advisor.check import CheckOptions, check_document
    from zeroadvisor.config.source import parse

    (tmp_path / "ds.json").write_text(AUTO)
    spec, given = TINY, TrainingShape()
    alone = api.run_estimate(build(Request.taking(Command.ESTIMATE, config=str(tmp_path / "ds.json"), model=spec,
                                                         gpus=8))).estimate
    options_ = CheckOptions(model=spec, shape=given, cluster=Cluster(gpus=8, gpu_memory=80 * GB))
    checked = check_document(parse(AUTO, "ds.json"), options_)
    messages = [f.message for f in checked.findings if f.code == "ZA808"]
    # the findings are the assumptions that can change the answer (never the sequence length: ZA811 says it);
    # the JSON lists every one, as estimate does
    assert set(messages) <= {a.message() for a in alone.assumed}
    assert {"micro_batch_size", "precision"} <= {a.name for a in alone.assumed
                                                  if a.message() in messages}
    assert not any(a.message() in messages for a in alone.assumed if a.name == "sequence_length")
    assert checked.estimate_dict()["assumed"] == [a.to_dict() for a in alone.assumed]


def test_machine_facts_no_judged_run_uses_are_not_assumed():
    """Inter-node bandwidth only with more than one node, CPU cores and the launcher only with the optimizer on
    the CPU, NVMe bandwidth only with NVMe (memory/assumed.py NEEDS): an input that cannot matter is not said."""
    from zeroadvisor.hardware.machine import DEFAULTS, Hardware
    from zeroadvisor.memory.assumed import hardware_assumptions, machine_uses
    from zeroadvisor.memory.options import Option
    from zeroadvisor.vocab import Device

    hw = Hardware(None, defaulted=tuple(DEFAULTS))
    plain, offload = Option(2), Option(3, Device.CPU, Device.NONE)
    one_node = {a.name for a in hardware_assumptions(hw, machine_uses([plain], nodes=1))}
    assert one_node == {"efficiency"}
    two_nodes = {a.name for a in hardware_assumptions(hw, machine_uses([plain], nodes=2))}
    assert two_nodes == {"efficiency", "inter_node_bandwidth"}
    offloaded = {a.name for a in hardware_assumptions(hw, machine_uses([plain, offload], nodes=1))}
    assert offloaded == {"efficiency", "cpu_cores", "launcher"}
    nvme = {a.name for a in hardware_assumptions(hw, machine_uses([Option(3, Device.NVME, Device.NVME)], 1))}
    assert nvme == {"efficiency", "nvme_bandwidth"}
