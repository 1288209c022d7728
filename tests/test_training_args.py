"""--training-args: TrainingArguments JSON/YAML, LLaMA-Factory and axolotl YAMLs; the Trainer's fill; the CLI.

Expected values come from the projects' own defaults (cited in config/training_args.py) and hand
arithmetic; transformers itself judges the fill in tests/oracle/test_hf_fill_oracle.py.
"""

from __future__ import annotations

import json
import typing

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config import training_args
from zeroadvisor.config.training_args import TrainerInputError, coerce, from_mapping, read_training_args
from zeroadvisor.deepspeed import hf_fill
from zeroadvisor.lint.context import LintOptions
from zeroadvisor.rules.linter import lint_text

LLAMA_FACTORY = """\
### model
model_name_or_path: meta-llama/Llama-3.1-8B-Instruct
### method
stage: sft
finetuning_type: full
deepspeed: ds_z3_config.json
### dataset
template: llama3
cutoff_len: 2304
### train
per_device_train_batch_size: 1
gradient_accumulation_steps: 2
learning_rate: 1.0e-5
bf16: true
"""
AXOLOTL = """\
base_model: mistralai/Mistral-7B-v0.1
sequence_len: 4096
micro_batch_size: 2
gradient_accumulation_steps: 4
gradient_checkpointing: true
learning_rate: 0.000005
deepspeed: deepspeed_configs/zero3_bf16.json
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_training_arguments_json_as_to_json_string_writes_it(tmp_path):
    data = {"output_dir": "out", "per_device_train_batch_size": 4, "gradient_accumulation_steps": 8,
            "bf16": True, "fp16": False, "gradient_checkpointing": True, "learning_rate": 2e-5,
            "deepspeed": "ds.json", "report_to": ["none"], "lr_scheduler_kwargs": {}}
    args = read_training_args(_write(tmp_path, "args.json", json.dumps(data, indent=2)))
    assert args.project == "transformers"
    assert (args.get("per_device_train_batch_size"), args.get("gradient_accumulation_steps")) == (4, 8)
    assert args.get("bf16") is True and args.checkpointing is True
    assert args.get("max_grad_norm") == 1.0  # not given: TrainingArguments' default
    assert args.deepspeed == "ds.json" and args.sequence_length is None


def test_llama_factory_yaml(tmp_path):
    args = read_training_args(_write(tmp_path, "llama3_full_sft.yaml", LLAMA_FACTORY))
    assert args.project == "llama-factory"
    assert args.get("per_device_train_batch_size") == 1 and args.get("learning_rate") == 1e-5
    assert (args.sequence_length, args.sequence_key) == (2304, "cutoff_len")
    assert args.checkpointing is True  # LLaMA-Factory checkpoints unless disable_gradient_checkpointing
    assert args.model == "meta-llama/Llama-3.1-8B-Instruct" and args.deepspeed == "ds_z3_config.json"


def test_llama_factory_defaults_and_disabled_checkpointing(tmp_path):
    args = read_training_args(_write(tmp_path, "a.yaml", "stage: sft\ndisable_gradient_checkpointing: true\n"))
    assert args.checkpointing is False
    assert (args.sequence_length, args.sequence_key) == (2048, "cutoff_len")  # data_args.py default
    assert args.get("per_device_train_batch_size") == 8  # Seq2SeqTrainingArguments' default


def test_axolotl_yaml(tmp_path):
    args = read_training_args(_write(tmp_path, "axolotl.yml", AXOLOTL))
    assert args.project == "axolotl"
    assert args.get("per_device_train_batch_size") == 2 and args.get("gradient_accumulation_steps") == 4
    assert args.get("bf16") is True  # bf16 defaults to "auto": bf16 on an Ampere-or-newer GPU
    assert any("bf16" in note for note in args.notes)
    assert (args.sequence_length, args.checkpointing, args.model) == (4096, True, "mistralai/Mistral-7B-v0.1")
    assert args.label("per_device_train_batch_size").startswith("micro_batch_size in ")


def test_axolotl_defaults_and_batch_size(tmp_path):
    args = from_mapping({"base_model": "m", "batch_size": 32, "micro_batch_size": 4, "fp16": True, "bf16": False},
                        "a.yml")
    assert args.get("gradient_accumulation_steps") == 8  # batch_size // micro_batch_size
    assert (args.get("fp16"), args.get("bf16")) == (True, False)
    assert from_mapping({"base_model": "m"}, "a.yml").get("per_device_train_batch_size") == 1
    assert from_mapping({"base_model": "m"}, "a.yml").sequence_length == 512


@pytest.mark.parametrize("text,message", [
    ("per_device_train_batch_size: four\n", "expected an integer, got 'four'"),
    ("bf16: maybe\n", "expected true or false"),
    ("learning_rate: [1]\n", "expected a number"),
    ("- 1\n- 2\n", "must be a mapping"),
    ("cutoff_len: -5\nstage: sft\n", "expected a positive integer"),
    ("a: [\n", "a.yaml:"),
])
def test_bad_training_arguments_are_one_line_errors(tmp_path, text, message):
    with pytest.raises(TrainerInputError) as err:
        read_training_args(_write(tmp_path, "a.yaml", text))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_yaml_number_written_as_text_is_read_as_the_parser_converts_it():
    # PyYAML reads 5e-5 (no dot) as a string; HfArgumentParser's float() reads it as 5e-05
    assert from_mapping({"learning_rate": "5e-5"}, "a.yaml").get("learning_rate") == 5e-5


def test_fill_by_hand():
    """Hand arithmetic of trainer_config_process/finalize for 16 GPUs, micro 2, accumulation 4, h = 4096."""
    config = {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
              "gradient_accumulation_steps": "auto", "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"},
              "scheduler": {"params": {"total_num_steps": "auto", "warmup_num_steps": "auto"}},
              "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto",
                                    "stage3_prefetch_bucket_size": "auto",
                                    "stage3_param_persistence_threshold": "auto"}}
    args = coerce({"per_device_train_batch_size": 2, "gradient_accumulation_steps": 4, "bf16": True,
                   "max_steps": 1000, "warmup_steps": 0.05})
    out = hf_fill.fill(config, args, 16, 4096).config
    assert (out["train_batch_size"], out["train_micro_batch_size_per_gpu"], out["gradient_accumulation_steps"]) \
        == (16 * 2 * 4, 2, 4)
    assert out["bf16"]["enabled"] is True and out["fp16"]["enabled"] is False
    assert out["scheduler"]["params"] == {"total_num_steps": 1000, "warmup_num_steps": 50}  # ceil(1000 x 0.05)
    zero = out["zero_optimization"]
    assert zero["reduce_bucket_size"] == 4096 * 4096
    assert zero["stage3_prefetch_bucket_size"] == int(0.9 * 4096 * 4096)
    assert zero["stage3_param_persistence_threshold"] == 10 * 4096  # trainer_config_finalize: 10 * hidden_size
    assert config["train_batch_size"] == "auto"  # the caller's config is not changed


def test_stage2_does_not_fill_the_stage3_buckets():
    out = hf_fill.fill({"zero_optimization": {"stage": 2, "reduce_bucket_size": "auto",
                                              "stage3_prefetch_bucket_size": "auto"}}, coerce({}), 1, 1024).config
    assert out["zero_optimization"] == {"stage": 2, "reduce_bucket_size": 1024 * 1024,
                                        "stage3_prefetch_bucket_size": "auto"}


def test_mismatch_errors_at_the_key_with_a_fix():
    text = '{\n  "gradient_accumulation_steps": 4,\n  "gradient_clipping": 0.5\n}\n'
    findings = [f for f in lint_text(text, "ds.json", LintOptions(training={"gradient_accumulation_steps": 8}))
                if f.code == "ZA310"]
    assert [(f.pointer, f.line, f.column) for f in findings] == [("/gradient_accumulation_steps", 2, 3),
                                                                  ("/gradient_clipping", 3, 3)]
    assert findings[0].fix == {"gradient_accumulation_steps": "auto"}
    assert "max_grad_norm (default)" in findings[1].message and "is 1.0" in findings[1].message


def test_train_batch_size_needs_the_world_size():
    text = '{"train_batch_size": 100, "train_micro_batch_size_per_gpu": "auto"}'
    options = {"per_device_train_batch_size": 4}
    assert not [f for f in lint_text(text, "d.json", LintOptions(training=options)) if f.code == "ZA310"]
    fired = [f for f in lint_text(text, "d.json", LintOptions(gpus=8, training=options)) if f.code == "ZA310"]
    assert [f.pointer for f in fired] == ["/train_batch_size"] and "is 32 on 8 GPU(s)" in fired[0].message


# -- the command line -----------------------------------------------------------------------------

DS = ('{\n  "train_micro_batch_size_per_gpu": 4,\n  "bf16": {"enabled": "auto"},\n'
      '  "zero_optimization": {"stage": 2}\n}\n')


def test_lint_with_training_args_reports_the_mismatch(cli, tmp_path):
    ds = _write(tmp_path, "ds.json", DS)
    args = _write(tmp_path, "args.yaml", "per_device_train_batch_size: 2\nbf16: true\n")
    result = cli("lint", ds, "--training-args", args)
    assert result.returncode == 1
    assert f"{ds}:2:3: ZA310 [error]" in result.stdout
    assert cli("lint", ds, "--training-args", _write(tmp_path, "ok.yaml", "per_device_train_batch_size: 4\n")) \
        .returncode == 0


def test_estimate_takes_the_shape_from_training_args(cli, tmp_path):
    ds = _write(tmp_path, "ds.json", '{"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "auto"}, '
                                     '"zero_optimization": {"stage": 2}}')
    args = _write(tmp_path, "args.json", json.dumps({"per_device_train_batch_size": 3, "bf16": True}))
    result = cli("estimate", ds, "--params", "7B", "--gpus", "8", "--training-args", args)
    assert result.returncode == 0, result.stderr
    assert "bf16" in result.stdout and "micro batch 3" in result.stdout


def test_the_trainers_optim_sets_the_states_and_an_unknown_name_is_a_note(cli, tmp_path):
    """axolotl's ``optimizer`` is the Trainer's optim (its builder passes it on); rmsprop keeps one fp32 state, AdamW
    two (memory/bytes.py CLIENT_OPTIMIZER_STATES). A name no Trainer release here knows is not an error: a note."""
    ds = _write(tmp_path, "ds.json", '{"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "auto"}, '
                                     '"zero_optimization": {"stage": 1}}')

    def states(optimizer: str):
        args = _write(tmp_path, "axolotl.yml", f"base_model: x\nsequence_len: 512\noptimizer: {optimizer}\n")
        result = cli("check", ds, "--params", "1B", "--gpus", "1", "--gpu", "A100-SXM4-80GB", "--training-args", args,
                     "--format", "json", "--fail-on", "never")
        assert result.returncode == 0, result.stderr
        (stage1,) = [st for st in json.loads(result.stdout)["estimate"]["stages"] if st["label"] == "Z1"]
        return stage1["per_gpu"]["optimizer_states"], result.stderr
    rmsprop, adamw, (unknown, note) = states("rmsprop")[0], states("adamw_torch")[0], states("optimi_adamw")
    assert (rmsprop, adamw) == (8 * 10**9, 12 * 10**9)  # fp32 master 4 B + 1 or 2 fp32 states, one GPU
    assert unknown == adamw and "axolotl.yml gives 'optimi_adamw', not a Trainer optim name" in note


def test_estimate_says_what_it_took_from_the_files_as_check_does(cli, tmp_path):
    ds = _write(tmp_path, "ds.json", '{"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}}')
    args = _write(tmp_path, "axolotl.yml", "base_model: x\nsequence_len: 640\noptimizer: rmsprop\n")
    common = (ds, "--params", "1B", "--gpus", "8", "--gpu", "A100-SXM4-80GB", "--training-args", args)
    notes = [cli("estimate", *common).stderr, cli("check", *common, "--fail-on", "never").stderr]
    for stderr in notes:
        assert "sequence length 640 from sequence_len in" in stderr and "optim rmsprop from optimizer in" in stderr
    assert notes[0].count("sequence length 640") == 1  # said once


@pytest.mark.parametrize("name,text,message", [
    ("missing.yaml", None, "missing.yaml"),
    ("bad.yaml", "per_device_train_batch_size: x\n", "expected an integer"),
    ("list.json", "[1, 2]", "must be a mapping"),
])
def test_bad_training_args_exit_2_with_one_line(cli, tmp_path, name, text, message):
    ds = _write(tmp_path, "ds.json", DS)
    path = _write(tmp_path, name, text) if text is not None else tmp_path / name
    result = cli("lint", ds, "--training-args", path)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("fields", "kind"), [(training_args.IntField, int), (training_args.NumberField, float),
                                              (training_args.TextField, str)])
def test_typed_field_names_are_the_fields_of_that_type(fields, kind):
    """TrainingArgs.get's overloads promise an int, a number or a text for these names: they must be exactly
    the fields HfArgumentParser converts to that type (TYPES), and their defaults of that type."""
    names = set(typing.get_args(fields))
    assert names == {name for name, of in training_args.TYPES.items() if of is kind}
    holds = (int, float) if kind is float else kind  # a number field may hold an int (warmup_steps: 0)
    for name in names:
        defaults = [training_args.DEFAULTS[name]] + [project[name] for project in
                                                     training_args.PROJECT_DEFAULTS.values() if name in project]
        assert all(isinstance(d, holds) and not isinstance(d, bool) for d in defaults), (name, defaults)


def test_openrlhf_arguments_are_not_checked_as_the_hf_trainers():
    # OpenRLHF's own loop builds the config from its flags (get_ds_train_config): transformers' deepspeed_init never
    # runs its check, so train_batch_size against micro x world is not a mismatch there
    from zeroadvisor.config.launch import parse_launch

    args = parse_launch("deepspeed --module openrlhf.cli.train_ppo --pretrain m --micro_train_batch_size 2 "
                        "--train_batch_size 128 --zero_stage 2 --bf16").training
    assert args.project == "openrlhf"
    text = '{"train_batch_size": 128, "train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}}'
    assert not [f for f in lint_text(text, "d.json", LintOptions(gpus=8, training=args)) if f.code == "ZA310"]
    hf = from_mapping({"per_device_train_batch_size": 2}, "args.json")
    assert [f for f in lint_text(text, "d.json", LintOptions(gpus=8, training=hf)) if f.code == "ZA310"]


def test_axolotl_auto_precision_as_its_examples_write_it(tmp_path):
    """axolotl's examples write ``bf16: auto`` and ``tf32: auto`` (utils/schemas/config.py: Literal["auto"] | bool):
    resolve_dtype makes bf16 true on a bf16 GPU, and false where fp16 is on."""
    args = read_training_args(_write(tmp_path, "a.yml", "base_model: m\nbf16: auto\ntf32: auto\nfp16:\n"))
    assert (args.get("bf16"), args.get("fp16")) == (True, False)
    args = read_training_args(_write(tmp_path, "b.yml", "base_model: m\nbf16: auto\nfp16: true\n"))
    assert (args.get("bf16"), args.get("fp16")) == (False, True)
    with pytest.raises(TrainerInputError, match="bf16"):
        read_training_args(_write(tmp_path, "c.yml", "base_model: m\nbf16: sometimes\n"))


def _llama(tmp_path) -> str:
    """A Llama-2-7B architecture (config.json) to cost the activations of."""
    folder = tmp_path / "llama"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
        "num_attention_heads": 32, "vocab_size": 32000}))
    return str(folder)


@pytest.mark.parametrize(("text", "fused"), [
    ("model_name_or_path: m\nattn_implementation: eager\n", False),  # TRL ModelConfig
    ("model_name_or_path: m\nattn_implementation: flash_attention_2\n", True),
    ("model_name_or_path: m\nbf16: true\n", None),  # silent: transformers' default (SDPA), the description decides
    ("stage: sft\ncutoff_len: 1024\nflash_attn: disabled\n", False),  # LLaMA-Factory: "disabled" is eager
    ("stage: sft\ncutoff_len: 1024\nflash_attn: fa2\n", True),
    ("base_model: m\nsequence_len: 1024\neager_attention: true\n", False),  # axolotl's switches
    ("base_model: m\nsequence_len: 1024\nflash_attention: true\n", True),
    ("base_model: m\nsequence_len: 1024\nflash_attention: false\n", None),
])
def test_the_attention_kernel_a_file_asks_for_is_read(tmp_path, text, fused):
    args = read_training_args(_write(tmp_path, "train.yaml", text))
    assert args.attention is fused
    assert (args.attention_from != "") == (fused is not None)


def test_an_eager_attention_file_costs_the_scores_and_says_where_it_came_from(cli, tmp_path):
    ds = _write(tmp_path, "ds.json", '{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, '
                                     '"zero_optimization": {"stage": 2}}')

    def peak(text: str) -> tuple[int, str]:
        args = _write(tmp_path, "args.yaml", "model_name_or_path: m\nmax_length: 2048\n" + text)
        result = cli("check", ds, "--model", _llama(tmp_path), "--gpus", "8", "--gpu", "A100-SXM4-80GB",
                     "--training-args", args, "--format", "json", "--fail-on", "never")
        report = json.loads(result.stdout)
        configured = next(s for s in report["estimate"]["stages"] if s["configured"])
        return configured["per_gpu"]["activations"], result.stderr

    eager, notes = peak("attn_implementation: eager\n")
    fused, _ = peak("attn_implementation: sdpa\n")
    assert eager > fused and "attention eager (the s x s scores kept) from attn_implementation in" in notes


def test_openrlhf_before_0_8_10_loads_eager_attention_without_flash_attn(cli, tmp_path):
    # openrlhf/models/actor.py @ v0.8.5: "flash_attention_2" if use_flash_attention_2 else "eager"; from v0.8.10
    # --attn_implementation defaults to flash_attention_2 (inputs/run.py OPENRLHF_FLASH_DEFAULT)
    ds = _write(tmp_path, "ds.json", '{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, '
                                     '"zero_optimization": {"stage": 2}}')
    launch = "deepspeed --module openrlhf.cli.train_sft --max_len 2048 --micro_train_batch_size 1 --bf16"

    def run(pin: str | None, extra: str = "") -> tuple[int, str]:
        (tmp_path / "requirements.txt").unlink(missing_ok=True)
        if pin:
            (tmp_path / "requirements.txt").write_text(f"openrlhf=={pin}\n")
        result = cli("check", ds, "--model", _llama(tmp_path), "--gpus", "8", "--gpu", "A100-SXM4-80GB", "--launch",
                     launch + extra, "--format", "json", "--fail-on", "never")
        report = json.loads(result.stdout)
        return next(s for s in report["estimate"]["stages"] if s["configured"])["per_gpu"]["activations"], \
            result.stderr

    old, notes = run("0.8.5")
    assert "attention eager: OpenRLHF 0.8.5" in notes
    new, notes = run("0.8.10")
    assert "attention flash_attention_2: OpenRLHF 0.8.10" in notes
    flagged, _ = run("0.8.5", " --flash_attn")
    assert old > new == flagged


def test_ms_swift_s_sequence_parallel_splits_the_activations_and_says_so(cli, tmp_path):
    ds = _write(tmp_path, "ds.json", '{"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "auto"}, '
                                     '"zero_optimization": {"stage": 3}}')
    launch = ("NPROC_PER_NODE=4 swift sft --model m --train_type full --deepspeed ds.json --max_length 32768 "
              "--per_device_train_batch_size 1 --torch_dtype bfloat16 --attn_impl flash_attn")

    def activations(extra: str) -> tuple[int, str]:
        result = cli("check", ds, "--model", _llama(tmp_path), "--gpu", "A100-SXM4-80GB", "--launch",
                     launch + extra, "--format", "json", "--fail-on", "never")
        report = json.loads(result.stdout)
        return next(s for s in report["estimate"]["stages"] if s["configured"])["per_gpu"]["activations"], \
            result.stderr

    whole, _ = activations("")
    split, notes = activations(" --sequence_parallel_size 4")
    assert split < whole / 3 and "sequence parallel 4 from --sequence_parallel_size" in notes


@pytest.mark.parametrize(("text", "degree"), [
    ("base_model: m\nsequence_len: 8192\ncontext_parallel_size: 4\n", 4),
    ("base_model: m\nsequence_len: 8192\nsequence_parallel_degree: 2\n", 2),  # the older name
    ("base_model: m\nsequence_len: 8192\ncontext_parallel_size: 4\nsequence_parallel_degree: 2\n", 4),
    ("base_model: m\nsequence_len: 8192\n", None),
])
def test_axolotl_s_context_parallel_size_is_the_sequence_degree(tmp_path, text, degree):
    assert read_training_args(_write(tmp_path, "ax.yaml", text)).sequence_parallel == degree


@pytest.mark.parametrize(("text", "padding"), [
    ("model_name_or_path: m\nmax_length: 4096\npacking: true\n", "max_length"),  # TRL SFTConfig.packing
    ("model_name_or_path: m\nmax_length: 4096\npacking: false\n", None),
    ("stage: sft\ncutoff_len: 4096\nneat_packing: true\n", "max_length"),  # LLaMA-Factory
    ("base_model: m\nsequence_len: 4096\nsample_packing: true\n", "max_length"),  # axolotl
    ("base_model: m\nsequence_len: 4096\npad_to_sequence_len: true\n", "max_length"),
    ("base_model: m\nsequence_len: 4096\n", None),
])
def test_packing_fills_every_row_to_the_maximum_length(tmp_path, text, padding):
    args = read_training_args(_write(tmp_path, "train.yaml", text))
    assert args.padding == padding
    assert padding is None or "every row filled to the maximum length" in args.padding_from


def test_ms_swift_s_packing_flag_is_read():
    from zeroadvisor.config.launch import parse_launch

    training = parse_launch("swift sft --model m --max_length 8192 --packing true").training
    assert training.padding == "max_length"
    assert training.padding_from == "--packing (every row filled to the maximum length)"
    assert parse_launch("swift sft --model m --packing false").training.padding is None
